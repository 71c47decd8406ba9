package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
)

// decisions keeps every decision the Enforcer observes.
type decisions struct {
	mu sync.Mutex
	ds []proxy.Decision
}

func (o *decisions) Decided(d proxy.Decision, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

func (o *decisions) last(t *testing.T) proxy.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ds) == 0 {
		t.Fatal("no decision recorded")
	}
	return o.ds[len(o.ds)-1]
}

func enforcer(t *testing.T, obs proxy.Observer, log *slog.Logger) *proxy.Enforcer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`[{"token":"tok-planner","sender":"agent://planner"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodStatic}, Static: authn.StaticConfig{TokensFile: path}}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: p, Observer: obs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRefusalSource: every refusal the gate makes, on a sidecar (Stamp)
// and under ext_authz (the source in the context), records and logs the
// client's address, the request id (the client's, or one Warden minted and
// returned in X-Request-Id), the HTTP method and the path. Before, neither
// the decision nor the "refused" line carried any of them.
func TestRefusalSource(t *testing.T) {
	obs := &decisions{}
	var logs bytes.Buffer
	enf := enforcer(t, obs, slog.New(slog.NewJSONHandler(&logs, nil)))
	g := New(A2A("/", 1<<20, "a2a.max_body_bytes"), enf, nil)
	const body = `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`
	tests := []struct {
		name, method, path, token, reqID string
	}{
		{"wrong path", http.MethodPost, "/other", "tok-planner", "rid-1"},
		{"wrong method", http.MethodPut, "/", "tok-planner", ""},
		{"no credentials", http.MethodPost, "/", "", "rid-3"},
		{"unknown token", http.MethodPost, "/", "tok-gone", ""},
		{"unknown method", http.MethodPost, "/", "tok-planner", "rid-5"},
		{"request id too long is replaced", http.MethodPost, "/other", "tok-planner", strings.Repeat("a", 200)},
		{"request id with a space is replaced", http.MethodPost, "/other", "tok-planner", "a b"},
	}
	for _, tt := range tests {
		for _, door := range []string{"sidecar", "ext_authz"} {
			t.Run(door+"/"+tt.name, func(t *testing.T) {
				logs.Reset()
				b := body
				if tt.name == "unknown method" {
					b = `{"jsonrpc":"2.0","id":1,"method":"no/such","params":{}}`
				}
				r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(b))
				r.RemoteAddr = "192.0.2.7:41234"
				r.Header.Set("Content-Type", "application/json")
				if tt.token != "" {
					r.Header.Set("Authorization", "Bearer "+tt.token)
				}
				if tt.reqID != "" {
					r.Header.Set("X-Request-Id", tt.reqID)
				}
				w := httptest.NewRecorder()
				ctx := r.Context()
				if door == "sidecar" {
					ctx = g.Stamp(w, r)
				} else {
					ctx = proxy.WithSource(ctx, enf.NewSource("192.0.2.7:41234", tt.reqID, tt.method, tt.path))
				}
				_, refused := g.Admit(ctx, FromHTTP(w, r))
				if refused == nil {
					t.Fatal("admitted")
				}
				d := obs.last(t)
				s := d.Source
				if s.Client != "192.0.2.7:41234" || s.Method != tt.method || s.Path != tt.path {
					t.Fatalf("source %+v, want the client, %s and %s", s, tt.method, tt.path)
				}
				kept := len(tt.reqID) > 0 && len(tt.reqID) <= 128 && !strings.Contains(tt.reqID, " ")
				switch {
				case kept && s.RequestID != tt.reqID:
					t.Fatalf("request id %q, want the client's %q", s.RequestID, tt.reqID)
				case !kept && (len(s.RequestID) != 26 || s.RequestID == tt.reqID):
					t.Fatalf("request id %q, want a minted one", s.RequestID)
				}
				if door == "sidecar" && (w.Header().Get("X-Request-Id") != s.RequestID || r.Header.Get("X-Request-Id") != s.RequestID) {
					t.Fatalf("X-Request-Id %q to the client, %q to the upstream, want %q", w.Header().Get("X-Request-Id"), r.Header.Get("X-Request-Id"), s.RequestID)
				}
				var line map[string]any
				if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
					t.Fatalf("log %q: %v", logs.String(), err)
				}
				if line["client_addr"] != s.Client || line["request_id"] != s.RequestID || line["http_method"] != tt.method || line["path"] != tt.path {
					t.Fatalf("refused line %v lacks the source %+v", line, s)
				}
			})
		}
	}
}
