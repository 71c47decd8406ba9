package pushrelay

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// owners is the task and context table the relay reads.
type owners map[string]string

func (o owners) A2AOwners(_ context.Context, ids []string) ([]string, error) {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = o["t:"+id]
	}
	return out, nil
}

func (o owners) A2AContextOwner(_ context.Context, id string) (string, error) {
	return o["c:"+id], nil
}

// always is an authenticator under which every grant holds.
type always struct{}

func (always) Holds(context.Context, authn.Grant, time.Time, authn.ClientCAs) error { return nil }

func (always) Refuse(context.Context, string, string, string, rules.Verdict) proxy.Decision {
	return proxy.Decision{}
}

func handles(kind a2a.Kind, principal, id string) string {
	return "h" + string(kind) + "(" + principal + "," + id + ")"
}

// counting is a webhook that counts the requests it gets and keeps the last.
type counting struct {
	n    atomic.Int32
	last atomic.Pointer[string]
	hdr  atomic.Pointer[http.Header]
	srv  *httptest.Server
}

func newCounting(t *testing.T, h http.HandlerFunc) *counting {
	c := &counting{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		b, _ := io.ReadAll(r.Body)
		s, hd := string(b), r.Header.Clone()
		c.last.Store(&s)
		c.hdr.Store(&hd)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *counting) port() string {
	return c.srv.Listener.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]
}

// loopbackName is a name other than localhost that resolves to loopback
// here (the machine's host name, in /etc/hosts), or "".
func loopbackName(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	addrs, err := net.LookupHost(h)
	if err != nil || len(addrs) == 0 {
		return ""
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() && !ip.IsPrivate() {
			return ""
		}
	}
	return h
}

