package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/mcp"
)

// upCall is one request the fake upstream received.
type upCall struct {
	httpMethod string
	method     string
	id         string // raw JSON-RPC id
	header     http.Header
	params     map[string]any
}

// fakeUpstream is a small MCP server over Streamable HTTP. It holds every
// task in one table, visible to everyone (like an SDK store without
// binding): Warden is what keeps principals apart.
type fakeUpstream struct {
	mu       sync.Mutex
	calls    []upCall
	tasks    map[string]string // task ID -> status
	order    []string
	sessions int
	// sse makes tools/list and tasks/get answer with an event stream.
	sse bool
	// failGet makes tasks/get answer HTTP 500 without a body.
	failGet bool
	// refuse makes steer/pause/resume/update answer a JSON-RPC error.
	refuse bool
	// bigAnswer makes tools/call "big" answer with this many bytes.
	bigAnswer int
	// failList makes tools/list answer HTTP 500 without a body.
	failList bool
	// toolsFor is the one-page tool list of a caller (by Authorization),
	// instead of fakeTools.
	toolsFor map[string][]map[string]any
	// replay is what a GET with Last-Event-ID gets: the events of the
	// stream it resumes (nil: the standalone stream's).
	replay []any
	// listPage pages tasks/list by this many tasks (0: one page); the
	// cursor is the offset of the next page.
	listPage int
}

func newFakeUpstream() *fakeUpstream { return &fakeUpstream{tasks: map[string]string{}} }

// tools is the upstream's tool list, on two pages.
var fakeTools = [][]map[string]any{
	{
		{"name": "fast", "execution": map[string]any{"taskSupport": "forbidden"}},
		{"name": "slow", "execution": map[string]any{"taskSupport": "optional"}},
		{"name": "stream"},
	},
	{
		{"name": "must", "execution": map[string]any{"taskSupport": "required"}},
		{"name": "plain"},
		{"name": "big"},
		{"name": "echo"},
	},
}

// addTask puts a task in the upstream's table directly.
func (u *fakeUpstream) addTask(status string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.addTaskLocked(status)
}

func (u *fakeUpstream) addTaskLocked(status string) string {
	id := fmt.Sprintf("task-%d", len(u.order)+1)
	u.tasks[id] = status
	u.order = append(u.order, id)
	return id
}

// configure changes the upstream's behaviour while it serves.
func (u *fakeUpstream) configure(f func(u *fakeUpstream)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(u)
}

func (u *fakeUpstream) setStatus(id, status string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.tasks[id] = status
}

// received returns the calls of a JSON-RPC method (every call for "").
func (u *fakeUpstream) received(method string) []upCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upCall
	for _, c := range u.calls {
		if method == "" || c.method == method {
			out = append(out, c)
		}
	}
	return out
}

func task(id, status string) map[string]any {
	return map[string]any{"taskId": id, "status": status, "createdAt": "2026-11-21T12:00:00Z", "lastUpdatedAt": "2026-11-21T12:00:00Z", "ttl": nil}
}

func notification(id, status string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "method": mcp.NotifyStatus, "params": task(id, status)}
}

