package extauthz

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestPolicyChangeDropsCopy: ext_authz cannot see whether the runtime accepts
// a RegisterPolicy or UnregisterPolicy, so the copy of the policy it holds is
// dropped when it allows one: the next SessionStart binding the id reads the
// runtime's, never rules the runtime no longer holds.
func TestPolicyChangeDropsCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		msg  proto.Message
		kept bool
	}{
		{"unregister", service + "UnregisterPolicy", &macpv1.UnregisterPolicyRequest{PolicyId: "policy.review"}, false},
		{"register again", service + "RegisterPolicy", &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{PolicyId: "policy.review", Rules: "{}"}}, false},
		{"unregister another", service + "UnregisterPolicy", &macpv1.UnregisterPolicyRequest{PolicyId: "policy.other"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, Config{Listen: "unused"})
			if err := srv.sessions.Policies().Register(macp.PolicyDescriptor{PolicyID: "policy.review", Mode: macp.ModeDecision, SchemaVersion: 1, Rules: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			b, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Check(context.Background(), checkRequest(tc.path, "agent://admin", frame(b)))
			if err != nil || resp.GetStatus().GetCode() != 0 {
				t.Fatalf("Check: %v %v, want allowed", err, resp.GetStatus())
			}
			if _, ok := srv.sessions.Policies().Lookup("policy.review"); ok != tc.kept {
				t.Errorf("policy.review held: %v, want %v", ok, tc.kept)
			}
		})
	}
}