// TestRelay: the relay delivers the owner's notification with handles and
// the push headers, and never reaches an internal address: not by a
// redirect (a 307 to a loopback-only service), not by a name resolving to
// loopback, not with allow-only set, not with a notification about another
// principal's task, and not with a forged relay URL. Before the relay the
// server itself called the URL: every refusal row was a delivery.
func TestRelay(t *testing.T) {
	secret := newCounting(t, nil) // the loopback-only service
	legit := newCounting(t, nil)
	redirect := newCounting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, secret.srv.URL+"/admin", http.StatusTemporaryRedirect)
	})
	name := loopbackName(t)
	tab := owners{"t:task-1": "alice", "c:ctx-1": "alice", "t:task-b": "bob", "c:ctx-b": "bob"}
	allowed := []string{"127.0.0.1:" + legit.port(), "127.0.0.1:" + redirect.port()}
	type row struct {
		name      string
		allow     []string
		only      bool
		target    Target
		body      string
		status    int
		reached   *counting
		unreached []*counting
		want      string // in the delivered body
	}
	task := `{"task":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"},"history":[{"messageId":"m","taskId":"task-1","contextId":"ctx-1","referenceTaskIds":["task-1","task-b"]}]}}`
	rows := []row{
		{name: "legit", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"}, body: task, status: 200, reached: legit,
			want: `{"task":{"contextId":"hx(alice,ctx-1)","history":[{"contextId":"hx(alice,ctx-1)","messageId":"m","referenceTaskIds":["ht(alice,task-1)"],"taskId":"ht(alice,task-1)"}],"id":"ht(alice,task-1)","status":{"state":"TASK_STATE_COMPLETED"}}}`},
		{name: "a 1.0 status update of a task a message created", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Context: "ctx-new"},
			body: `{"statusUpdate":{"taskId":"task-new","contextId":"ctx-new","status":{"state":"TASK_STATE_WORKING"}}}`, status: 200, reached: legit,
			want: `{"statusUpdate":{"contextId":"hx(alice,ctx-new)","status":{"state":"TASK_STATE_WORKING"},"taskId":"ht(alice,task-new)"}}`},
		{name: "a Task at the top (0.3, the Python server)", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"id":"task-1","contextId":"ctx-1","kind":"task","status":{"state":"completed"}}`, status: 200, reached: legit,
			want: `{"contextId":"hx(alice,ctx-1)","id":"ht(alice,task-1)","kind":"task","status":{"state":"completed"}}`},
		{name: "an update in a context of its own (the Python server's continuation)", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"statusUpdate":{"taskId":"task-1","contextId":"ctx-unknown"}}`, status: 200, reached: legit,
			want: `{"statusUpdate":{"contextId":"hx(alice,ctx-unknown)","taskId":"ht(alice,task-1)"}}`},
		{name: "redirect to a loopback-only service", allow: allowed, target: Target{Principal: "alice", URL: redirect.srv.URL + "/hook", Task: "task-1"}, body: task,
			status: http.StatusBadGateway, reached: redirect, unreached: []*counting{secret}},
		{name: "another's task", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"task":{"id":"task-b","contextId":"ctx-b","status":{"state":"TASK_STATE_COMPLETED"}}}`, status: http.StatusForbidden, unreached: []*counting{legit}},
		{name: "another's context", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"task":{"id":"task-1","contextId":"ctx-b"}}`, status: http.StatusForbidden, unreached: []*counting{legit}},
		// A name the rewrite reads, spelled in another case (alone, or
		// beside it) or given twice, anywhere: a webhook matching names
		// without case (Go's encoding/json, a2a-go) would read the one
		// Warden did not rewrite (before, another's raw task id passed).
		{name: "another's task in another case", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1","status":{"message":{"messageId":"m","TaskId":"task-b"}}}}`, status: http.StatusForbidden, unreached: []*counting{legit}},
		{name: "another's context in another case", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"task":{"id":"task-1","contextID":"ctx-b"}}`, status: http.StatusForbidden, unreached: []*counting{legit}},
		{name: "references in another case", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"task":{"id":"task-1","contextId":"ctx-1","history":[{"messageId":"m","referenceTaskIDs":["task-b"]}]}}`, status: http.StatusForbidden, unreached: []*counting{legit}},
		{name: "a task id in two cases", allow: allowed, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"},
			body: `{"statusUpdate":{"taskId":"task-1","taskid":"task-b","contextId":"ctx-1"}}`, status: http.StatusForbidden, unreached: []*counting{legit}},
		{name: "not on the list, allow-only", allow: []string{"127.0.0.1:1"}, only: true, target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"}, body: task,
			status: http.StatusBadGateway, unreached: []*counting{legit}},
		{name: "loopback without the allowlist", target: Target{Principal: "alice", URL: legit.srv.URL + "/hook", Task: "task-1"}, body: task,
			status: http.StatusBadGateway, unreached: []*counting{legit}},
		{name: "IPv4-mapped loopback", target: Target{Principal: "alice", URL: "http://[::ffff:127.0.0.1]:" + legit.port() + "/hook", Task: "task-1"}, body: task,
			status: http.StatusBadGateway, unreached: []*counting{legit}},
	}
	if name != "" {
		rows = append(rows, row{name: "a name resolving to loopback (" + name + ")", target: Target{Principal: "alice", URL: "http://" + name + ":" + legit.port() + "/hook", Task: "task-1"}, body: task,
			status: http.StatusBadGateway, unreached: []*counting{legit}})
	} else {
		t.Log("no host name resolving to loopback here: that row is skipped")
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			allow, err := a2a.ParseAllow(tc.allow)
			if err != nil {
				t.Fatal(err)
			}
			allow.Only = tc.only
			r, err := New(Config{}, listener.Limits{}, allow, ring(t, "0123456789abcdef0123456789abcdef"), tab, handles, always{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(r)
			defer front.Close()
			r.Bound(front.Listener.Addr())
			n0 := map[*counting]int32{}
			for _, c := range append([]*counting{legit, secret, redirect}, tc.unreached...) {
				n0[c] = c.n.Load()
			}
			tc.target.Grant = authn.Grant{Principal: tc.target.Principal, Method: "static", Issued: time.Now().Unix()}
			req, _ := http.NewRequest(http.MethodPost, r.URL(tc.target), strings.NewReader(tc.body))
			req.Header.Set("X-A2A-Notification-Token", "tok-123")
			req.Header.Set("Authorization", "Bearer cred")
			req.Header.Set("Cookie", "not=forwarded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if resp.Header.Get("Location") != "" {
				t.Errorf("the relay answered with a Location: %s", resp.Header.Get("Location"))
			}
			for _, c := range tc.unreached {
				if c.n.Load() != n0[c] {
					t.Errorf("%s was reached", c.srv.URL)
				}
			}
			if tc.reached != nil {
				if tc.reached.n.Load() != n0[tc.reached]+1 {
					t.Fatalf("%s was not reached", tc.reached.srv.URL)
				}
				h := *tc.reached.hdr.Load()
				if h.Get("X-A2A-Notification-Token") != "tok-123" || h.Get("Authorization") != "Bearer cred" || h.Get("Cookie") != "" {
					t.Errorf("delivered headers %v", h)
				}
				if tc.want != "" && *tc.reached.last.Load() != tc.want {
					t.Errorf("delivered\n %s\nwant\n %s", *tc.reached.last.Load(), tc.want)
				}
			}
		})
	}
}