func (u *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		// The standalone stream: a status notification for every task.
		u.mu.Lock()
		u.calls = append(u.calls, upCall{httpMethod: r.Method, header: r.Header.Clone()})
		var events []any
		for _, id := range u.order {
			events = append(events, notification(id, u.tasks[id]))
		}
		if r.Header.Get("Last-Event-ID") != "" && u.replay != nil {
			events = u.replay
		}
		u.mu.Unlock()
		writeSSE(w, events...)
		return
	}
	if r.Method != http.MethodPost {
		u.mu.Lock()
		u.calls = append(u.calls, upCall{httpMethod: r.Method, header: r.Header.Clone()})
		u.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var raw map[string]any
	if json.Unmarshal(body, &msg) != nil || json.Unmarshal(body, &raw) != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	// The real method and params are the exact-case members, as a
	// JavaScript or Python server reads them.
	method, _ := raw["method"].(string)
	params, _ := raw["params"].(map[string]any)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, upCall{httpMethod: r.Method, method: method, id: string(msg.ID), header: r.Header.Clone(), params: params})
	if len(msg.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	v2026 := r.Header.Get("Mcp-Protocol-Version") >= mcp.Era2026
	answer := func(result any) { writeJSON(w, msg.ID, result) }
	taskID, _ := params["taskId"].(string)
	switch method {
	case mcp.MethodInitialize:
		u.sessions++
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("up-sess-%d", u.sessions))
		answer(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tasks": map[string]any{"list": map[string]any{}}}})
	case mcp.MethodToolsList:
		if u.failList {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if tools, ok := u.toolsFor[r.Header.Get("Authorization")]; ok {
			answer(map[string]any{"tools": tools})
			return
		}
		page := 0
		if c, _ := params["cursor"].(string); c == "2" {
			page = 1
		}
		res := map[string]any{"tools": fakeTools[page]}
		if page == 0 {
			res["nextCursor"] = "2"
		}
		if u.sse {
			writeSSE(w, map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{}},
				map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": res})
			return
		}
		answer(res)
	case mcp.MethodToolsCall:
		name, _ := params["name"].(string)
		_, wantsTask := params["task"].(map[string]any)
		switch {
		case name == "stream":
			// Notifications about every task, then the answer.
			var events []any
			for _, id := range u.order {
				events = append(events, notification(id, u.tasks[id]))
			}
			events = append(events, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"content": []any{}}})
			writeSSE(w, events...)
		case name == "echo":
			answer(map[string]any{"content": []any{}, "structuredContent": params["arguments"]})
		case name == "big":
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("b", u.bigAnswer)}}})
		case v2026 && name == "slow":
			id := u.addTaskLocked(mcp.StatusWorking)
			res := task(id, mcp.StatusWorking)
			res["resultType"] = "task"
			answer(res)
		case wantsTask:
			id := u.addTaskLocked(mcp.StatusWorking)
			answer(map[string]any{"task": task(id, mcp.StatusWorking)})
		default:
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}})
		}
	case mcp.MethodList:
		from, to := 0, len(u.order)
		if c, _ := params["cursor"].(string); c != "" {
			from, _ = strconv.Atoi(c)
		}
		if u.listPage > 0 {
			to = min(from+u.listPage, len(u.order))
		}
		list := []any{}
		for _, id := range u.order[min(from, to):to] {
			list = append(list, task(id, u.tasks[id]))
		}
		res := map[string]any{"tasks": list}
		if to < len(u.order) {
			res["nextCursor"] = strconv.Itoa(to)
		}
		answer(res)
	case mcp.MethodGet, mcp.MethodCancel, mcp.MethodResult:
		st, ok := u.tasks[taskID]
		switch {
		case method == mcp.MethodGet && u.failGet:
			w.WriteHeader(http.StatusInternalServerError)
		case !ok:
			writeJSONError(w, msg.ID, mcp.ErrInvalidParams, "Task not found")
		case method == mcp.MethodCancel:
			u.tasks[taskID] = mcp.StatusCancelled
			answer(task(taskID, mcp.StatusCancelled))
		case method == mcp.MethodGet && u.sse:
			writeSSE(w, map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": task(taskID, st)})
		default:
			answer(task(taskID, st))
		}
	case mcp.MethodSteer, mcp.MethodPause, mcp.MethodResume, mcp.MethodUpdate:
		if _, ok := u.tasks[taskID]; !ok || u.refuse {
			writeJSONError(w, msg.ID, mcp.ErrInvalidParams, "refused")
			return
		}
		answer(map[string]any{})
	default:
		answer(map[string]any{})
	}
}

func writeJSON(w http.ResponseWriter, id json.RawMessage, result any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeJSONError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeSSE(w http.ResponseWriter, events ...any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for i, e := range events {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", i+1, b)
	}
}

// sharedPolicies compiles the default policies once for the package's tests.
var sharedPolicies = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

func newEnforcer(t testing.TB) *proxy.Enforcer {
	t.Helper()
	return newEnforcerFor(t, authn.MethodDev)
}

// newEnforcerFor is an Enforcer with the default policies that
// authenticates with one method.
func newEnforcerFor(t testing.TB, m authn.Method) *proxy.Enforcer {
	t.Helper()
	pe, err := sharedPolicies()
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{m}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: pe})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// harness is Warden's MCP sidecar in front of the fake upstream, both on
// real HTTP servers.
type harness struct {
	up    *fakeUpstream
	upSrv *httptest.Server
	e     *proxy.Enforcer
	srv   *Server
	front *httptest.Server
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	return newHarnessFor(t, cfg, up, upSrv)
}

// newHarnessFor puts a fresh Warden (a restart) in front of an upstream.
func newHarnessFor(t testing.TB, cfg Config, up *fakeUpstream, upSrv *httptest.Server) *harness {
	t.Helper()
	return newHarnessOn(t, cfg, up, upSrv, upSrv.Client(), httptest.NewServer)
}

