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
// result. holding is closed once the first held answer's bytes are sent:
// from then the bytes a sidecar holds are that answer's, not those of one
// of Warden's own reads made before it was forwarded (WaitHeld).
func BudgetUpstream(t testing.TB, up http.Handler, hold, pad func(body []byte) bool) (srv *httptest.Server, release func(), holding <-chan struct{}) {
	t.Helper()
	released := make(chan struct{})
	sent := make(chan struct{})
	sentOnce := sync.OnceFunc(func() { close(sent) })
	filler := strings.Repeat("p", 16<<10)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		switch {
		case r.Method == http.MethodPost && hold(b):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"pad":"`+strings.Repeat("h", HeldBytes))
			w.(http.Flusher).Flush()
			sentOnce()
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
	return srv, once, sent
}

// WaitHeld waits (10 s at most) until BudgetUpstream's held answer is sent
// (holding) and held, a sidecar's answer bytes held now, reaches n. Held
// bytes alone can be a transient read of Warden's own (a tools/list or
// state read made to decide the held request), gone before the held
// answer arrives.
func WaitHeld(t testing.TB, holding <-chan struct{}, held func() int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the held answer was never sent")
	}
	for ; held() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("answer bytes held %d, never %d", held(), n)
		}
	}
}
