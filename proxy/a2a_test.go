package proxy

import (
	"context"
	"errors"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
)

// TestEnforceA2A: roles from what the adapter proved, task states read once
// when unknown, and a state that cannot be read fails closed.
func TestEnforceA2A(t *testing.T) {
	e, _ := newEnforcer(t, Config{}, nil)
	alice := authn.Principal{ID: "alice", Method: string(authn.MethodDev)}
	e.A2ASeen("done", "ctx", "alice", "TASK_STATE_COMPLETED")
	e.A2ASeen("open", "ctx", "alice", "TASK_STATE_INPUT_REQUIRED")
	reads := 0
	status := func(s string, err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { reads++; return s, err }
	}
	tests := []struct {
		name    string
		req     A2ARequest
		allow   bool
		code    rules.Code
		reason  rules.Reason
		wantErr bool
	}{
		{"owner reads", A2ARequest{Method: a2a.MethodGetTask, TaskID: "done", Owner: true}, true, "", "", false},
		{"not the owner", A2ARequest{Method: a2a.MethodGetTask, TaskID: "done"}, false, rules.CodeTaskNotFound, rules.ReasonUnknownTask, false},
		{"new message", A2ARequest{Method: a2a.MethodSend, New: true}, true, "", "", false},
		{"message to an input-required task", A2ARequest{Method: a2a.MethodMessageContinue, TaskID: "open", Owner: true}, true, "", "", false},
		{"message to a completed task", A2ARequest{Method: a2a.MethodMessageContinue, TaskID: "done", Owner: true}, false, rules.CodeInvalidTaskState, rules.ReasonTaskState, false},
		{"state read from the upstream", A2ARequest{Method: a2a.MethodSubscribe, TaskID: "fresh", Owner: true, Status: status("canceled", nil)}, false, rules.CodeInvalidTaskState, rules.ReasonTaskState, false},
		{"state known after one read", A2ARequest{Method: a2a.MethodSubscribe, TaskID: "fresh", Owner: true, Status: status("", errors.New("not asked"))}, false, rules.CodeInvalidTaskState, rules.ReasonTaskState, false},
		{"state unreadable", A2ARequest{Method: a2a.MethodSubscribe, TaskID: "gone", Owner: true, Status: status("", errors.New("down"))}, false, "", "", true},
		{"ownership unknown (ext_authz)", A2ARequest{Method: a2a.MethodCancelTask, TaskID: "x", OwnershipUnknown: true}, true, "", "", false},
		{"refused by the adapter", A2ARequest{Method: a2a.MethodCreatePush, TaskID: "open", Owner: true,
			Refused: rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonWebhookRefused, Detail: "loopback"}}, false, rules.CodeInvalidParams, rules.ReasonWebhookRefused, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Principal = alice
			d, err := e.EnforceA2A(context.Background(), tc.req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			d.Settle(d.Allow)
			if d.Allow != tc.allow || d.Code != tc.code || (tc.reason != "" && d.Reason != tc.reason) || d.Protocol != "a2a" {
				t.Fatalf("decision %+v, want allow %v code %q reason %q", d, tc.allow, tc.code, tc.reason)
			}
		})
	}
	if reads != 2 {
		t.Errorf("the upstream was asked %d times, want 2 (fresh once, gone once)", reads)
	}
	if o, ok := e.A2AOwner("open"); !ok || o != "alice" {
		t.Errorf("A2AOwner = %q, %v", o, ok)
	}
}
