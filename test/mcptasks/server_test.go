package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func newTestServer(t *testing.T, lax bool) (*Server, string) {
	t.Helper()
	s := NewServer(lax)
	ts := httptest.NewServer(s.Handler("/mcp"))
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts.URL
}

type rpcErr struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

type reply struct {
	status int
	header http.Header
	body   []byte
	Result map[string]any `json:"result"`
	Error  *rpcErr        `json:"error"`
}

// metaFor returns the per-request _meta a 2026-07-28 client sends.
func metaFor(withTasks bool) map[string]any {
	caps := map[string]any{}
	if withTasks {
		caps["extensions"] = map[string]any{extTasks: map[string]any{}}
	}
	return map[string]any{metaVersion: protocolVersion, metaClientCaps: caps}
}

// call sends a JSON-RPC request with the headers a conforming client sets.
// hdr overrides them; an empty value removes the header.
func call(t *testing.T, base, method string, params map[string]any, hdr map[string]string) reply {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = metaFor(true)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	h := map[string]string{"MCP-Protocol-Version": protocolVersion, "Mcp-Method": method, "Accept": "application/json"}
	if id, ok := params["taskId"].(string); ok {
		h["Mcp-Name"] = id
	} else if n, ok := params["name"].(string); ok {
		h["Mcp-Name"] = n
	}
	for k, v := range hdr {
		h[k] = v
	}
	return post(t, base+"/mcp", body, h)
}

