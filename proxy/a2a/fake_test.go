package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
)

// fakeUpstream is a small A2A server with the ownership gaps of a2a-go
// v2.3.1 and worse: it checks nothing, and ListTasks lists every task.
type fakeUpstream struct {
	mu    sync.Mutex
	n     int
	tasks map[string]map[string]any
	push  map[string][]map[string]any
	seen  []string // the bodies it received
	hosts []string // the Host of each request
	base  string
	// hostile, when set, answers instead of the fake when it returns a
	// body: an SSE stream when the body starts with "data:".
	hostile func(method string, p map[string]any) string
}

func newFakeUpstream() *fakeUpstream {
	return &fakeUpstream{tasks: map[string]map[string]any{}, push: map[string][]map[string]any{}}
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/.well-known/agent-card.json" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"fake","supportedInterfaces":[{"url":"%s/jsonrpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"%s/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"},{"url":"https://elsewhere.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true}}`, f.base, f.base)
		return
	}
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, string(b))
	f.hosts = append(f.hosts, r.Host)
	f.mu.Unlock()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params map[string]any  `json:"params"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		http.Error(w, "bad", 400)
		return
	}
	if f.hostile != nil {
		if body := f.hostile(req.Method, req.Params); body != "" {
			w.Header().Set("Content-Type", "application/json")
			if strings.HasPrefix(body, "data:") {
				w.Header().Set("Content-Type", "text/event-stream")
			}
			_, _ = io.WriteString(w, body)
			return
		}
	}
	result, rpcErr := f.handle(req.Method, req.Params)
	answer := func(res any) []byte {
		m := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rpcErr != "" {
			m["error"] = map[string]any{"code": -32001, "message": rpcErr}
		} else {
			m["result"] = res
		}
		out, _ := json.Marshal(m)
		return out
	}
	if (req.Method == "SendStreamingMessage" || req.Method == "SubscribeToTask") && rpcErr == "" {
		w.Header().Set("Content-Type", "text/event-stream")
		t := result.(map[string]any)["task"].(map[string]any)
		fmt.Fprintf(w, "data: %s\n\n", answer(result))
		fmt.Fprintf(w, "data: %s\n\n", answer(map[string]any{"statusUpdate": map[string]any{"taskId": t["id"], "contextId": t["contextId"], "status": map[string]any{"state": "TASK_STATE_COMPLETED"}}}))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer(result))
}

func (f *fakeUpstream) handle(method string, p map[string]any) (any, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	switch method {
	case "SendMessage", "SendStreamingMessage":
		msg := p["message"].(map[string]any)
		if id := str(msg, "taskId"); id != "" {
			t, ok := f.tasks[id]
			if !ok {
				return nil, "task not found"
			}
			t["status"] = map[string]any{"state": "TASK_STATE_COMPLETED"}
			return map[string]any{"task": t}, ""
		}
		f.n++
		ctx := str(msg, "contextId")
		if ctx == "" {
			ctx = fmt.Sprintf("ctx-%d", f.n)
		}
		text := ""
		if parts, ok := msg["parts"].([]any); ok && len(parts) > 0 {
			text, _ = parts[0].(map[string]any)["text"].(string)
		}
		state := "TASK_STATE_COMPLETED"
		switch {
		case strings.HasPrefix(text, "input"):
			state = "TASK_STATE_INPUT_REQUIRED"
		case text == "wait":
			state = "TASK_STATE_WORKING"
		}
		t := map[string]any{"id": fmt.Sprintf("task-%d", f.n), "contextId": ctx, "status": map[string]any{"state": state},
			"history": []any{map[string]any{"messageId": str(msg, "messageId"), "role": "ROLE_USER", "parts": msg["parts"], "referenceTaskIds": msg["referenceTaskIds"]}}}
		f.tasks[t["id"].(string)] = t
		return map[string]any{"task": t}, ""
	case "GetTask", "SubscribeToTask":
		t, ok := f.tasks[str(p, "id")]
		if !ok {
			return nil, "task not found"
		}
		if method == "SubscribeToTask" {
			return map[string]any{"task": t}, ""
		}
		return t, ""
	case "CancelTask":
		t, ok := f.tasks[str(p, "id")]
		if !ok {
			return nil, "task not found"
		}
		t["status"] = map[string]any{"state": "TASK_STATE_CANCELED"}
		return t, ""
	case "ListTasks":
		// Every task, oldest first, paged as the SDK servers page: a
		// token ("page-N", the index of the page's first task) when more
		// follow.
		var all []any
		for i := 1; i <= f.n; i++ {
			if t, ok := f.tasks[fmt.Sprintf("task-%d", i)]; ok {
				all = append(all, t)
			}
		}
		size, from := 50, 0
		if n, ok := p["pageSize"].(float64); ok && n > 0 {
			size = int(n)
		}
		if tok := str(p, "pageToken"); tok != "" {
			if _, err := fmt.Sscanf(tok, "page-%d", &from); err != nil || from > len(all) {
				return nil, "invalid page token"
			}
		}
		page, next := all[from:min(from+size, len(all))], ""
		if from+size < len(all) {
			next = fmt.Sprintf("page-%d", from+size)
		}
		return map[string]any{"tasks": page, "nextPageToken": next, "pageSize": size, "totalSize": len(all)}, ""
	case "CreateTaskPushNotificationConfig":
		c := map[string]any{"id": fmt.Sprintf("push-%d", len(f.push)+1), "taskId": p["taskId"], "url": p["url"], "token": p["token"],
			"authentication": map[string]any{"scheme": "Bearer", "credentials": "secret-credential"}}
		f.push[str(p, "taskId")] = append(f.push[str(p, "taskId")], c)
		return c, ""
	case "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig":
		cs := f.push[str(p, "taskId")]
		switch {
		case method == "ListTaskPushNotificationConfigs":
			return map[string]any{"configs": cs}, ""
		case len(cs) == 0:
			return nil, "push config not found"
		case method == "GetTaskPushNotificationConfig":
			return cs[0], ""
		}
		delete(f.push, str(p, "taskId"))
		return map[string]any{}, ""
	case "GetExtendedAgentCard":
		return map[string]any{"name": "fake extended", "supportedInterfaces": []any{map[string]any{"url": f.base + "/jsonrpc", "protocolBinding": "JSONRPC"}}}, ""
	}
	return nil, "method not found"
}

// received returns the bodies the upstream got.
func (f *fakeUpstream) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

var (
	policyOnce sync.Once
	policyEng  *policies.Engine
	policyErr  error
)

func newEnforcer(t testing.TB) *proxy.Enforcer { return newEnforcerWith(t, proxy.Config{}) }

func newEnforcerWith(t testing.TB, cfg proxy.Config) *proxy.Enforcer {
	t.Helper()
	return newEnforcerOn(t, cfg, nil)
}

// newEnforcerOn is newEnforcerWith on a shared task table (nil: none).
func newEnforcerOn(t testing.TB, cfg proxy.Config, store proxy.TaskStore) *proxy.Enforcer {
	t.Helper()
	policyOnce.Do(func() { policyEng, policyErr = policies.New(context.Background(), policies.Config{}) })
	if policyErr != nil {
		t.Fatal(policyErr)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := proxy.New(cfg, proxy.Options{Authenticator: a, Policies: policyEng, Tasks: store})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var testKey, _ = handle.SingleKey([]byte("0123456789abcdef0123456789abcdef"))

// harness is Warden's A2A sidecar in front of the fake upstream.
type harness struct {
	up    *fakeUpstream
	front *httptest.Server
	srv   *Server
}

func newHarness(t testing.TB, cfg Config) *harness { return newHarnessWith(t, cfg, newEnforcer(t)) }

func newHarnessWith(t testing.TB, cfg Config, e *proxy.Enforcer) *harness {
	t.Helper()
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	return newHarnessOn(t, cfg, e, up, upSrv, upSrv.Client(), httptest.NewServer)
}

// newProductionHarness is newHarness served as warden serve serves it: the
// front through listener.NewHTTPServer, the upstream reached with the
// client the sidecar builds itself (what the benchmarks measure).
func newProductionHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	return newHarnessOn(t, cfg, newEnforcer(t), up, upSrv, nil, func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.Config = listener.NewHTTPServer(h, listener.Limits{}.WithDefaults())
		startLabelled(s)
		return s
	})
}

// startLabelled starts s with its goroutines (the connections it serves and
// the upstream connections their handlers open) labelled side=warden, for
// profiles: go tool pprof -tagfocus side=warden shows the hop's share, in
// BenchmarkA2ASidecar and in BenchmarkA2ANullHop alike.
func startLabelled(s *httptest.Server) {
	pprof.Do(context.Background(), pprof.Labels("side", "warden"), func(context.Context) { s.Start() })
}

func newHarnessOn(t testing.TB, cfg Config, e *proxy.Enforcer, up *fakeUpstream, upSrv *httptest.Server, client *http.Client, serve func(http.Handler) *httptest.Server) *harness {
	t.Helper()
	up.base = upSrv.URL
	cfg.Upstream = upSrv.URL + "/jsonrpc"
	srv, err := New(cfg, e, testKey, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	front := serve(srv)
	t.Cleanup(front.Close)
	relay := httptest.NewServer(srv.relay)
	t.Cleanup(relay.Close)
	srv.relay.Bound(relay.Listener.Addr())
	return &harness{up: up, front: front, srv: srv}
}

// rpc sends one JSON-RPC request as principal ("" for none) and returns the
// HTTP status and the body.
func (h *harness) rpc(t testing.TB, principal, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.front.URL+"/jsonrpc", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if principal != "" {
		req.Header.Set("Authorization", "Bearer "+principal)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// call is rpc with a method and params, decoding the answer.
func (h *harness) call(t testing.TB, principal, method string, params any) (int, map[string]any) {
	t.Helper()
	p, _ := json.Marshal(params)
	status, body := h.rpc(t, principal, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, p))
	var m map[string]any
	if strings.HasPrefix(body, "data:") {
		body = strings.TrimPrefix(strings.SplitN(body, "\n", 2)[0], "data: ")
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s answer %q: %v", method, body, err)
	}
	return status, m
}

// send starts a task for principal with text and returns its task object.
func (h *harness) send(t testing.TB, principal, text string) map[string]any {
	t.Helper()
	_, m := h.call(t, principal, "SendMessage", map[string]any{"message": map[string]any{"messageId": "m-" + text, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}})
	res, _ := m["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	if task == nil {
		t.Fatalf("SendMessage answered %v", m)
	}
	return task
}
