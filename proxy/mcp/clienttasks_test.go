package mcp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestClientSideTasks: a task a principal's client says it created (its
// CreateTaskResult answer to the server's task-augmented request) is that
// client's own in that session: the server's tasks/get, tasks/result and
// tasks/cancel to that client about it pass as written, and the client's
// answers naming it in related-task metadata reach the server. Any other
// task ID stays withheld or refused: one another principal's client
// created, one never created, another's server task the client claimed as
// its own, and the same ID in a notification or in any place but the polled
// request's params.taskId.
// Before, every such request was withheld and every such answer refused.
func TestClientSideTasks(t *testing.T) {
	// The upstream's standalone stream polls every client task it was
	// told of, and one it never was; it takes every POST.
	polls := []any{
		map[string]any{"jsonrpc": "2.0", "id": 101, "method": "tasks/get", "params": map[string]any{"taskId": "alice-task"}},
		map[string]any{"jsonrpc": "2.0", "id": 102, "method": "tasks/result", "params": map[string]any{"taskId": "alice-task"}},
		map[string]any{"jsonrpc": "2.0", "id": 103, "method": "tasks/cancel", "params": map[string]any{"taskId": "alice-task"}},
		map[string]any{"jsonrpc": "2.0", "id": 104, "method": "tasks/get", "params": map[string]any{"taskId": "bob-task"}},
		map[string]any{"jsonrpc": "2.0", "id": 105, "method": "tasks/get", "params": map[string]any{"taskId": "never-created"}},
		map[string]any{"jsonrpc": "2.0", "id": 108, "method": "tasks/get", "params": map[string]any{"taskId": "bob-server-task"}},
		map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": map[string]any{"taskId": "alice-task", "status": "working"}},
		map[string]any{"jsonrpc": "2.0", "id": 106, "method": "tasks/get", "params": map[string]any{"taskId": "alice-task",
			"_meta": map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": "bob-task"}}}},
		map[string]any{"jsonrpc": "2.0", "id": 107, "method": "elicitation/create", "params": map[string]any{"message": "alice-task",
			"_meta": map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": "alice-task"}}}},
	}
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			writeSSE(w, polls...)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(upSrv.Close)
	h := newHarnessFor(t, Config{}, newFakeUpstream(), upSrv)

	created := func(id string) string {
		return `{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"` + id + `","status":"working","ttl":60000,"createdAt":"2026-11-28T00:00:00Z","lastUpdatedAt":"2026-11-28T00:00:00Z"}}}`
	}
	if r := h.post(t, "alice", created("alice-task"), nil); r.status != http.StatusAccepted {
		t.Fatalf("alice's CreateTaskResult: HTTP %d %s", r.status, r.body)
	}
	if r := h.post(t, "bob", created("bob-task"), nil); r.status != http.StatusAccepted {
		t.Fatalf("bob's CreateTaskResult: HTTP %d %s", r.status, r.body)
	}
	// Bob's server task, which alice's client claims as its own: never hers.
	taskCreated(h.e, "bob-server-task", "bob", "working")
	if r := h.post(t, "alice", created("bob-server-task"), nil); r.status != http.StatusAccepted {
		t.Fatalf("alice's CreateTaskResult naming bob's server task: HTTP %d %s", r.status, r.body)
	}
	r := h.do(t, http.MethodGet, "/mcp", "alice", "", nil)
	var got []float64
	for _, m := range r.msgs {
		id, _ := m["id"].(float64)
		got = append(got, id)
	}
	want := []float64{101, 102, 103}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("alice's stream passed the requests %v, want exactly %v (her client's task polled, as written)", got, want)
	}
	for _, m := range r.msgs {
		if p, _ := m["params"].(map[string]any); p["taskId"] != "alice-task" {
			t.Errorf("a poll reached alice naming another task than her client's, or rewritten: %v", m)
		}
	}

	answer := func(related string) string {
		return `{"jsonrpc":"2.0","id":102,"result":{"action":"accept","content":{},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + related + `"}}}}`
	}
	for _, c := range []struct {
		name, principal, body string
		forwarded             bool
	}{
		{"alice's answer naming her client's task", "alice", answer("alice-task"), true},
		{"alice's answer naming bob's client's task", "alice", answer("bob-task"), false},
		{"alice's answer naming a task never created", "alice", answer("never-created"), false},
		{"alice's answer naming bob's server task she claimed", "alice", answer("bob-server-task"), false},
		{"bob's answer naming alice's client's task", "bob", answer("alice-task"), false},
		{"alice's notification naming her client's task as related", "alice", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"alice-task"}}}}`, false},
		{"alice's tasks/get to the server of her client's task", "alice", rpc(10, "tasks/get", map[string]any{"taskId": "alice-task"}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.post(t, c.principal, c.body, nil)
			if fwd := r.status == http.StatusAccepted; fwd != c.forwarded {
				t.Errorf("forwarded %v (HTTP %d %s), want %v", fwd, r.status, r.body, c.forwarded)
			}
		})
	}
}
