package mcp

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/proxytest"
)

// TestOwnReadsCharged (security.md X1): the answers to Warden's own
// requests are answer bytes held in flight as the caller's answers are,
// charged to the one budget (streams.answer_bytes): the tasks/list pages it
// reads to fill the caller's page and to look ahead for its next task, and
// the tools/list it reads to decide a tools/call. carol's answer holds most
// of the budget (its body cut short, the rest held back), bob's request
// (and his first page) fits beside it, and Warden's own read for it
// (padded to 16 KB) does not: his answer is the budget's refusal, and the
// budget counts it. Before, Warden read them beside the budget: bob was
// answered with nothing refused. Once carol's answer ends, bob is answered.
func TestOwnReadsCharged(t *testing.T) {
	for _, tc := range []struct {
		name, own string // Warden's request id, whose answer is padded
		request   string // bob's
	}{
		{"tasks/list pages", "warden-tasks-list", rpc(7, "tasks/list", nil)},
		{"tools/list", "warden-tools-list", rpc(7, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newFakeUpstream()
			up.listPage = 1
			upSrv, release, holding := proxytest.BudgetUpstream(t, up,
				func(b []byte) bool { return strings.Contains(string(b), `"hold"`) },
				func(b []byte) bool { return strings.Contains(string(b), `"`+tc.own+`"`) })
			cfg := Config{}
			cfg.Streams.AnswerBytes = 8 << 10
			h := newHarnessOn(t, cfg, up, upSrv, upSrv.Client(), httptest.NewServer)
			// bob's task, then alice's, then bob's: his first page of
			// tasks/list is his first task, and Warden reads on for his
			// next.
			h.createTask(t, bob)
			h.createTask(t, alice)
			h.createTask(t, bob)

			held := make(chan struct{})
			go func() {
				defer close(held)
				h.post(t, "carol", rpc(1, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{"hold": true}}), nil)
			}()
			proxytest.WaitHeld(t, holding, func() int64 { return h.srv.Answers().Held }, proxytest.HeldBytes)
			before := h.srv.Answers().Refused
			r := h.post(t, bob, tc.request, nil)
			if r.errCode(t) == 0 || !strings.Contains(r.errMessage(t), "answer_bytes") {
				t.Errorf("bob's request beside carol's held answer, Warden's read for it over the budget: HTTP %d %s, want the budget's refusal", r.status, r.body)
			}
			if got := h.srv.Answers().Refused - before; got != 1 {
				t.Errorf("%d answers refused for the budget, want 1 (Warden's read)", got)
			}
			release()
			<-held
			if r := h.post(t, bob, tc.request, nil); r.errCode(t) != 0 {
				t.Errorf("bob's request alone: HTTP %d %s", r.status, r.body)
			}
		})
	}
}