// newHarnessOn is newHarnessFor with the client the sidecar reaches the
// upstream with (nil: the one it builds itself) and the server the front
// is served by.
func newHarnessOn(t testing.TB, cfg Config, up *fakeUpstream, upSrv *httptest.Server, client *http.Client, serve func(http.Handler) *httptest.Server) *harness {
	t.Helper()
	cfg.Upstream = upSrv.URL + "/mcp"
	cfg.Plaintext = true
	e := newEnforcer(t)
	srv, err := New(cfg, e, testKey, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	front := serve(srv)
	t.Cleanup(front.Close)
	return &harness{up: up, upSrv: upSrv, e: e, srv: srv, front: front}
}

// reply is a response as a client sees it: the HTTP status and headers, and
// the JSON-RPC messages of the body (one for JSON, one per event for SSE).
type reply struct {
	status int
	header http.Header
	body   []byte
	msgs   []map[string]any
	// ids are the SSE id lines, in order, including those of events that
	// carry no data.
	ids []string
}

// last returns the last message: the answer.
func (r reply) last(t testing.TB) map[string]any {
	t.Helper()
	if len(r.msgs) == 0 {
		t.Fatalf("no message in the reply (HTTP %d): %s", r.status, r.body)
	}
	return r.msgs[len(r.msgs)-1]
}

// errCode returns the answer's JSON-RPC error code, 0 when it is a result.
func (r reply) errCode(t *testing.T) int {
	t.Helper()
	e, ok := r.last(t)["error"].(map[string]any)
	if !ok {
		return 0
	}
	n, _ := e["code"].(float64)
	return int(n)
}

func (r reply) errMessage(t *testing.T) string {
	t.Helper()
	e, _ := r.last(t)["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

func (r reply) result(t testing.TB) map[string]any {
	t.Helper()
	res, ok := r.last(t)["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result (HTTP %d): %s", r.status, r.body)
	}
	return res
}

type hdr map[string]string

func (h *harness) do(t testing.TB, method, path, principal, body string, headers hdr) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, h.front.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if principal != "" {
		req.Header.Set("Authorization", "Bearer "+principal)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
		if k == "Host" {
			req.Host = v
		}
	}
	resp, err := h.front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := reply{status: resp.StatusCode, header: resp.Header, body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		var data []string
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "id:"):
				out.ids = append(out.ids, strings.TrimSpace(l[3:]))
			case strings.HasPrefix(l, "data:"):
				data = append(data, strings.TrimPrefix(l[5:], " "))
			case l == "" && data != nil:
				var m map[string]any
				if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &m); err != nil {
					t.Fatalf("event data %q: %v", data, err)
				}
				out.msgs = append(out.msgs, m)
				data = nil
			}
		}
	} else if len(bytes.TrimSpace(b)) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		out.msgs = []map[string]any{m}
	}
	return out
}

func (h *harness) post(t testing.TB, principal, body string, headers hdr) reply {
	t.Helper()
	return h.do(t, http.MethodPost, "/mcp", principal, body, headers)
}

func rpc(id any, method string, params any) string {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		m["id"] = id
	}
	if params != nil {
		m["params"] = params
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// createTask has principal create a task (2025-11-25, nested result) and
// returns its handle.
func (h *harness) createTask(t testing.TB, principal string) string {
	t.Helper()
	r := h.post(t, principal, rpc(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}}), nil)
	res := r.result(t)
	tk, _ := res["task"].(map[string]any)
	handle, _ := tk["taskId"].(string)
	if !strings.HasPrefix(handle, handlePrefix) {
		t.Fatalf("created task id %q is not a handle: %s", handle, r.body)
	}
	return handle
}

// upstreamID opens principal's task handle.
func (h *harness) upstreamID(t *testing.T, principal, handle string) string {
	t.Helper()
	id, ok := h.srv.handles.open(kindTask, principal, handle)
	if !ok {
		t.Fatalf("%q is not %s's task handle", handle, principal)
	}
	return id
}

func taskIDs(t *testing.T, res map[string]any) []string {
	t.Helper()
	list, ok := res["tasks"].([]any)
	if !ok {
		t.Fatalf("no tasks in %v", res)
	}
	var out []string
	for _, x := range list {
		m, _ := x.(map[string]any)
		id, _ := m["taskId"].(string)
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
