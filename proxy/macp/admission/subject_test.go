package admission

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/testjwt"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
)

// TestAdmissionSubject: the MACP runtime names the sender of a JWT it is
// forwarded by the token's sub (RUNTIME-NOTES §4). With
// authn.jwt.principal_claim set to another claim, a token whose sub is not
// that claim's value was admitted as the claim's principal (bob) while the
// runtime applied its messages as the sub (mallory): Warden's state and the
// runtime's named different senders. Refused now, on every MACP door (the
// sidecar and ext_authz share this admission); a token whose claims agree
// passes, and so does the default claim.
func TestAdmissionSubject(t *testing.T) {
	secret := []byte("admission-subject-secret-32-bytes-long")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(claims map[string]any) string {
		claims["iss"], claims["aud"], claims["exp"] = "https://issuer.example", "warden", time.Now().Add(time.Hour).Unix()
		return testjwt.Sign(t, testjwt.HS256(secret), "", claims)
	}
	for _, tt := range []struct {
		name   string
		claim  string
		claims map[string]any
		want   string // the principal admitted; "" refused UNAUTHENTICATED
	}{
		{"another claim naming another identity", "email", map[string]any{"sub": "agent://mallory", "email": "agent://bob"}, ""},
		{"another claim, no sub", "email", map[string]any{"email": "agent://bob"}, ""},
		{"another claim naming the same identity", "email", map[string]any{"sub": "agent://bob", "email": "agent://bob"}, "agent://bob"},
		{"the default claim", "", map[string]any{"sub": "agent://bob", "email": "agent://mallory"}, "agent://bob"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodJWT}, JWT: authn.JWTConfig{Issuer: "https://issuer.example",
				Audience: authn.Audience{"warden"}, Algorithms: []string{"HS256"}, HMACSecretFile: file, PrincipalClaim: tt.claim}}, authn.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := policies.New(context.Background(), policies.Config{})
			if err != nil {
				t.Fatal(err)
			}
			e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: p})
			if err != nil {
				t.Fatal(err)
			}
			g := New(NewMethods(nil), e, false, nil)
			hdr := map[string][]string{"authorization": {"Bearer " + token(tt.claims)}}
			got := g.Admit(context.Background(), Headers{Method: MACPService + "Send", Get: metadata.MD(hdr), Names: []string{"authorization"}, Client: "127.0.0.1:1"})
			switch {
			case tt.want == "" && (got.Refusal == nil || got.Refusal.Status != codes.Unauthenticated):
				t.Fatalf("admitted as %q (refusal %v), want UNAUTHENTICATED", got.Principal.ID, got.Refusal)
			case tt.want != "" && (got.Refusal != nil || got.Principal.ID != tt.want):
				t.Fatalf("refusal %v, principal %q; want %q admitted", got.Refusal, got.Principal.ID, tt.want)
			}
		})
	}
}
