package test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// loopbackService is a service that listens on loopback only (an admin
// port, a metadata proxy) and counts who reached it.
type loopbackService struct {
	url  string
	port string
	hits atomic.Int32
}

func newLoopbackService(t testing.TB) *loopbackService {
	t.Helper()
	s := &loopbackService{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.hits.Add(1) }))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	_, s.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return s
}

// redirector answers every request with a 307 to target.
func redirector(t testing.TB, target string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// loopbackHostName is a name other than localhost that resolves to a
// loopback address here (the machine's host name in /etc/hosts), or "".
func loopbackHostName() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	addrs, err := net.LookupHost(h)
	if err != nil || len(addrs) == 0 {
		return ""
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return ""
		}
	}
	return h
}

// pushOnce gives a new input-required task of alice's a push config with
// url, answers the task (the server pushes its update to url) and waits
// long enough for the server's push (both servers push within 2 s).
func pushOnce(t testing.TB, e *a2aAttackEnv, url string) (a2aTask, *a2aAnswer) {
	t.Helper()
	task := e.victim(t, "input name")
	a := e.call(t, aliceToken, "CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": url, "token": "tok-relay"})
	if a.Error == nil {
		e.send(t, aliceToken, "alice", map[string]any{"taskId": task.ID}, false)
	}
	return task, a
}

// pushedTaskID is the task a notification is about, as the webhook got it.
func pushedTaskID(body string) string {
	var n struct {
		ID           string              `json:"id"`
		TaskID       string              `json:"taskId"`
		Task         struct{ ID string } `json:"task"`
		StatusUpdate struct {
			TaskID string `json:"taskId"`
		} `json:"statusUpdate"`
		ArtifactUpdate struct {
			TaskID string `json:"taskId"`
		} `json:"artifactUpdate"`
	}
	_ = json.Unmarshal([]byte(body), &n)
	for _, id := range []string{n.Task.ID, n.StatusUpdate.TaskID, n.ArtifactUpdate.TaskID, n.TaskID, n.ID} {
		if id != "" {
			return id
		}
	}
	return ""
}

// TestA2APushRelay (issue 24 item 16): a push config naming a webhook that
// redirects to a loopback-only service, or a host name that resolves to
// loopback, reaches that service when the A2A server pushes directly (a2a-go
// v2.3.1's push client follows the 307; both servers resolve the name), and
// never through Warden, whose relay dials only what it checked and follows
// no redirect. A legitimate webhook gets its notification through Warden
// with handles alice opens in GetTask, and reads of the config give alice
// her own URL back. Before the relay, Warden let both configs through (the
// name is no address, the redirector was allowed) and the server reached
// the service.
func TestA2APushRelay(t *testing.T) {
	name := loopbackHostName()
	for _, s := range a2aServers() {
		t.Run(s.name, func(t *testing.T) {
			base := s.start(t)
			secret := newLoopbackService(t)
			redirect := redirector(t, secret.url+"/admin")
			hook := newHookRecorder(t)
			// The operator allows the redirector (a receiver it trusts)
			// and the legitimate hook, both on loopback here.
			warden := startA2AWarden(t, base, "--a2a-webhook-allow", strings.TrimPrefix(redirect, "http://"),
				"--a2a-webhook-allow", strings.TrimPrefix(strings.TrimSuffix(hook.url, "/hook"), "http://"))
			direct := &a2aAttackEnv{url: base + "/jsonrpc"}
			through := &a2aAttackEnv{url: warden + "/jsonrpc"}
			type row struct {
				name, url string
				// direct says whether the server reaches the service by
				// itself (the Python server's httpx follows no redirect).
				direct bool
			}
			rows := []row{{"redirect", redirect + "/hook", s.name == "a2a-go"}}
			if name != "" {
				rows = append(rows, row{"name resolving to loopback (" + name + ")", "http://" + name + ":" + secret.port + "/hook", true})
			} else {
				t.Log("no host name resolves to loopback here: the name row is skipped")
			}
			for _, r := range rows {
				t.Run(r.name, func(t *testing.T) {
					before := secret.hits.Load()
					if _, a := pushOnce(t, direct, r.url); a.Error != nil {
						t.Fatalf("direct config refused: %s", a)
					}
					time.Sleep(3 * time.Second)
					reached := secret.hits.Load() > before
					if reached != r.direct {
						t.Errorf("direct: the loopback-only service reached %v, want %v", reached, r.direct)
					}
					before = secret.hits.Load()
					_, a := pushOnce(t, through, r.url)
					time.Sleep(3 * time.Second)
					if secret.hits.Load() != before {
						t.Fatalf("through Warden the loopback-only service was reached (config answer %s)", a)
					}
					t.Logf("through Warden: config %s; the service not reached", a)
				})
			}
			t.Run("legitimate", func(t *testing.T) {
				task, a := pushOnce(t, through, hook.url)
				if a.Error != nil {
					t.Fatalf("config refused: %s", a)
				}
				if strings.Contains(a.String(), "/push/") || !strings.Contains(a.String(), hook.url) {
					t.Errorf("the config's answer does not give alice her URL: %s", a)
				}
				call, ok := hook.waitFor(10*time.Second, func(c hookCall) bool { return pushedTaskID(c.body) == task.ID })
				if !ok {
					hook.mu.Lock()
					t.Fatalf("no push naming alice's handle %s reached the webhook; it got %+v", task.ID, hook.seen)
				}
				if got := call.header.Get("A2A-Notification-Token") + call.header.Get("X-A2A-Notification-Token"); got != "tok-relay" {
					t.Errorf("notification token %q", got)
				}
				if g := through.call(t, aliceToken, "GetTask", map[string]any{"id": pushedTaskID(call.body)}); g.Error != nil {
					t.Errorf("GetTask with the pushed id: %s", g)
				}
				for _, m := range []string{"GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs"} {
					var id struct{ ID string }
					_ = json.Unmarshal(a.Result, &id)
					g := through.call(t, aliceToken, m, map[string]any{"taskId": task.ID, "id": id.ID})
					if g.Error != nil || strings.Contains(g.String(), "/push/") || !strings.Contains(g.String(), hook.url) {
						t.Errorf("%s does not give alice her URL: %s", m, g)
					}
				}
			})
		})
	}
}

