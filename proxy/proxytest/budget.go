package proxytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// HeldBytes is what an answer BudgetUpstream holds back weighs before it
// stops: the answer budget's share its reader holds until released.
const HeldBytes = 3000

// BudgetUpstream serves up behind two changes, for the tests of the answer
// budget (security.md X1): the answer to a request whose body hold reports
// is HeldBytes of an unfinished JSON object, then nothing until release is
// called (or the test ends); the answer to a request whose body pad reports
// (one of Warden's own) is up's with a 16 KB member "pad" added to its
// result.
func BudgetUpstream(t testing.TB, up http.Handler, hold, pad func(body []byte) bool) (srv *httptest.Server, release func()) {
	t.Helper()
	released := make(chan struct{})
	filler := strings.Repeat("p", 16<<10)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		switch {
		case r.Method == http.MethodPost && hold(b):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"pad":"`+strings.Repeat("h", HeldBytes))
			w.(http.Flusher).Flush()
			select {
			case <-released:
			case <-r.Context().Done():
			}
		case r.Method == http.MethodPost && pad(b):
			rec := httptest.NewRecorder()
			up.ServeHTTP(rec, r)
			var m map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &m)
			if res, ok := m["result"].(map[string]any); ok {
				res["pad"] = filler
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(m)
		default:
			up.ServeHTTP(w, r)
		}
	}))
	once := sync.OnceFunc(func() { close(released) })
	t.Cleanup(func() { once(); srv.Close() })
	return srv, once
}

// WaitHeld waits (10 s at most) until held, a sidecar's answer bytes held
// now, reaches n.
func WaitHeld(t testing.TB, held func() int64, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); held() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("answer bytes held %d, never %d", held(), n)
		}
	}
}
