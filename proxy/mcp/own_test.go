package mcp

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentwarden/warden/internal/testlog"
)

// ownMax is the answer bound of TestOwnAnswerUnusable: the answers the
// test needs whole fit, the oversize one does not.
const ownMax = 4096

// badAnswers are answers to a request of Warden's own that Warden cannot
// read, each with what the caller's refusal and the log line must name.
var badAnswers = []struct {
	name  string
	write func(w http.ResponseWriter, body []byte)
	cause string
}{
	{"compressed anyway", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(body)
		_ = zw.Close()
	}, "is compressed (Content-Encoding gzip) though Warden asked for it uncompressed (Accept-Encoding: identity)"},
	{"html", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body>Bad gateway</body></html>")
	}, "is not application/json or text/event-stream (Content-Type text/html; charset=utf-8)"},
	{"HTTP 500", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(body)
	}, "is HTTP status 500, not 2xx"},
	{"oversize", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body[:len(body)-1])
		_, _ = io.WriteString(w, strings.Repeat(" ", ownMax)+"}")
	}, "exceeds Warden's limit mcp.max_response_bytes (4096 bytes)"},
}

// spoiler answers the requests Warden makes of its own that match (once
// on) with bad, the answer the fake upstream would have given spoiled;
// every other request reaches the fake as it came.
type spoiler struct {
	up    *fakeUpstream
	on    atomic.Bool
	match func(method string, params map[string]any) bool
	bad   func(w http.ResponseWriter, body []byte)
}

func (s *spoiler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !s.on.Load() {
		s.up.ServeHTTP(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	var m struct {
		ID     string         `json:"id"`
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	_ = json.Unmarshal(b, &m)
	if !strings.HasPrefix(m.ID, "warden-") || !s.match(m.Method, m.Params) {
		s.up.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.up.ServeHTTP(rec, r)
	s.bad(w, rec.Body.Bytes())
}

// TestOwnAnswerUnusable: an answer to every request Warden makes of its own
// (tools/list for a tool's taskSupport, tasks/get for a task's status, the
// next page of tasks/list) that Warden cannot read (compressed anyway, not
// JSON, an HTTP error, over the bound) refuses the caller's request with the
// cause named, to the caller and in the log.
func TestOwnAnswerUnusable(t *testing.T) {
	kinds := []struct {
		name   string
		match  func(method string, params map[string]any) bool
		status int // the caller's HTTP status
		setup  func(t *testing.T, h *harness) string
		call   func(t *testing.T, h *harness, handle string) reply
	}{
		{"tools/list for taskSupport", func(m string, _ map[string]any) bool { return m == "tools/list" }, http.StatusServiceUnavailable,
			func(*testing.T, *harness) string { return "" },
			func(t *testing.T, h *harness, _ string) reply {
				return h.post(t, alice, rpc(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}}), nil)
			}},
		{"tasks/get for a status", func(m string, _ map[string]any) bool { return m == "tasks/get" }, http.StatusServiceUnavailable,
			func(t *testing.T, h *harness) string { return h.createTask(t, alice) },
			func(t *testing.T, h *harness, handle string) reply {
				return h.post(t, alice, rpc(2, "tasks/steer", map[string]any{"taskId": handle, "message": "m"}), nil)
			}},
		{"tasks/list next page", func(m string, p map[string]any) bool { return m == "tasks/list" && p["cursor"] != nil }, http.StatusOK,
			func(t *testing.T, h *harness) string {
				h.up.configure(func(u *fakeUpstream) { u.listPage = 1 })
				h.createTask(t, bob)
				return h.createTask(t, alice)
			},
			func(t *testing.T, h *harness, _ string) reply {
				return h.post(t, alice, rpc(3, "tasks/list", map[string]any{}), nil)
			}},
	}
	for _, k := range kinds {
		for _, b := range badAnswers {
			t.Run(k.name+"/"+b.name, func(t *testing.T) {
				up := newFakeUpstream()
				sp := &spoiler{up: up, match: k.match, bad: b.write}
				upSrv := httptest.NewServer(sp)
				t.Cleanup(upSrv.Close)
				var cfg Config
				cfg.MaxResponseBytes = ownMax
				first := newHarnessFor(t, cfg, up, upSrv)
				handle := k.setup(t, first)
				// A fresh Warden (a restart) knows no status or tool: it asks.
				var logs testlog.Buffer
				cfg.Upstream, cfg.Plaintext = upSrv.URL+"/mcp", true
				srv, err := New(cfg, first.e, testKey, upSrv.Client(), slog.New(slog.NewTextHandler(&logs, nil)))
				if err != nil {
					t.Fatal(err)
				}
				front := httptest.NewServer(srv)
				t.Cleanup(front.Close)
				h := &harness{up: up, upSrv: upSrv, e: first.e, srv: srv, front: front}
				sp.on.Store(true)
				r := k.call(t, h, handle)
				if r.status != k.status || r.errCode(t) == 0 || !strings.Contains(r.errMessage(t), b.cause) {
					t.Errorf("the caller got HTTP %d %s, want %d and an error naming %q", r.status, r.body, k.status, b.cause)
				}
				if !strings.Contains(logs.String(), b.cause) {
					t.Errorf("the log does not name %q:\n%s", b.cause, logs.String())
				}
			})
		}
	}
}
