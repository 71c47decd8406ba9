package authn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

// FuzzAuthenticateJWT feeds arbitrary bearer strings to a JWT authenticator:
// it must never panic, and must authenticate no string but the seeded valid token.
func FuzzAuthenticateJWT(f *testing.F) {
	k := keysOnce()
	clock := newClock()
	cfg := jwtConfig()
	cfg.JWT.JWKSFile = writeFile(f, "jwks.json", testjwt.JWKS(f, k.rsa, k.ec, k.ed))
	a, err := New(cfg, Options{Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}
	// RS256: unlike ECDSA, its signatures are not malleable, so no other
	// string can carry a valid signature over the same content.
	valid := testjwt.Sign(f, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	if _, err := a.Authenticate(context.Background(), Credentials{Bearer: valid}); err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	seeds := []string{
		valid,
		valid + "=",
		valid[:len(valid)-1],
		parts[0] + "." + parts[1] + ".",
		parts[0] + ".." + parts[2],
		"." + parts[1] + "." + parts[2],
		testjwt.Sign(f, k.rsaOther, k.rsa.KID, claimsAt(t0, "agent-a")),
		testjwt.Sign(f, k.rsa, k.rsa.KID, with(claimsAt(t0, "agent-a"), "exp", t0.Add(-time.Hour).Unix())),
		testjwt.Raw(f, map[string]any{"alg": "none"}, claimsAt(t0, "agent-a"), nil),
		testjwt.Raw(f, map[string]any{"alg": "HS256", "kid": k.rsa.KID}, claimsAt(t0, "agent-a"), []byte("sig")),
		"eyJhbGciOiJSUzI1NiJ9.e30.",
		"a.b.c", "...", "", "\x00", strings.Repeat("A", 1000),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, bearer string) {
		p, err := a.Authenticate(context.Background(), Credentials{Bearer: bearer})
		if bearer == valid {
			if err != nil || p.ID != "agent-a" {
				t.Fatalf("valid token refused: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("authenticated %q as %+v", bearer, p)
		}
		if Reason(err) == "unknown" || p.ID != "" {
			t.Fatalf("err %v outside the closed set, or principal %+v with an error", err, p)
		}
	})
}
