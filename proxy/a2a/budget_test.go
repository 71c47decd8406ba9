package a2a

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/proxytest"
)

// TestListReadsCharged (security.md X1): the ListTasks pages Warden reads
// itself, to fill the caller's page and to look ahead for its next task,
// are answer bytes held in flight as the server's page is, charged to the
// one budget (streams.answer_bytes) as the caller's answer is. Here carol's
// answer holds most of the budget (its body cut short, the rest held back),
// bob's first page fits beside it, and the pages Warden reads after it
// (each padded to 16 KB) do not: his answer is the budget's refusal, and
// the budget counts it. Before, Warden read them beside the budget: bob got
// his page with nothing refused, whatever they weighed. Once carol's
// answer ends, bob's ListTasks is answered.
func TestListReadsCharged(t *testing.T) {
	up := newFakeUpstream()
	upSrv, release, holding := proxytest.BudgetUpstream(t, up,
		func(b []byte) bool { return strings.Contains(string(b), `"hold"`) },
		func(b []byte) bool {
			var req struct {
				Params struct {
					PageToken string `json:"pageToken"`
				} `json:"params"`
			}
			_ = json.Unmarshal(b, &req)
			return req.Params.PageToken != "" // Warden's own reads
		})
	cfg := Config{}
	cfg.Streams.AnswerBytes = 8 << 10
	h := newHarnessOn(t, cfg, newEnforcer(t), up, upSrv, upSrv.Client(), httptest.NewServer)
	// bob's task, then alice's, then bob's: his first page of one is his
	// first task, and Warden reads on for his next.
	h.send(t, "bob", "one")
	h.send(t, "alice", "hers")
	h.send(t, "bob", "two")

	held := make(chan struct{})
	go func() {
		defer close(held)
		h.rpc(t, "carol", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-hold","role":"ROLE_USER","parts":[{"text":"hold"}]}}}`)
	}()
	proxytest.WaitHeld(t, holding, func() int64 { return h.srv.Answers().Held }, proxytest.HeldBytes)
	before := h.srv.Answers().Refused
	_, m := h.call(t, "bob", "ListTasks", map[string]any{"pageSize": 1})
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "answer_bytes") {
		t.Errorf("bob's ListTasks beside carol's held answer, its pages read over the budget: %v, want the budget's refusal", m)
	}
	if got := h.srv.Answers().Refused - before; got != 1 {
		t.Errorf("%d answers refused for the budget, want 1 (Warden's page read)", got)
	}
	release()
	<-held
	_, m = h.call(t, "bob", "ListTasks", map[string]any{"pageSize": 1})
	if tasks, _ := resultOf(t, m)["tasks"].([]any); len(tasks) != 1 {
		t.Errorf("bob's ListTasks alone: %v, want his first task", m)
	}
}

// TestStateReadCharged (security.md X1): the GetTask Warden sends to read
// a task's state before deciding a message that continues it (a state it
// does not know: here after a restart, bob's handle proving his task) is
// charged to the answer budget while it is read, as every answer Warden
// reads is. Beside carol's held answer, the state read (padded to 16 KB)
// is over the budget: bob's message is refused with the budget's error
// and never forwarded. Before, Warden read it beside the budget and
// forwarded the message.
func TestStateReadCharged(t *testing.T) {
	up := newFakeUpstream()
	upSrv, release, holding := proxytest.BudgetUpstream(t, up,
		func(b []byte) bool { return strings.Contains(string(b), `"hold"`) },
		func(b []byte) bool { return strings.Contains(string(b), `"warden-state"`) })
	before := newHarnessOn(t, Config{}, newEnforcer(t), up, upSrv, upSrv.Client(), httptest.NewServer)
	task := before.send(t, "bob", "input please")
	cfg := Config{}
	cfg.Streams.AnswerBytes = 8 << 10
	h := newHarnessOn(t, cfg, newEnforcer(t), up, upSrv, upSrv.Client(), httptest.NewServer) // a restart: states forgotten

	held := make(chan struct{})
	go func() {
		defer close(held)
		h.rpc(t, "carol", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-hold","role":"ROLE_USER","parts":[{"text":"hold"}]}}}`)
	}()
	proxytest.WaitHeld(t, holding, func() int64 { return h.srv.Answers().Held }, proxytest.HeldBytes)
	continues := map[string]any{"message": map[string]any{"messageId": "m-more", "taskId": task["id"], "role": "ROLE_USER", "parts": []any{map[string]any{"text": "more"}}}}
	sent := len(up.received())
	_, m := h.call(t, "bob", "SendMessage", continues)
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "answer_bytes") {
		t.Errorf("bob's message beside carol's held answer, its state read over the budget: %v, want the budget's refusal", m)
	}
	for _, b := range up.received()[sent:] {
		if strings.Contains(b, "m-more") {
			t.Errorf("bob's message was forwarded: %s", b)
		}
	}
	release()
	<-held
	if _, m = h.call(t, "bob", "SendMessage", continues); m["error"] != nil {
		t.Errorf("bob's message alone: %v", m)
	}
}
