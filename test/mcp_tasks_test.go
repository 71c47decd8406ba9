package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mcpClient speaks 2026-07-28 Streamable HTTP with the tasks extension, as
// one principal, raw: every header is the test's to set.
type mcpClient struct {
	t     testing.TB
	base  string
	token string
}

// reply is one JSON-RPC answer and its HTTP status.
type reply struct {
	HTTP   int
	Result map[string]any
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

func (r reply) code() int {
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

var extMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
	"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
}

// call sends method with params; the routing headers follow the body unless
// hdr overrides them ("" deletes one).
func (c mcpClient) call(method string, params map[string]any, hdr map[string]string) reply {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = extMeta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	return c.post(body, method, params, hdr)
}

func (c mcpClient) post(body []byte, method string, params map[string]any, hdr map[string]string) reply {
	c.t.Helper()
	r, err := c.postWith(http.DefaultClient, body, method, params, hdr)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return r
}

// postWith is post by client, its error returned.
func (c mcpClient) postWith(client *http.Client, body []byte, method string, params map[string]any, hdr map[string]string) (reply, error) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	} else if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	r := reply{HTTP: resp.StatusCode}
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.Contains(d, `"id"`) {
				data = []byte(strings.TrimSpace(d))
			}
		}
	} else {
		data, _ = readAll(resp)
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &r); err != nil {
			c.t.Fatalf("%s: answer %q: %v", method, data, err)
		}
	}
	return r, nil
}

func readAll(resp *http.Response) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}

// create starts slow_compute and returns the task ID the caller received.
func (c mcpClient) create(steps, stepMS int) string {
	c.t.Helper()
	r := c.call("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"steps": steps, "step_ms": stepMS}}, nil)
	id, _ := r.Result["taskId"].(string)
	if r.Error != nil || r.Result["resultType"] != "task" || id == "" {
		c.t.Fatalf("create: %+v %+v", r.Result, r.Error)
	}
	return id
}

// waitStatus polls tasks/get until the task has status (bounded).
func (c mcpClient) waitStatus(id, status string) map[string]any {
	c.t.Helper()
	var last map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		r := c.call("tasks/get", map[string]any{"taskId": id}, nil)
		last = r.Result
		if r.Result["status"] == status {
			return r.Result
		}
	}
	c.t.Fatalf("task %s never became %s; last %v", id, status, last)
	return nil
}