// TestA2ACardSpelling (issue 24 item 15): each server is started on
// 127.0.0.1 and its card names itself so, while Warden is told the upstream
// is localhost:PORT. The public and the extended card through Warden name no
// address of the server in any spelling: every interface is Warden's.
// Before, the interfaces were compared with the upstream's spelling, so the
// server's own JSON-RPC and REST addresses passed through.
func TestA2ACardSpelling(t *testing.T) {
	for _, s := range a2aServers() {
		t.Run(s.name, func(t *testing.T) {
			base := s.start(t)
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
			warden := startA2AWarden(t, "http://localhost:"+port)
			resp, err := http.Get(base + "/.well-known/agent-card.json")
			if err != nil {
				t.Fatal(err)
			}
			var direct bytes.Buffer
			_, _ = direct.ReadFrom(resp.Body)
			resp.Body.Close()
			if !strings.Contains(direct.String(), "127.0.0.1:"+port) {
				t.Fatalf("the server's card does not name it as 127.0.0.1: %s", direct.String())
			}
			resp, err = http.Get(warden + "/.well-known/agent-card.json")
			if err != nil {
				t.Fatal(err)
			}
			var card bytes.Buffer
			_, _ = card.ReadFrom(resp.Body)
			resp.Body.Close()
			ext := (&a2aAttackEnv{url: warden + "/jsonrpc"}).call(t, aliceToken, "GetExtendedAgentCard", map[string]any{})
			for name, c := range map[string]string{"public card": card.String(), "extended card": ext.String()} {
				if resp.StatusCode != http.StatusOK || strings.Contains(c, ":"+port) {
					t.Errorf("the %s through Warden names the server: %s", name, c)
				}
				if !strings.Contains(c, warden+"/jsonrpc") {
					t.Errorf("the %s through Warden does not name Warden: %s", name, c)
				}
			}
		})
	}
}

// TestA2AChosenContext (issue 24 item 14), against both real servers through
// Warden: a contextId alice chooses works and reads back as she spelled it
// (it was -32001); bob choosing the same id gets a context of his own and
// never sees her task; empty-string taskId and contextId are absent as both
// servers read them (they were -32001); alice's first message reads back
// without the context Warden gave it.
func TestA2AChosenContext(t *testing.T) {
	for _, s := range a2aServers() {
		t.Run(s.name, func(t *testing.T) {
			e := &a2aAttackEnv{url: startA2AWarden(t, s.start(t)) + "/jsonrpc"}
			chosen := "alice-ctx-" + madeUpID()
			alice, a := e.send(t, aliceToken, "hello "+aliceSecret, map[string]any{"contextId": chosen}, false)
			if alice.ID == "" || alice.ContextID != chosen {
				t.Fatalf("alice's chosen context: %s", a)
			}
			again, a := e.send(t, aliceToken, "again", map[string]any{"contextId": chosen}, false)
			if again.ID == "" || again.ContextID != chosen {
				t.Fatalf("alice continuing her chosen context: %s", a)
			}
			if g := e.call(t, aliceToken, "GetTask", map[string]any{"id": alice.ID}); g.Error != nil || !strings.Contains(g.String(), `"contextId":"`+chosen+`"`) {
				t.Fatalf("GetTask of her task: %s", g)
			}
			bob, a := e.send(t, bobToken, "hello", map[string]any{"contextId": chosen}, false)
			if bob.ID == "" || bob.ContextID != chosen || strings.Contains(a.String(), aliceSecret) {
				t.Fatalf("bob choosing alice's id: %s", a)
			}
			if l := e.call(t, bobToken, "ListTasks", map[string]any{"contextId": chosen}); l.Error != nil || strings.Contains(l.String(), aliceSecret) || strings.Contains(l.String(), alice.ID) {
				t.Fatalf("bob's ListTasks of his %s: %s", chosen, l)
			}
			if empty, a := e.send(t, aliceToken, "empty", map[string]any{"taskId": "", "contextId": ""}, false); empty.ID == "" {
				t.Fatalf("empty-string ids: %s", a)
			}
			a = e.call(t, aliceToken, "SendMessage", map[string]any{"message": a2aMessage("first", nil)})
			var r struct {
				Task struct {
					ContextID string           `json:"contextId"`
					History   []map[string]any `json:"history"`
				} `json:"task"`
			}
			if a.Error != nil || json.Unmarshal(a.Result, &r) != nil || r.Task.ContextID == "" || len(r.Task.History) == 0 {
				t.Fatalf("a first message: %s", a)
			}
			if c, ok := r.Task.History[0]["contextId"]; ok {
				t.Errorf("the first message reads back with a context it never sent (%v): %s", c, a)
			}
		})
	}
}