func post(t *testing.T, url string, body []byte, hdr map[string]string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	data := b
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		m := regexp.MustCompile(`(?m)^data: (.*)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("SSE body without data: %q", b)
		}
		data = m[1]
	}
	if len(data) > 0 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("decoding %q: %v", data, err)
		}
	}
	return r
}

func mustOK(t *testing.T, r reply) map[string]any {
	t.Helper()
	if r.status != http.StatusOK || r.Error != nil {
		t.Fatalf("want success, got HTTP %d %s", r.status, r.body)
	}
	return r.Result
}

func mustErr(t *testing.T, r reply, status, code int) {
	t.Helper()
	if r.status != status || r.Error == nil || r.Error.Code != code {
		t.Fatalf("want HTTP %d / %d, got HTTP %d %s", status, code, r.status, r.body)
	}
}

func create(t *testing.T, base, tool string, args map[string]any) string {
	t.Helper()
	res := mustOK(t, call(t, base, "tools/call", map[string]any{"name": tool, "arguments": args}, nil))
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || res["status"] != stWorking || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) ||
		res["ttlMs"] != float64(60000) || res["pollIntervalMs"] != float64(50) || res["createdAt"] == nil || res["lastUpdatedAt"] == nil {
		t.Fatalf("bad CreateTaskResult: %v", res)
	}
	return id
}

func get(t *testing.T, base, id string) map[string]any {
	t.Helper()
	return mustOK(t, call(t, base, "tasks/get", map[string]any{"taskId": id}, nil))
}

func waitStatus(t *testing.T, base, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res := get(t, base, id)
		if res["status"] == want {
			if res["resultType"] != "complete" {
				t.Fatalf("tasks/get resultType: %v", res["resultType"])
			}
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: want status %s, still %v", id, want, res)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func structured(t *testing.T, task map[string]any) map[string]any {
	t.Helper()
	res, _ := task["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if sc == nil {
		t.Fatalf("no result.structuredContent in %v", task)
	}
	return sc
}

func TestDiscoverAndTools(t *testing.T) {
	_, base := newTestServer(t, false)
	got := mustOK(t, call(t, base, "server/discover", nil, nil))
	var want map[string]any
	json.Unmarshal([]byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{"steer":true,"pause":true}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcptasks","version":"0.1.0"}}}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("discover = %v", got)
	}
	tools, _ := mustOK(t, call(t, base, "tools/list", nil, nil))["tools"].([]any)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "greet,slow_compute,ask" {
		t.Fatalf("tools = %v", names)
	}
	res := mustOK(t, call(t, base, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada"}}, nil))
	if c := res["content"].([]any)[0].(map[string]any); c["text"] != "hello, Ada" || res["resultType"] != "complete" {
		t.Fatalf("greet = %v", res)
	}
}

func TestSlowComputeLifecycle(t *testing.T) {
	_, base := newTestServer(t, false)
	id := create(t, base, "slow_compute", map[string]any{"steps": 3, "step_ms": 10})
	done := waitStatus(t, base, id, stCompleted)
	res := done["result"].(map[string]any)
	if res["content"].([]any)[0].(map[string]any)["text"] != "computed 3 steps" {
		t.Fatalf("result = %v", res)
	}
	if sc := structured(t, done); sc["steps"] != float64(3) || len(sc["steered"].([]any)) != 0 {
		t.Fatalf("structuredContent = %v", sc)
	}
	// failing variant reaches failed with a JSON-RPC error.
	id = create(t, base, "slow_compute", map[string]any{"steps": 1, "step_ms": 0, "fail": true})
	if f := waitStatus(t, base, id, stFailed); f["error"].(map[string]any)["code"] != float64(codeInternal) {
		t.Fatalf("failed task = %v", f)
	}
	// cancel is sticky and refused on a terminal task.
	id = create(t, base, "slow_compute", map[string]any{"steps": 100, "step_ms": 20})
	mustOK(t, call(t, base, "tasks/cancel", map[string]any{"taskId": id}, nil))
	waitStatus(t, base, id, stCancelled)
	mustErr(t, call(t, base, "tasks/cancel", map[string]any{"taskId": id}, nil), 200, codeInvalidParams)
}

func TestSteerDeliveredInOrder(t *testing.T) {
	_, base := newTestServer(t, false)
	id := create(t, base, "slow_compute", map[string]any{"steps": 10, "step_ms": 20})
	msgs := []string{"focus on A", "then B", "finally C"}
	for _, m := range msgs {
		if res := mustOK(t, call(t, base, "tasks/steer", map[string]any{"taskId": id, "message": m}, nil)); !reflect.DeepEqual(res, ack()) {
			t.Fatalf("steer ack = %v", res)
		}
	}
	sc := structured(t, waitStatus(t, base, id, stCompleted))
	if got, _ := json.Marshal(sc["steered"]); string(got) != `["focus on A","then B","finally C"]` {
		t.Fatalf("steered = %s", got)
	}
}

func TestPauseAtSafePointThenResume(t *testing.T) {
	_, base := newTestServer(t, false)
	id := create(t, base, "slow_compute", map[string]any{"steps": 8, "step_ms": 20})
	res := mustOK(t, call(t, base, "tasks/pause", map[string]any{"taskId": id}, nil))
	if res["status"] != stWorking || res["resultType"] != "complete" || !strings.Contains(res["statusMessage"].(string), "safe point") {
		t.Fatalf("pause answer = %v", res)
	}
	paused := waitStatus(t, base, id, stPaused)
	time.Sleep(100 * time.Millisecond) // a paused task does not progress
	if again := get(t, base, id); again["status"] != stPaused || again["lastUpdatedAt"] != paused["lastUpdatedAt"] {
		t.Fatalf("paused task moved: %v", again)
	}
	mustErr(t, call(t, base, "tasks/pause", map[string]any{"taskId": id}, nil), 200, codeInvalidParams)
	mustOK(t, call(t, base, "tasks/steer", map[string]any{"taskId": id, "message": "while paused"}, nil))
	if res := mustOK(t, call(t, base, "tasks/resume", map[string]any{"taskId": id}, nil)); res["status"] != stWorking {
		t.Fatalf("resume answer = %v", res)
	}
	sc := structured(t, waitStatus(t, base, id, stCompleted))
	if got, _ := json.Marshal(sc["steered"]); string(got) != `["while paused"]` {
		t.Fatalf("steered = %s", got)
	}
}

func TestAskPauseKeepsInputRequests(t *testing.T) {
	_, base := newTestServer(t, false)
	id := create(t, base, "ask", nil)
	ir := waitStatus(t, base, id, stInput)["inputRequests"].(map[string]any)
	if c, _ := ir["confirm"].(map[string]any); c == nil || c["method"] != "elicitation/create" || len(ir) != 1 {
		t.Fatalf("inputRequests = %v", ir)
	}
	p := mustOK(t, call(t, base, "tasks/pause", map[string]any{"taskId": id}, nil))
	if p["status"] != stPaused || !reflect.DeepEqual(p["inputRequests"], ir) {
		t.Fatalf("pause answer = %v", p)
	}
	if g := get(t, base, id); !reflect.DeepEqual(g["inputRequests"], ir) {
		t.Fatalf("inputRequests lost while paused: %v", g)
	}
	answer := map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}
	mustErr(t, call(t, base, "tasks/update", answer, nil), 200, codeInvalidParams)
	mustOK(t, call(t, base, "tasks/steer", map[string]any{"taskId": id, "message": "be brief"}, nil))
	r := mustOK(t, call(t, base, "tasks/resume", map[string]any{"taskId": id}, nil))
	if r["status"] != stInput || !reflect.DeepEqual(r["inputRequests"], ir) {
		t.Fatalf("resume answer = %v", r)
	}
	if res := mustOK(t, call(t, base, "tasks/update", answer, nil)); !reflect.DeepEqual(res, ack()) {
		t.Fatalf("update ack = %v", res)
	}
	sc := structured(t, waitStatus(t, base, id, stCompleted))
	if sc["confirm"].(map[string]any)["action"] != "accept" || sc["steered"].([]any)[0] != "be brief" {
		t.Fatalf("structuredContent = %v", sc)
	}
}

func TestTransportErrors(t *testing.T) {
	_, base := newTestServer(t, false)
	id := create(t, base, "slow_compute", map[string]any{"steps": 1, "step_ms": 0})
	greet := map[string]any{"name": "greet"}
	b64 := "=?base64?" + base64.StdEncoding.EncodeToString([]byte(id)) + "?="
	cases := []struct {
		name         string
		method       string
		params       map[string]any
		hdr          map[string]string
		status, code int
	}{
		{"version header differs from _meta", "tools/call", greet, map[string]string{"MCP-Protocol-Version": "2025-11-25"}, 400, codeHeaderMismatch},
		{"version header missing", "tools/call", greet, map[string]string{"MCP-Protocol-Version": ""}, 400, codeBadVersion},
		{"version unsupported", "tools/list", map[string]any{"_meta": map[string]any{}}, map[string]string{"MCP-Protocol-Version": "2025-11-25"}, 400, codeBadVersion},
		{"Mcp-Method mismatch", "tools/list", nil, map[string]string{"Mcp-Method": "tools/call"}, 400, codeHeaderMismatch},
		{"Mcp-Name mismatch tools/call", "tools/call", greet, map[string]string{"Mcp-Name": "other"}, 400, codeHeaderMismatch},
		{"Mcp-Name missing tasks/get", "tasks/get", map[string]any{"taskId": id}, map[string]string{"Mcp-Name": ""}, 400, codeHeaderMismatch},
		{"Mcp-Name mismatch tasks/steer", "tasks/steer", map[string]any{"taskId": id, "message": "x"}, map[string]string{"Mcp-Name": "abc"}, 400, codeHeaderMismatch},
		{"Mcp-Name base64 accepted", "tasks/get", map[string]any{"taskId": id}, map[string]string{"Mcp-Name": b64}, 200, 0},
		{"unknown method", "nope/nope", nil, nil, 404, codeNoMethod},
		{"tasks/result removed", "tasks/result", map[string]any{"taskId": id}, nil, 404, codeNoMethod},
		{"tasks/list removed", "tasks/list", nil, nil, 404, codeNoMethod},
		{"task tool without extension capability", "tools/call", map[string]any{"name": "slow_compute", "_meta": metaFor(false)}, nil, 400, codeMissingCap},
		{"tasks/get without extension capability", "tasks/get", map[string]any{"taskId": id, "_meta": metaFor(false)}, nil, 400, codeMissingCap},
		{"unknown task", "tasks/get", map[string]any{"taskId": "0123456789abcdef0123456789abcdef"}, nil, 200, codeInvalidParams},
		{"unknown tool", "tools/call", map[string]any{"name": "nope"}, nil, 200, codeInvalidParams},
		{"bad steps", "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"steps": 1.5}}, nil, 200, codeInvalidParams},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, base, c.method, c.params, c.hdr)
			if c.code == 0 {
				mustOK(t, r)
				return
			}
			mustErr(t, r, c.status, c.code)
			if c.code == codeMissingCap {
				if _, ok := r.Error.Data["requiredCapabilities"].(map[string]any)["extensions"].(map[string]any)[extTasks]; !ok {
					t.Fatalf("data = %v", r.Error.Data)
				}
			}
			if c.name == "unknown task" && r.Error.Message != "Task not found" {
				t.Fatalf("message = %q", r.Error.Message)
			}
		})
	}

	hdr := map[string]string{"MCP-Protocol-Version": protocolVersion}
	raw := []struct {
		name, body string
		hdr        map[string]string
		status     int
		code       int
	}{
		{"broken JSON", `{"jsonrpc":"2.0",`, hdr, 400, codeParse},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, hdr, 400, codeInvalidRequest},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, hdr, 202, 0},
		{"too large", `{"x":"` + strings.Repeat("a", maxBodyBytes) + `"}`, hdr, 413, codeInvalidRequest},
	}
	for _, c := range raw {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, base+"/mcp", []byte(c.body), c.hdr)
			if r.status != c.status || (c.code != 0 && (r.Error == nil || r.Error.Code != c.code)) {
				t.Fatalf("got HTTP %d %.200s", r.status, r.body)
			}
			if c.status == 202 && len(r.body) != 0 {
				t.Fatalf("202 with body %q", r.body)
			}
		})
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, base+"/mcp", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s: HTTP %d", m, resp.StatusCode)
		}
	}
}

// TestInteractionRules checks each SEP-2669 status rule: refused with -32602
// in strict mode, acked/applied in -lax mode.
func TestInteractionRules(t *testing.T) {
	completed := func(t *testing.T, base string) string {
		id := create(t, base, "slow_compute", map[string]any{"steps": 1, "step_ms": 0})
		waitStatus(t, base, id, stCompleted)
		return id
	}
	pausedAsk := func(t *testing.T, base string) string {
		id := create(t, base, "ask", nil)
		waitStatus(t, base, id, stInput)
		mustOK(t, call(t, base, "tasks/pause", map[string]any{"taskId": id}, nil))
		return id
	}
	working := func(t *testing.T, base string) string {
		return create(t, base, "slow_compute", map[string]any{"steps": 200, "step_ms": 20})
	}
	update := map[string]any{"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept"}}}
	cases := []struct {
		name   string
		setup  func(*testing.T, string) string
		method string
		extra  map[string]any
		lax    func(t *testing.T, base, id string, res map[string]any) // checks the -lax outcome
	}{
		{"steer on terminal task", completed, "tasks/steer", map[string]any{"message": "late"}, func(t *testing.T, _, _ string, res map[string]any) {
			if !reflect.DeepEqual(res, ack()) {
				t.Fatalf("ack = %v", res)
			}
		}},
		{"pause on terminal task", completed, "tasks/pause", nil, func(t *testing.T, _, _ string, res map[string]any) {
			if res["status"] != stPaused {
				t.Fatalf("lax pause = %v", res)
			}
		}},
		{"pause on paused task", pausedAsk, "tasks/pause", nil, func(t *testing.T, _, _ string, res map[string]any) {
			if res["status"] != stPaused {
				t.Fatalf("lax pause = %v", res)
			}
		}},
		{"resume when not paused", working, "tasks/resume", nil, func(t *testing.T, _, _ string, res map[string]any) {
			if res["status"] != stWorking {
				t.Fatalf("lax resume = %v", res)
			}
		}},
		{"update while paused", pausedAsk, "tasks/update", update, func(t *testing.T, base, id string, _ map[string]any) {
			waitStatus(t, base, id, stCompleted) // applied despite the pause
		}},
	}
	for _, c := range cases {
		for _, lax := range []bool{false, true} {
			name := c.name + "/strict"
			if lax {
				name = c.name + "/lax"
			}
			t.Run(name, func(t *testing.T) {
				_, base := newTestServer(t, lax)
				id := c.setup(t, base)
				params := map[string]any{"taskId": id}
				for k, v := range c.extra {
					params[k] = v
				}
				r := call(t, base, c.method, params, nil)
				if !lax {
					mustErr(t, r, 200, codeInvalidParams)
					return
				}
				c.lax(t, base, id, mustOK(t, r))
			})
		}
	}
	for _, lax := range []bool{false, true} { // unknown ids are refused in both modes
		_, base := newTestServer(t, lax)
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/steer", "tasks/pause", "tasks/resume"} {
			params := map[string]any{"taskId": "ffffffffffffffffffffffffffffffff", "message": "x", "inputResponses": map[string]any{}}
			mustErr(t, call(t, base, m, params, nil), 200, codeInvalidParams)
		}
	}
}

func TestSSEOrJSON(t *testing.T) {
	_, base := newTestServer(t, false)
	both := map[string]string{"Accept": "application/json, text/event-stream"}
	cases := []struct {
		name   string
		method string
		params map[string]any
		hdr    map[string]string
		sse    bool
	}{
		{"tools/call sync, SSE accepted", "tools/call", map[string]any{"name": "greet"}, both, true},
		{"tools/call task, SSE accepted", "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"steps": 1, "step_ms": 0}}, both, true},
		{"tools/call, JSON only", "tools/call", map[string]any{"name": "greet"}, nil, false},
		{"tools/list, SSE accepted", "tools/list", nil, both, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, base, c.method, c.params, c.hdr)
			mustOK(t, r)
			ct := r.header.Get("Content-Type")
			if c.sse {
				if ct != "text/event-stream" || r.header.Get("X-Accel-Buffering") != "no" || !bytes.HasPrefix(r.body, []byte("event: message\ndata: {")) || !bytes.HasSuffix(r.body, []byte("}\n\n")) {
					t.Fatalf("SSE: %s %q", ct, r.body)
				}
			} else if ct != "application/json" {
				t.Fatalf("JSON: %s %q", ct, r.body)
			}
		})
	}
}

func TestDebugRequestsAndTaskLimit(t *testing.T) {
	s, base := newTestServer(t, false)
	call(t, base, "tools/call", map[string]any{"name": "greet"}, map[string]string{"Authorization": "Bearer abc"})
	call(t, base, "tasks/get", map[string]any{"taskId": "t1"}, map[string]string{"Mcp-Name": "t2"})
	resp, err := http.Get(base + "/debug/requests")
	if err != nil {
		t.Fatal(err)
	}
	var log []logEntry
	json.NewDecoder(resp.Body).Decode(&log)
	resp.Body.Close()
	want := []logEntry{{"tools/call", "", "Bearer abc", "greet"}, {"tasks/get", "t1", "", "t2"}}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("log = %+v", log)
	}
	resp, err = http.Post(base+"/debug/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, _ = http.Get(base + "/debug/requests")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "[]" {
		t.Fatalf("after reset: %s", b)
	}

	s.mu.Lock()
	s.maxTasks = 1
	s.mu.Unlock()
	create(t, base, "ask", nil)
	mustErr(t, call(t, base, "tools/call", map[string]any{"name": "ask"}, nil), 200, codeInternal)
}