// TestRelayURLs: a relay URL opens only with the key, a forged or altered
// one is 404; Restore gives the owner its URL back and refuses another's.
func TestRelayURLs(t *testing.T) {
	r, err := New(Config{}, listener.Limits{}, a2a.Allow{}, ring(t, "0123456789abcdef0123456789abcdef"), owners{}, handles, always{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL(Target{Principal: "alice", URL: "https://hooks.example.com/a"}) != "" {
		t.Fatal("a relay URL before the relay listens")
	}
	front := httptest.NewServer(r)
	defer front.Close()
	r.Bound(front.Listener.Addr())
	ru := r.URL(Target{Principal: "alice", URL: "https://hooks.example.com/a", Task: "task-1"})
	if strings.Contains(ru, "hooks.example.com") || strings.Contains(ru, "alice") || strings.Contains(ru, "task-1") {
		t.Fatalf("the relay URL shows what it stands for: %s", ru)
	}
	other, _ := New(Config{}, listener.Limits{}, a2a.Allow{}, ring(t, "another key, 32 bytes long......"), owners{}, handles, always{}, nil, nil)
	other.Bound(front.Listener.Addr())
	u, _ := url.Parse(ru)
	for _, p := range []string{u.Path[:len(u.Path)-2] + "xx", "/push/", "/push/wt2." + u.Path[len("/push/"):], strings.TrimPrefix(other.URL(Target{Principal: "alice", URL: "http://x/"}), front.URL)} {
		resp, err := http.Post(front.URL+p, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", p, resp.StatusCode)
		}
	}
	cfg, err := jsonrpc.ReadObject([]byte(`{"taskId":"task-1","url":` + string(jsonrpc.AppendString(nil, ru)) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if mine, err := r.Restore(cfg, "alice"); !mine || err != nil {
		t.Fatalf("not restored for alice: %v", err)
	}
	if got := string(cfg.AppendTo(nil)); got != `{"taskId":"task-1","url":"https://hooks.example.com/a"}` {
		t.Fatalf("restored for alice: %s", got)
	}
	cfg, _ = jsonrpc.ReadObject([]byte(`{"taskId":"task-1","pushNotificationConfig":{"url":` + string(jsonrpc.AppendString(nil, ru)) + `}}`))
	if mine, _ := r.Restore(cfg, "bob"); mine {
		t.Fatalf("bob was given alice's config: %s", cfg.AppendTo(nil))
	}
	cfg, _ = jsonrpc.ReadObject([]byte(`{"taskId":"task-1","pushNotificationConfig":{"URL":` + string(jsonrpc.AppendString(nil, ru)) + `}}`))
	if _, err := r.Restore(cfg, "alice"); err == nil {
		t.Fatal("a url in another case was not refused")
	}
}

// ring is a one-key handle keyring.
func ring(t *testing.T, secret string) *handle.Ring {
	t.Helper()
	r, err := handle.SingleKey([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
