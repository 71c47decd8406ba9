//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package mcp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules/mcp"
)

// TestFromUpstreamFastAllocs bounds the allocations of the fast path on
// the answer to tasks/get: the task id read, the owner look-up's answer,
// the handle sealed and the answer spliced. The spans found, the tasks
// named and their handles stay on the stack (the old code: 8).
func TestFromUpstreamFastAllocs(t *testing.T) {
	s := unitServer(t)
	taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
	x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`)
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"working"}}`)
	if _, keep, done := x.fromUpstreamFast(answer); !keep || !done {
		t.Fatalf("keep %v done %v", keep, done)
	}
	if n := testing.AllocsPerRun(100, func() { x.fromUpstreamFast(answer) }); n > 5 {
		t.Errorf("%v allocations, want at most 5", n)
	}
}

// TestHandlerAllocs bounds the allocations of one request through the
// sidecar's handler as BenchmarkHandler makes it (the in-memory request,
// recorder and upstream included: 67 of them through the null hop's
// handler). Before the exchange watched credentials and read task statuses
// itself and methods were read as constants: tasks/get 90, tools/call 84.
// tools/call's arguments held to the tool's typed inputSchema
// (rules/mcp.CheckTypes, security.md P1) cost nothing more: they are read
// in place (9 allocations when they were decoded). Before the request to
// the upstream kept its header map and took its body in one reader, the
// flight carried the source, the exchange the answer's share of the bytes
// in flight and owners.Learn gathered statuses on the stack: tasks/get 86,
// tools/call 82. Before a task method's policy input shared one empty
// input.mcp: tasks/get 81.
func TestHandlerAllocs(t *testing.T) {
	upSrv := httptest.NewServer(benchUpstream{})
	t.Cleanup(upSrv.Close)
	h := newHarnessOn(t, Config{HTTPConfig: listener.HTTPConfig{Listen: "127.0.0.1:0"}}, nil, upSrv, &http.Client{Transport: upstreamInMemory{}}, httptest.NewServer)
	handle := h.createTask(t, "alice")
	h.srv.send = upstreamInMemory{}.RoundTrip
	for _, c := range []struct {
		name, body string
		max        float64
	}{
		{"tasks/get", rpc(7, "tasks/get", map[string]any{"taskId": handle}), 80},
		{"tools/call", rpc(7, "tools/call", map[string]any{"name": "fast", "arguments": map[string]any{"q": "x"}}), 78},
	} {
		body := []byte(c.body)
		header := http.Header{"Authorization": {"Bearer alice"}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"User-Agent": {"Go-http-client/1.1"}, "Accept-Encoding": {"gzip"}}
		n := testing.AllocsPerRun(200, func() {
			r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
			r.RemoteAddr = "127.0.0.1:40000"
			r.Header = header.Clone()
			w := httptest.NewRecorder()
			h.srv.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%s: HTTP %d: %s", c.name, w.Code, w.Body.Bytes())
			}
		})
		if n > c.max {
			t.Errorf("%s: %v allocations, want at most %v", c.name, n, c.max)
		}
	}
}