// upstreamRequests returns what the fixture received, as "method by token".
func upstreamRequests(t testing.TB, upstream string) []string {
	t.Helper()
	var reqs []struct {
		Method        string `json:"method"`
		Authorization string `json:"authorization"`
	}
	getJSON(t, upstream+"/debug/requests", &reqs)
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.Method + " by " + strings.TrimPrefix(r.Authorization, "Bearer ")
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// TestMCPSEP2669 drives every SEP-2669 rule through Warden against the
// fixture server in -lax mode (it acks what the rules forbid, as an uneven
// runtime would), so each refusal is Warden's, and the refused requests are
// shown never to reach the server.
func TestMCPSEP2669(t *testing.T) {
	upstream := startFixtureMCP(t, "-lax")

	// The server alone: anyone holding the ID steers it, and the rules are not kept.
	raw := mcpClient{t, upstream, "alice"}.create(40, 50)
	directBob := mcpClient{t, upstream, "bob"}
	if r := directBob.call("tasks/steer", map[string]any{"taskId": raw, "message": "hijack"}, nil); r.Error != nil {
		t.Fatalf("direct: bob's steer of alice's task was refused (%+v); the test proves nothing", r.Error)
	}
	if r := directBob.call("tasks/resume", map[string]any{"taskId": raw}, nil); r.Error != nil {
		t.Fatalf("direct: resume of a working task was refused (%+v); the test proves nothing", r.Error)
	}
	directBob.call("tasks/cancel", map[string]any{"taskId": raw}, nil)
	if resp, err := http.Post(upstream+"/debug/reset", "", nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}

	warden, _ := startMCPWarden(t, upstream)
	alice := mcpClient{t, warden, "alice"}
	bob := mcpClient{t, warden, "bob"}

	h := alice.create(40, 50)
	if !strings.HasPrefix(h, "wt2.") {
		t.Fatalf("task ID %q is not a handle", h)
	}

	// Bob, on alice's task: every method answers as for an unknown task.
	unknown := bob.call("tasks/get", map[string]any{"taskId": "0123456789abcdef0123456789abcdef"}, nil)
	if unknown.code() != -32602 {
		t.Fatalf("unknown task: %+v", unknown)
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/steer", "tasks/pause", "tasks/resume"} {
		r := bob.call(m, map[string]any{"taskId": h, "message": "hijack", "inputResponses": map[string]any{}}, nil)
		if r.code() != -32602 || r.Error.Message != unknown.Error.Message || r.HTTP != unknown.HTTP {
			t.Errorf("bob %s on alice's task: %d %+v, want the unknown-task answer %d %+v", m, r.HTTP, r.Error, unknown.HTTP, unknown.Error)
		}
	}

	refuse := func(c mcpClient, m string, params map[string]any, why string) {
		t.Helper()
		r := c.call(m, params, nil)
		if r.code() != -32602 {
			t.Errorf("%s (%s): %+v %+v, want -32602", m, why, r.Result, r.Error)
		}
	}
	allow := func(c mcpClient, m string, params map[string]any) map[string]any {
		t.Helper()
		r := c.call(m, params, nil)
		if r.Error != nil {
			t.Fatalf("%s: %+v", m, r.Error)
		}
		return r.Result
	}
	task := map[string]any{"taskId": h}
	refuse(alice, "tasks/resume", task, "resume of a working task")
	allow(alice, "tasks/steer", map[string]any{"taskId": h, "message": "one"})
	allow(alice, "tasks/pause", task)
	alice.waitStatus(h, "paused")
	refuse(alice, "tasks/pause", task, "pause of a paused task")
	refuse(alice, "tasks/update", map[string]any{"taskId": h, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}, "update while paused")
	allow(alice, "tasks/steer", map[string]any{"taskId": h, "message": "two"})
	allow(alice, "tasks/resume", task)
	done := alice.waitStatus(h, "completed")
	res, _ := done["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if got := fmt.Sprint(sc["steered"]); got != "[one two]" {
		t.Errorf("steer messages delivered %s, want [one two] in order", got)
	}
	refuse(alice, "tasks/steer", map[string]any{"taskId": h, "message": "late"}, "steer of a completed task")
	refuse(alice, "tasks/pause", task, "pause of a completed task")
	refuse(alice, "tasks/resume", task, "resume of a completed task")
	refuse(alice, "tasks/steer", map[string]any{"taskId": h, "message": strings.Repeat("x", 20<<10)}, "steer message over 16 KiB")

	// Headers: Mcp-Name must carry the task ID.
	if r := alice.call("tasks/get", task, map[string]string{"Mcp-Name": "something-else"}); r.HTTP != 400 || r.code() != -32020 {
		t.Errorf("Mcp-Name mismatch: HTTP %d %+v, want 400 -32020", r.HTTP, r.Error)
	}
	if r := alice.call("tasks/get", task, map[string]string{"Mcp-Name": ""}); r.HTTP != 400 || r.code() != -32020 {
		t.Errorf("Mcp-Name missing: HTTP %d %+v, want 400 -32020", r.HTTP, r.Error)
	}

	// None of the refused requests reached the server.
	seen := upstreamRequests(t, upstream)
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/steer", "tasks/pause", "tasks/resume"} {
		if n := count(seen, m+" by bob"); n != 0 {
			t.Errorf("the server received %d %s from bob", n, m)
		}
	}
	for m, want := range map[string]int{"tasks/resume": 1, "tasks/pause": 1, "tasks/steer": 2, "tasks/update": 0} {
		if n := count(seen, m+" by alice"); n != want {
			t.Errorf("the server received %d %s from alice, want %d (the allowed ones)", n, m, want)
		}
	}
}

