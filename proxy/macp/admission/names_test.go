package admission

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
)

// TestAdmitNames: a door that gives the gate no metadata names (nil) has
// its calls refused INTERNAL; before, the rule on names was skipped and
// the call admitted. Given, empty (a call without metadata), the call is
// admitted; given, the rule applies.
func TestAdmitNames(t *testing.T) {
	p, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: p})
	if err != nil {
		t.Fatal(err)
	}
	g := New(NewMethods(nil), e, true, nil) // discovery admitted without credentials
	for _, tc := range []struct {
		name  string
		names []string
		want  codes.Code // codes.OK: admitted
	}{
		{"names not given", nil, codes.Internal},
		{"given, empty", []string{}, codes.OK},
		{"given, plain", []string{"user-agent", "te"}, codes.OK},
		{"given, an identity", []string{"x-forwarded-user"}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := g.Admit(context.Background(), Headers{Method: MACPService + "ListModes", Get: metadata.MD{}, Names: tc.names, Client: "127.0.0.1:1"})
			got := codes.OK
			if a.Refusal != nil {
				got = a.Refusal.Status
			}
			if got != tc.want {
				t.Fatalf("%v (%v), want %v", got, a.Refusal, tc.want)
			}
		})
	}
}
