package sessions

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestRetransmissionMeetsRules: a retransmission is answered as a duplicate
// (the runtime does not apply it again) only where a new message would be
// let through too, but for the roles the sender had when it was accepted:
// an operator rule loaded since refuses it, and a Progress, which the
// runtime relays again whatever the session's state, is refused once the
// session is no longer open.
func TestRetransmissionMeetsRules(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	operator := filepath.Join(dir, "suspend_worker.rego")
	if err := os.WriteFile(operator, []byte(`package warden.macp
import rego.v1
deny contains {"code": "FORBIDDEN", "reason": "operator_policy", "msg": "worker suspended by the operator"} if input.principal.id == "agent://worker"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	withOperator, err := policies.New(ctx, policies.Config{Files: []string{operator}})
	if err != nil {
		t.Fatal(err)
	}
	accept := env(sessionID(80), worker, "TaskAccept", "acc", mustMarshal(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker}))
	progress := env(sessionID(80), worker, macp.TypeProgress, "prog", mustMarshal(t, &macpv1.ProgressPayload{Message: "working"}))
	for _, tc := range []struct {
		name   string
		before func(*testing.T, *Decider) // after the first sending
		resend *macpv1.Envelope
		allow  bool
		code   rules.Code
	}{
		{"retransmission", func(*testing.T, *Decider) {}, accept, true, rules.CodeOK},
		{"retransmission after an operator rule denies the sender", func(t *testing.T, e *Decider) { e.e.Swap(devAuth(t), withOperator) }, accept, false, rules.CodeForbidden},
		{"Progress resent while open", func(*testing.T, *Decider) {}, progress, true, rules.CodeOK},
		{"Progress resent after cancellation", func(t *testing.T, e *Decider) {
			d, err := e.Enforce(ctx, Request{Credentials: authn.Credentials{Bearer: planner}, Op: macp.OpCancel, SessionID: sessionID(80)})
			if err != nil || !d.Allow {
				t.Fatalf("cancel: %v %+v", err, d)
			}
			d.Settle(true)
		}, progress, false, rules.CodeSessionNotOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEnforcer(t, proxy.Config{}, nil)
			startTask(t, e, sessionID(80), true)
			for i := range 2 {
				if i == 1 {
					tc.before(t, e)
				}
				d, err := e.Enforce(ctx, req(tc.resend))
				if err != nil {
					t.Fatal(err)
				}
				d.Settle(d.Allow)
				want, code := true, rules.CodeOK
				if i == 1 {
					want, code = tc.allow, tc.code
				}
				if d.Allow != want || d.Code != code {
					t.Errorf("sending %d: allow=%v %s (%s), want allow=%v %s", i+1, d.Allow, d.Code, d.Message, want, code)
				}
			}
		})
	}
}
