package mcp

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/testcerts"
)

// spiffeCert is a client certificate whose URI SAN is id.
func spiffeCert(t *testing.T, id string) *x509.Certificate {
	return testcerts.SelfSigned(t, "", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), id)
}

// TestOwnReadsCredentials: the requests Warden makes of its own for a caller
// (tools/list for taskSupport, tasks/get for a status) carry the caller's
// credential exactly when the caller's forwarded requests do: not when the
// principal came from a client certificate, whose Authorization is stripped.
func TestOwnReadsCredentials(t *testing.T) {
	cert := spiffeCert(t, "spiffe://td/alice")
	tests := []struct {
		name   string
		method authn.Method
		want   string // the Authorization the upstream sees
	}{
		{"bearer", authn.MethodDev, "Bearer spiffe://td/alice"},
		{"client certificate", authn.MethodMTLS, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newFakeUpstream()
			upSrv := httptest.NewServer(up)
			t.Cleanup(upSrv.Close)
			// Two Wardens in turn (a restart): the second knows no status.
			var srvs [2]*Server
			for i := range srvs {
				var err error
				if srvs[i], err = New(Config{}.withUpstream(upSrv.URL+"/mcp"), newEnforcerFor(t, tc.method), testKey, upSrv.Client(), nil); err != nil {
					t.Fatal(err)
				}
			}
			send := func(srv *Server, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", "Bearer spiffe://td/alice")
				if tc.method == authn.MethodMTLS {
					r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
				}
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				return w
			}
			w := send(srvs[0], rpc(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}}))
			var created struct {
				Result struct {
					Task struct {
						TaskID string `json:"taskId"`
					} `json:"task"`
				} `json:"result"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &created)
			handle := created.Result.Task.TaskID
			if !strings.HasPrefix(handle, handlePrefix) {
				t.Fatalf("create: %s", w.Body)
			}
			if w := send(srvs[1], rpc(2, "tasks/steer", map[string]any{"taskId": handle, "message": "m"})); w.Code != http.StatusOK {
				t.Fatalf("steer: %d %s", w.Code, w.Body)
			}
			for _, m := range []string{"tools/list", "tasks/get", "tools/call", "tasks/steer"} {
				calls := up.received(m)
				if len(calls) == 0 {
					t.Fatalf("the upstream got no %s", m)
				}
				for _, c := range calls {
					if got := c.header.Get("Authorization"); got != tc.want {
						t.Errorf("%s: the upstream saw Authorization %q, want %q", m, got, tc.want)
					}
				}
			}
		})
	}
}

func (c Config) withUpstream(u string) Config {
	c.Upstream, c.Plaintext = u, true
	return c
}
