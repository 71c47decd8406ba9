package pushrelay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules/a2a"
)

// loaded is the authenticator loaded now, as the enforcer holds it.
type loaded struct{ a *authn.Authenticator }

func (l loaded) Holds(g authn.Grant, now time.Time) error { return l.a.Holds(g, now) }

// authenticator builds the authenticator of one configuration: static
// tokens (tokens, a JSON list) and client certificates.
func authenticator(t *testing.T, tokens string, mode ...authn.Method) *authn.Authenticator {
	t.Helper()
	cfg := authn.Config{Mode: mode}
	if tokens != "" {
		cfg.Static.TokensFile = filepath.Join(t.TempDir(), "tokens.json")
		if err := os.WriteFile(cfg.Static.TokensFile, []byte(tokens), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := authn.New(cfg, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRevokedConfigs: a push config is delivered to only while the
// credential that set it holds under the configuration loaded now (a static
// token still configured for the same principal, a credential not past its
// sealed expiry, its method still configured) and it is younger than
// max_age; otherwise the server is answered 410 Gone and the webhook is not
// reached. Before, every row was delivered.
func TestRevokedConfigs(t *testing.T) {
	const aliceTok = `[{"token":"tok-alice","sender":"alice"},{"token":"tok-bob","sender":"bob"}]`
	before := authenticator(t, aliceTok, authn.MethodStatic, authn.MethodMTLS)
	p, err := before.Authenticate(context.Background(), authn.Credentials{Bearer: "tok-alice"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	static := authn.GrantOf(p, authn.Credentials{Bearer: "tok-alice"}, now)
	cert := authn.Grant{Principal: "alice", Method: "mtls", Issued: now.Unix(), Expiry: now.Add(time.Hour).Unix()}
	expired := cert
	expired.Expiry = now.Add(-time.Second).Unix()
	old := static
	old.Issued = now.Add(-25 * time.Hour).Unix()
	other := static
	other.Principal = "bob" // a grant naming another principal than the target
	legit := newCounting(t, nil)
	allow, err := a2a.ParseAllow([]string{"127.0.0.1:" + legit.port()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		after  *authn.Authenticator
		grant  authn.Grant
		maxAge time.Duration
		want   int
	}{
		{"static token still configured", before, static, 0, http.StatusOK},
		{"static token removed on reload", authenticator(t, `[{"token":"tok-bob","sender":"bob"}]`, authn.MethodStatic), static, 0, http.StatusGone},
		{"static token now another principal's", authenticator(t, `[{"token":"tok-alice","sender":"mallory"}]`, authn.MethodStatic), static, 0, http.StatusGone},
		{"static method no longer configured", authenticator(t, "", authn.MethodMTLS), static, 0, http.StatusGone},
		{"certificate before its expiry", before, cert, 0, http.StatusOK},
		{"credential past its sealed expiry", before, expired, 0, http.StatusGone},
		{"certificate method no longer configured", authenticator(t, aliceTok, authn.MethodStatic), cert, 0, http.StatusGone},
		{"config past max_age (default 24h)", before, old, 0, http.StatusGone},
		{"old config, no max_age", before, old, -1, http.StatusOK},
		{"young config under max_age 1h", before, static, time.Hour, http.StatusOK},
		{"sealed without a grant (before this change)", before, authn.Grant{}, 0, http.StatusGone},
		{"grant of another principal", before, other, 0, http.StatusGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{MaxAge: tc.maxAge}, listener.Limits{}, allow, ring(t, "0123456789abcdef0123456789abcdef"), owners{"t:task-1": "alice", "c:ctx-1": "alice"}, handles, loaded{tc.after}, nil)
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(r)
			defer front.Close()
			r.Bound(front.Listener.Addr())
			n0 := legit.n.Load()
			u := r.URL(Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1", Grant: tc.grant})
			resp, err := http.Post(u, "application/json", strings.NewReader(`{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1"}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if reached := legit.n.Load() != n0; reached != (tc.want == http.StatusOK) {
				t.Fatalf("webhook reached = %v, want %v", reached, !reached)
			}
		})
	}
}
