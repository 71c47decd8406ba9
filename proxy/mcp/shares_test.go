package mcp

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestStateShares: what the sidecar remembers per principal besides owners
// (the client-side tasks a principal's client created, the taskSupport it
// learned per principal and session) is held to a share per principal, so
// that one principal filling a table evicts its own entries, never
// another's. Before, each was one LRU of 16384 entries: bob posting 16384
// made-up CreateTaskResults (no server request needed) made alice's client
// task unknown, so the server's polls of it were withheld from her and her
// answers about it refused; bob listing 16384 tools made Warden read
// alice's tools/list again (and refuse her call when that read fails).
func TestStateShares(t *testing.T) {
	t.Run("client task", func(t *testing.T) {
		poll := map[string]any{"jsonrpc": "2.0", "id": 101, "method": "tasks/get", "params": map[string]any{"taskId": "alice-task"}}
		upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.Method == http.MethodGet {
				writeSSE(w, poll)
				return
			}
			w.WriteHeader(http.StatusAccepted)
		}))
		t.Cleanup(upSrv.Close)
		h := newHarnessFor(t, Config{}, newFakeUpstream(), upSrv)
		// A smaller table than the sidecar's (maxClientTasks) floods in
		// less time; before this test, the flood of 16384 did the same.
		const size = 256
		h.srv.clientTasks = newClientTasks(size, nil)
		created := func(id string) string {
			return `{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"` + id + `","status":"working","ttl":60000,"createdAt":"2026-11-28T00:00:00Z","lastUpdatedAt":"2026-11-28T00:00:00Z"}}}`
		}
		if r := h.post(t, "alice", created("alice-task"), nil); r.status != http.StatusAccepted {
			t.Fatalf("alice's CreateTaskResult: HTTP %d %s", r.status, r.body)
		}
		flood(t, size, func(i int) {
			if r := h.post(t, "bob", created(fmt.Sprintf("bob-task-%d", i)), nil); r.status != http.StatusAccepted {
				t.Errorf("bob's CreateTaskResult %d: HTTP %d %s", i, r.status, r.body)
			}
		})
		r := h.do(t, http.MethodGet, "/mcp", "alice", "", nil)
		if len(r.msgs) != 1 {
			t.Errorf("after bob's %d client tasks, alice's stream passed %d of the server's polls of her client's task, want 1: %s", size, len(r.msgs), r.body)
		}
		answer := `{"jsonrpc":"2.0","id":102,"result":{"action":"accept","content":{},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"alice-task"}}}}`
		if r := h.post(t, "alice", answer, nil); r.status != http.StatusAccepted {
			t.Errorf("after bob's flood, alice's answer naming her client's task: HTTP %d %s, want 202 (forwarded)", r.status, r.body)
		}
	})
	t.Run("learned tools", func(t *testing.T) {
		up := newFakeUpstream()
		many := make([]map[string]any, maxTools)
		for i := range many {
			many[i] = map[string]any{"name": fmt.Sprintf("bob-tool-%d", i)}
		}
		up.toolsFor = map[string][]map[string]any{"Bearer bob": many}
		h := newHarnessFor(t, Config{}, up, httptest.NewServer(up))
		call := rpc(1, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{}})
		if r := h.post(t, "alice", call, nil); r.status != http.StatusOK {
			t.Fatalf("alice's tools/call: HTTP %d %s", r.status, r.body)
		}
		lists := len(up.received("tools/list"))
		if r := h.post(t, "bob", rpc(2, "tools/list", nil), nil); r.status != http.StatusOK {
			t.Fatalf("bob's tools/list: HTTP %d", r.status)
		}
		lists++
		up.configure(func(u *fakeUpstream) { u.failList = true })
		if r := h.post(t, "alice", call, nil); r.status != http.StatusOK || r.errCode(t) != 0 {
			t.Errorf("after bob listed %d tools, alice's tools/call of a tool Warden learned for her: HTTP %d %s, want 200 (decided on what it learned)", maxTools, r.status, r.body)
		}
		if n := len(up.received("tools/list")); n != lists {
			t.Errorf("after bob listed %d tools, Warden read alice's tools/list again (%d reads, want %d)", maxTools, n-lists+1, 1)
		}
	})
}

// flood runs f(0..n-1) on a few goroutines.
func flood(t *testing.T, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}