// TestMCPSteerQueue bounds the steer messages queued for one task.
func TestMCPSteerQueue(t *testing.T) {
	upstream := startFixtureMCP(t)
	cfg := filepath.Join(t.TempDir(), "warden.yaml")
	if err := os.WriteFile(cfg, []byte("mcp:\n  max_steer_queue: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	warden, _ := startMCPWarden(t, upstream, "--config", cfg)
	alice := mcpClient{t, warden, "alice"}
	h := alice.create(2, 4000) // no safe point for 4 s
	for i, want := range []int{0, 0, -32602} {
		r := alice.call("tasks/steer", map[string]any{"taskId": h, "message": fmt.Sprint("m", i)}, nil)
		if r.code() != want {
			t.Errorf("steer %d: %+v, want code %d", i, r.Error, want)
		}
	}
	alice.call("tasks/cancel", map[string]any{"taskId": h}, nil)
}

// TestMCPStaleStatus: a task that completed on its own, with nobody asking
// tasks/get, is still working as far as Warden last saw; the SEP-2669 rules
// are decided on the status Warden reads before deciding. The fixture runs
// -lax (it would "pause" and take a steer for a completed task), so each
// refusal is Warden's; the old code forwarded both. The test learns that
// the task completed from the fixture's own tasks/list (-list), asked
// directly: Warden sees none of it.
func TestMCPStaleStatus(t *testing.T) {
	upstream := startFixtureMCP(t, "-lax", "-list")
	warden, _ := startMCPWarden(t, upstream)
	alice := mcpClient{t, warden, "alice"}
	h := alice.create(2, 20) // completes in about 40 ms, unobserved
	waitUpstreamStatus(t, upstream, "completed")
	for _, m := range []string{"tasks/pause", "tasks/steer"} {
		r := alice.call(m, map[string]any{"taskId": h, "message": "late"}, nil)
		if r.code() != -32602 || !strings.Contains(r.Error.Message, "completed") {
			t.Errorf("%s of a task completed since Warden saw it working: %+v %+v, want -32602 naming completed", m, r.Result, r.Error)
		}
	}
	seen := upstreamRequests(t, upstream)
	for _, m := range []string{"tasks/pause", "tasks/steer"} {
		if n := count(seen, m+" by alice"); n != 0 {
			t.Errorf("the server received %d %s", n, m)
		}
	}
}

// waitUpstreamStatus polls the fixture's tasks/list, directly and with no
// credential (upstream is started with -list; Warden sees none of it),
// until its only task has status (bounded).
func waitUpstreamStatus(t testing.TB, upstream, status string) {
	t.Helper()
	direct := mcpClient{t, upstream, ""}
	var last reply
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r := direct.call("tasks/list", nil, nil)
		tasks, _ := r.Result["tasks"].([]any)
		last = r
		if len(tasks) == 1 {
			if task, _ := tasks[0].(map[string]any); task["status"] == status {
				return
			}
		}
	}
	t.Fatalf("the fixture's task never became %s; last tasks/list %+v %+v", status, last.Result, last.Error)
}

// TestMCPSteerSafePoints: a long working task takes steers at its steps
// without changing status; the bound counts the steers since the last
// step the server reports (lastUpdatedAt), so 40 steers spread over the
// steps pass the default bound of 32 (the old code refused the 33rd: it
// counted from the last status change).
func TestMCPSteerSafePoints(t *testing.T) {
	upstream := startFixtureMCP(t)
	warden, _ := startMCPWarden(t, upstream)
	alice := mcpClient{t, warden, "alice"}
	h := alice.create(1000, 10) // a step every 10 ms, for 10 s
	for i := range 40 {
		if r := alice.call("tasks/steer", map[string]any{"taskId": h, "message": fmt.Sprint("m", i)}, nil); r.Error != nil {
			t.Fatalf("steer %d: %+v, want accepted (the server took the earlier ones at its steps)", i, r.Error)
		}
		time.Sleep(15 * time.Millisecond)
	}
	alice.call("tasks/cancel", map[string]any{"taskId": h}, nil)
	if n := count(upstreamRequests(t, upstream), "tasks/steer by alice"); n != 40 {
		t.Errorf("the server received %d steers, want 40", n)
	}
}

// TestMCPHandlesAcrossRestartAndReplicas: handles are checked with the
// shared key only, so a restarted Warden and a second replica honour them;
// task status unknown to a new replica is read from the server.
func TestMCPHandlesAcrossRestartAndReplicas(t *testing.T) {
	upstream := startFixtureMCP(t)
	key := filepath.Join(t.TempDir(), "handle.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-test-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	w1, p1 := startMCPWarden(t, upstream, "--mcp-handle-key-file", key)
	h := mcpClient{t, w1, "alice"}.create(200, 50)
	mcpClient{t, w1, "alice"}.call("tasks/pause", map[string]any{"taskId": h}, nil)
	mcpClient{t, w1, "alice"}.waitStatus(h, "paused")
	p1.stop()

	w2, _ := startMCPWarden(t, upstream, "--mcp-handle-key-file", key)
	w3, _ := startMCPWarden(t, upstream, "--mcp-handle-key-file", key)
	other, _ := startMCPWarden(t, upstream) // a random key
	alice2, alice3 := mcpClient{t, w2, "alice"}, mcpClient{t, w3, "alice"}

	// The restarted Warden does not know the task is paused: it asks.
	if r := alice2.call("tasks/pause", map[string]any{"taskId": h}, nil); r.code() != -32602 {
		t.Errorf("pause of a paused task after a restart: %+v, want -32602", r.Error)
	}
	if r := alice3.call("tasks/get", map[string]any{"taskId": h}, nil); r.Error != nil || r.Result["status"] != "paused" {
		t.Errorf("alice's get through a second replica: %+v %+v", r.Result, r.Error)
	}
	if r := (mcpClient{t, w3, "bob"}).call("tasks/get", map[string]any{"taskId": h}, nil); r.code() != -32602 {
		t.Errorf("bob's get through a second replica: %+v", r.Error)
	}
	if r := (mcpClient{t, other, "alice"}).call("tasks/get", map[string]any{"taskId": h}, nil); r.code() != -32602 {
		t.Errorf("alice's handle on a Warden with another key: %+v, want -32602", r.Error)
	}
	if r := alice2.call("tasks/resume", map[string]any{"taskId": h}, nil); r.Error != nil {
		t.Errorf("resume after the restart: %+v", r.Error)
	}
	seen := upstreamRequests(t, upstream)
	if count(seen, "tasks/pause by alice") != 1 {
		t.Errorf("the refused pause reached the server: %v", seen)
	}
	alice2.call("tasks/cancel", map[string]any{"taskId": h}, nil)
}

// TestMCPBadInput: every kind of bad request gets a clear, protocol-native
// answer from Warden, and Warden keeps serving.
func TestMCPBadInput(t *testing.T) {
	upstream := startFixtureMCP(t)
	cfg := filepath.Join(t.TempDir(), "warden.yaml")
	conf := "mcp:\n  max_body_bytes: 65536\n  authorization_servers: [\"https://auth.example\"]\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	warden, _ := startMCPWarden(t, upstream, "--config", cfg)
	post := func(body string, hdr map[string]string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, warden+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Authorization", "Bearer alice")
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
		b, _ := readAll(resp)
		return resp.StatusCode, resp.Header, string(b)
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, tc := range []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		want   string
	}{
		{"no credentials", ping, map[string]string{"Authorization": ""}, 401, `"code":-32001`},
		{"empty bearer", ping, map[string]string{"Authorization": "Bearer "}, 401, "Unauthorized"},
		{"foreign origin", ping, map[string]string{"Origin": "http://evil.example"}, 403, "Origin"},
		{"broken JSON", `{"jsonrpc":"2.0","id":1,"method":`, nil, 400, `"code":-32700`},
		{"batch", "[" + ping + "]", nil, 400, `"code":-32600`},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, nil, 400, `"code":-32600`},
		{"huge body", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 70000) + `"}}`, nil, 413, "exceeds"},
		{"task method without taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}`, map[string]string{"Mcp-Method": "tasks/get"}, 200, `"code":-32602`},
		{"method header mismatch", ping, map[string]string{"Mcp-Method": "tools/call"}, 400, `"code":-32020`},
		{"valid ping still served", ping, nil, 200, `"result"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := post(tc.body, tc.hdr)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("HTTP %d %s, want %d containing %s", status, body, tc.status, tc.want)
			}
			if status == 401 {
				if v := hdr.Get("WWW-Authenticate"); !strings.Contains(v, `Bearer resource_metadata="http://`) || !strings.Contains(v, "/.well-known/oauth-protected-resource/mcp") {
					t.Errorf("WWW-Authenticate %q", v)
				}
			}
		})
	}
	var md map[string]any
	getJSON(t, warden+"/.well-known/oauth-protected-resource/mcp", &md)
	if fmt.Sprint(md["authorization_servers"]) != "[https://auth.example]" || !strings.HasSuffix(fmt.Sprint(md["resource"]), "/mcp") {
		t.Errorf("protected-resource metadata: %v", md)
	}
	if n := count(upstreamRequests(t, upstream), "tasks/get by alice"); n != 0 {
		t.Errorf("a refused request reached the server")
	}
}

