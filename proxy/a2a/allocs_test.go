//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package a2a

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHandlerAllocs bounds the allocations of one GetTask through the
// sidecar's handler as BenchmarkA2AHandler makes it (the in-memory request,
// recorder and fake included: 108 of them through the null hop's handler).
// Before the exchange watched credentials and read task states itself and
// the method and version were read without copies: 145; before the ids set
// shared a buffer, the state was read as a constant, the request to the
// upstream kept its header map and took its body in one reader, the
// flight carried the source and the exchange the answer's share of the
// bytes in flight: 140; before the request's envelope was kept in place
// (jsonrpc.Object.Keep, not its names made and deleted one by one): 132.
func TestHandlerAllocs(t *testing.T) {
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	h := newHarnessOn(t, Config{}, newEnforcer(t), up, upSrv, &http.Client{Transport: upstreamInMemory{up}}, httptest.NewServer)
	task := h.send(t, "alice", "input x")
	h.srv.send = upstreamInMemory{up}.RoundTrip
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"` + task["id"].(string) + `"}}`)
	header := http.Header{"Authorization": {"Bearer alice"}, "Content-Type": {"application/json"}, "A2a-Version": {"1.0"},
		"User-Agent": {"Go-http-client/1.1"}, "Accept-Encoding": {"gzip"}}
	n := testing.AllocsPerRun(200, func() {
		r := httptest.NewRequest(http.MethodPost, "/jsonrpc", bytes.NewReader(body))
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header = header.Clone()
		w := httptest.NewRecorder()
		h.srv.ServeHTTP(w, r)
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("HTTP %d: %s", w.Code, w.Body.Bytes())
		}
	})
	if n > 127 {
		t.Errorf("%v allocations, want at most 127", n)
	}
}

// TestAnswerAllocs bounds the allocations of one GetTask answer checked and
// rewritten (BenchmarkGetTaskAnswer, its handles sealed anew): 13, the doc
// read and rewritten and the task's own ids. Before the ids an answer names
// again (the task and its context in each message) and the messages' roles
// were read without copies (idOf, jsonrpc.Object.StrOf): 21; before the
// answer's id, echoed as written, was compared without decoding it
// (jsonrpc.IsID): 14.
func TestAnswerAllocs(t *testing.T) {
	x := corpusExchange(t, "GetTask")
	data := []byte(getTaskAnswer)
	n := testing.AllocsPerRun(200, func() {
		x.sealed = idMap[string]{}
		if _, keep := x.fromUpstream(data); !keep {
			t.Fatal("held back")
		}
	})
	if n > 13 {
		t.Errorf("%v allocations, want at most 13", n)
	}
}
