package a2a

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/internal/testlog"
)

// stateAnswer is a GetTask answer Warden would read: alice's task-9, working.
const stateAnswer = `{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":{"state":"TASK_STATE_WORKING"}}}`

// TestOwnAnswerUnusable: an answer to the request Warden makes of its own
// (GetTask for a task's state) that Warden cannot read (compressed anyway,
// not JSON, an HTTP error, over the bound) refuses the caller's request with
// the cause named, to the caller and in the log. Before, a compressed, HTML
// or oversize answer gave a bare "retry later" and a JSON-RPC answer under
// HTTP 500 was read as if 2xx.
func TestOwnAnswerUnusable(t *testing.T) {
	const limit = 4096
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		cause string
	}{
		{"compressed anyway", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, stateAnswer)
			_ = zw.Close()
		}, "is compressed (Content-Encoding gzip) though Warden asked for it uncompressed (Accept-Encoding: identity)"},
		{"html", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<html><body>Bad gateway</body></html>")
		}, "is not application/json (Content-Type text/html; charset=utf-8)"},
		{"HTTP 500", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, stateAnswer)
		}, "is HTTP status 500, not 2xx"},
		{"oversize", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, stateAnswer[:len(stateAnswer)-1]+strings.Repeat(" ", limit)+"}")
		}, "exceeds Warden's limit a2a.max_response_bytes (4096 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newFakeUpstream()
			upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				var m struct{ ID string }
				if json.Unmarshal(b, &m) == nil && m.ID == "warden-state" {
					tc.write(w)
					return
				}
				up.ServeHTTP(w, r)
			}))
			t.Cleanup(upSrv.Close)
			up.base = upSrv.URL
			var cfg Config
			cfg.Upstream, cfg.MaxResponseBytes = upSrv.URL+"/jsonrpc", limit
			var logs testlog.Buffer
			srv, err := New(cfg, newEnforcer(t), testKey, upSrv.Client(), slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(srv)
			t.Cleanup(front.Close)
			h := &harness{up: up, front: front, srv: srv}
			// alice's task the upstream has and Warden never saw (a restart).
			hd := h.srv.handles.Seal('t', "alice", "task-9")
			status, m := h.call(t, "alice", "SubscribeToTask", map[string]any{"id": hd})
			e, _ := m["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if status != http.StatusServiceUnavailable || !strings.Contains(msg, tc.cause) {
				t.Errorf("the caller got HTTP %d %v, want 503 and an error naming %q", status, m, tc.cause)
			}
			if !strings.Contains(logs.String(), tc.cause) {
				t.Errorf("the log does not name %q:\n%s", tc.cause, logs.String())
			}
		})
	}
}