// TestMCPTasksListPages: the fixture pages tasks/list by two and lists every
// task to everyone; bob's tasks come before and after alice's. Alice pages
// through Warden: no page is empty while it has a cursor (the old code
// forwarded the server's pages emptied of bob's tasks, each with a cursor:
// a count of bob's tasks), and she gets exactly hers.
func TestMCPTasksListPages(t *testing.T) {
	upstream := startFixtureMCP(t, "-list", "-list-page", "2")
	warden, _ := startMCPWarden(t, upstream)
	alice, bob := mcpClient{t, warden, "alice"}, mcpClient{t, warden, "bob"}
	var want []string
	for _, who := range []mcpClient{bob, bob, bob, bob, bob, alice, bob, bob, bob, alice} {
		if id := who.create(1, 10000); who.token == "alice" {
			want = append(want, id)
		}
	}
	var got []string
	cursor := ""
	for page := 1; ; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		r := alice.call("tasks/list", params, nil)
		if r.Error != nil {
			t.Fatalf("page %d: %+v", page, r.Error)
		}
		list, _ := r.Result["tasks"].([]any)
		for _, v := range list {
			m, _ := v.(map[string]any)
			got = append(got, fmt.Sprint(m["taskId"]))
		}
		cursor, _ = r.Result["nextCursor"].(string)
		if cursor == "" {
			break
		}
		if len(list) == 0 {
			t.Fatalf("page %d: empty, with a cursor", page)
		}
		if page > 10 {
			t.Fatal("more than 10 pages")
		}
	}
	if !slices.Equal(sorted(got...), sorted(want...)) {
		t.Errorf("alice's tasks over the pages: %v, want %v", got, want)
	}
}
