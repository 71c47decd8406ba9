package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/cputime"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/pushrelay"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
)

func resultOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	return r
}

func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestOwnerFlows: the owner's task, context and push configs work through
// Warden with handles in place of the upstream's ids, and push credentials
// never come back.
func TestOwnerFlows(t *testing.T) {
	h := newHarness(t, Config{})
	task := h.send(t, "alice", "input name")
	id, ctx := task["id"].(string), task["contextId"].(string)
	if !strings.HasPrefix(id, handle.Prefix) || !strings.HasPrefix(ctx, handle.Prefix) {
		t.Fatalf("ids are not handles: %v", task)
	}
	if _, m := h.call(t, "alice", "GetTask", map[string]any{"id": id}); resultOf(t, m)["id"] != id {
		t.Fatalf("GetTask = %v", m)
	}
	_, m := h.call(t, "alice", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m2", "taskId": id, "contextId": ctx, "role": "ROLE_USER", "parts": []any{map[string]any{"text": "bob"}}}})
	if got := resultOf(t, m)["task"].(map[string]any)["id"]; got != id {
		t.Fatalf("continuing the task answered %v", m)
	}
	_, m = h.call(t, "alice", "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": "https://hooks.example.com/a2a", "token": "tok-secret"})
	for _, mm := range []map[string]any{m} {
		b, _ := json.Marshal(mm)
		if strings.Contains(string(b), "tok-secret") || strings.Contains(string(b), "secret-credential") {
			t.Fatalf("push config create leaks credentials: %s", b)
		}
	}
	for _, method := range []string{"GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs"} {
		_, m := h.call(t, "alice", method, map[string]any{"taskId": id, "id": "push-1"})
		b, _ := json.Marshal(m)
		if m["error"] != nil || strings.Contains(string(b), "tok-secret") || strings.Contains(string(b), "secret-credential") || !strings.Contains(string(b), "hooks.example.com") {
			t.Fatalf("%s = %s", method, b)
		}
		if strings.Contains(string(b), `"task-`) {
			t.Fatalf("%s shows an upstream id: %s", method, b)
		}
	}
	// A handle of another kind never opens as a task: her own context's.
	if _, m := h.call(t, "alice", "GetTask", map[string]any{"id": ctx}); errorCode(m) != -32001 {
		t.Fatalf("a context handle opened as a task: %v", m)
	}
	for _, b := range h.up.received() {
		if strings.Contains(b, handle.Prefix) {
			t.Fatalf("the upstream received a handle: %s", b)
		}
	}
}

// TestListFiltered: ListTasks shows the caller's tasks only, with handles,
// a total that does not count others' tasks and a sealed page token.
func TestListFiltered(t *testing.T) {
	h := newHarness(t, Config{})
	a := h.send(t, "alice", "hello")
	h.send(t, "bob", "hello")
	h.send(t, "bob", "hello again")
	h.send(t, "alice", "later")
	_, m := h.call(t, "alice", "ListTasks", map[string]any{"pageSize": 1})
	res := resultOf(t, m)
	tasks := res["tasks"].([]any)
	if _, total := res["totalSize"]; len(tasks) != 1 || tasks[0].(map[string]any)["id"] != a["id"] || total {
		t.Fatalf("alice's list = %v", res)
	}
	tok, _ := res["nextPageToken"].(string)
	if !strings.HasPrefix(tok, handle.Prefix) {
		t.Fatalf("page token %q is not sealed", tok)
	}
	if _, m := h.call(t, "alice", "ListTasks", map[string]any{"pageToken": tok}); m["error"] != nil {
		t.Fatalf("her own page token refused: %v", m)
	}
	if _, m := h.call(t, "bob", "ListTasks", map[string]any{"pageToken": tok}); errorCode(m) != -32602 {
		t.Fatalf("alice's page token for bob: %v", m)
	}
	if _, m := h.call(t, "alice", "ListTasks", map[string]any{"contextId": a["contextId"]}); m["error"] != nil {
		t.Fatalf("filter by her own context refused: %v", m)
	}
}

// TestForeignIDsLookMadeUp: every request naming another principal's task
// or context, a raw upstream id or a made-up id gets the same bytes, and the
// upstream never sees it.
func TestForeignIDsLookMadeUp(t *testing.T) {
	h := newHarness(t, Config{})
	v := h.send(t, "alice", "input secret")
	id, ctx := v["id"].(string), v["contextId"].(string)
	before := len(h.up.received())
	msg := func(fields map[string]any) map[string]any {
		m := map[string]any{"messageId": "x", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}
		for k, v := range fields {
			m[k] = v
		}
		return map[string]any{"message": m}
	}
	for _, ref := range []string{id, "task-1", "wt2.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "made-up"} {
		tests := []struct {
			method string
			params any
		}{
			{"GetTask", map[string]any{"id": ref}},
			{"CancelTask", map[string]any{"id": ref}},
			{"SubscribeToTask", map[string]any{"id": ref}},
			{"SendMessage", msg(map[string]any{"taskId": ref})},
			{"SendMessage", msg(map[string]any{"contextId": strings.Replace(ref, id, ctx, 1)})},
			{"SendStreamingMessage", msg(map[string]any{"referenceTaskIds": []string{ref}})},
			{"CreateTaskPushNotificationConfig", map[string]any{"taskId": ref, "url": "https://hooks.example.com/"}},
			{"GetTaskPushNotificationConfig", map[string]any{"taskId": ref, "id": "push-1"}},
			{"ListTaskPushNotificationConfigs", map[string]any{"taskId": ref}},
			{"DeleteTaskPushNotificationConfig", map[string]any{"taskId": ref, "id": "push-1"}},
			{"ListTasks", map[string]any{"contextId": strings.Replace(ref, id, ctx, 1)}},
		}
		for _, tc := range tests {
			if c, _ := json.Marshal(tc.params); strings.Contains(string(c), `"contextId"`) && !strings.HasPrefix(ref, handle.Prefix) {
				continue // a context the client chooses: TestChosenContext
			}
			p, _ := json.Marshal(tc.params)
			status, body := h.rpc(t, "bob", `{"jsonrpc":"2.0","id":7,"method":"`+tc.method+`","params":`+string(p)+`}`)
			want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}`
			if status != 200 || body != want {
				t.Errorf("%s naming %.20s: %d %s, want 200 %s", tc.method, ref, status, body, want)
			}
		}
	}
	if n := len(h.up.received()); n != before {
		t.Fatalf("the upstream received %d refused requests", n-before)
	}
}

// TestRefusals: webhooks on internal addresses, messages to terminal tasks,
// unknown methods, malformed requests, missing credentials, other paths.
func TestRefusals(t *testing.T) {
	h := newHarness(t, Config{WebhookAllow: []string{"127.0.0.1:9999"}})
	own := h.send(t, "alice", "input x")
	done := h.send(t, "alice", "hello")
	before := len(h.up.received())
	tests := []struct {
		name, principal, body string
		status                int
		code                  float64
	}{
		{"webhook loopback", "alice", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + own["id"].(string) + `","url":"http://0x7f.1:8080/"}}`, 200, -32602},
		{"webhook metadata in a message", "alice", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]},"configuration":{"taskPushNotificationConfig":{"url":"http://[::ffff:169.254.169.254]/"}}}}`, 200, -32602},
		{"message to a completed task", "alice", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","taskId":"` + done["id"].(string) + `","role":"ROLE_USER","parts":[]}}}`, 200, -32004},
		{"subscribe to a completed task", "alice", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"` + done["id"].(string) + `"}}`, 200, -32004},
		{"tenant routing (ids are not bound to a tenant)", "alice", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"` + own["id"].(string) + `","tenant":"other"}}`, 200, -32602},
		{"unknown method", "alice", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, 200, -32601},
		{"REST-style method", "alice", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, 200, -32601},
		{"case-folded member", "alice", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"x"}}`, 200, -32600},
		{"Protocol Buffers name of taskId (ProtoJSON parsers read it)", "alice", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","task_id":"task-1","role":"ROLE_USER","parts":[]}}}`, 200, -32602},
		{"notification", "alice", `{"jsonrpc":"2.0","method":"CancelTask","params":{"id":"x"}}`, 200, -32600},
		{"batch", "alice", `[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]`, 200, -32600},
		{"not JSON", "alice", `{"jsonrpc":`, 200, -32700},
		{"no credentials", "", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, 401, -32600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.rpc(t, tc.principal, tc.body)
			var m map[string]any
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatalf("%d %q", status, body)
			}
			if status != tc.status || errorCode(m) != tc.code {
				t.Fatalf("%d %s, want %d code %v", status, body, tc.status, tc.code)
			}
		})
	}
	if n := len(h.up.received()) - before; n > 2 {
		// Only the two state reads of the terminal-task checks reach it.
		t.Fatalf("the upstream received %d requests", n)
	}
	// The allowlisted webhook passes.
	if _, m := h.call(t, "alice", "CreateTaskPushNotificationConfig", map[string]any{"taskId": own["id"], "url": "http://127.0.0.1:9999/hook"}); m["error"] != nil {
		t.Fatalf("allowlisted webhook refused: %v", m)
	}
	for _, ce := range [][]string{{"gzip"}, {"br"}, {"identity", "gzip"}} {
		req, _ := http.NewRequest(http.MethodPost, h.front.URL+"/jsonrpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Content-Type", "application/json")
		req.Header["Content-Encoding"] = ce // a second field line too: the server reads both
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), "Content-Encoding") {
			t.Errorf("Content-Encoding %s: %d %s, want 415", ce, resp.StatusCode, b)
		}
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/jsonrpc", 405},
		{http.MethodPost, "/rest/message:send", 404},
		{http.MethodGet, "/rest/tasks/x", 404},
	} {
		req, _ := http.NewRequest(tc.method, h.front.URL+tc.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !json.Valid(b) {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, resp.StatusCode, b, tc.status)
		}
	}
}

// TestDryRun: refusals are logged and the request is forwarded as the
// client wrote it.
func TestDryRun(t *testing.T) {
	h := newHarnessWith(t, Config{}, newEnforcerWith(t, proxy.Config{DryRun: true}))
	h.send(t, "alice", "input x")
	if _, m := h.call(t, "bob", "GetTask", map[string]any{"id": "task-1"}); m["error"] != nil {
		t.Fatalf("dry run refused: %v", m)
	}
	if _, m := h.call(t, "bob", "CreateTaskPushNotificationConfig", map[string]any{"taskId": "task-1", "url": "http://127.0.0.1/"}); m["error"] != nil {
		t.Fatalf("dry run refused: %v", m)
	}
	got := h.up.received()
	if last := got[len(got)-1]; !strings.Contains(last, `"taskId":"task-1"`) || !strings.Contains(last, "127.0.0.1") {
		t.Fatalf("forwarded %s", last)
	}
}

// TestCard: the public card points at Warden's JSON-RPC endpoint (the
// configured public URL, else the listen address, never the Host the client
// sent) and no longer offers the REST binding; interfaces elsewhere stay.
// With neither, the JSON-RPC interface on the server is left out.
func TestCard(t *testing.T) {
	plain := func(listen, public string) Config {
		return Config{HTTPConfig: listener.HTTPConfig{Listen: listen, Plaintext: true}, PublicURL: public}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // the JSON-RPC interface's URL, "" when left out
	}{
		{"public URL", plain("127.0.0.1:8443", "https://agent.example/a2a"), "https://agent.example/a2a"},
		{"listen address", plain("127.0.0.1:8443", ""), "http://127.0.0.1:8443/jsonrpc"},
		{"wildcard listen address", plain(":8443", ""), "http://localhost:8443/jsonrpc"},
		{"IPv6 wildcard", plain("[::]:8443", ""), "http://localhost:8443/jsonrpc"},
		{"neither", Config{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			req, _ := http.NewRequest(http.MethodGet, h.front.URL+"/.well-known/agent-card.json", nil)
			req.Host = "evil.example"
			resp, err := h.front.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if tc.want == "" {
				// No public URL to write: the card is refused, not passed
				// with the server's own addresses.
				if resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("card without a public URL: %d", resp.StatusCode)
				}
				if _, m := h.call(t, "alice", "GetExtendedAgentCard", map[string]any{}); errorCode(m) != -32603 {
					t.Fatalf("extended card without a public URL: %v", m)
				}
				return
			}
			var c struct {
				Interfaces []struct {
					URL     string `json:"url"`
					Binding string `json:"protocolBinding"`
				} `json:"supportedInterfaces"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
				t.Fatal(err)
			}
			var urls []string
			for _, it := range c.Interfaces {
				urls = append(urls, it.URL)
			}
			// The interface elsewhere (a mirror, or the server by another
			// name) is Warden's too: one JSON-RPC interface per version.
			want := []string{tc.want}
			if !slices.Equal(urls, want) {
				t.Fatalf("card interfaces %v, want %v", urls, want)
			}
			_, m := h.call(t, "alice", "GetExtendedAgentCard", map[string]any{})
			b, _ := json.Marshal(m)
			if strings.Contains(string(b), "evil.example") || tc.want != "" && !strings.Contains(string(b), tc.want) {
				t.Fatalf("extended card: %s, want %s", b, tc.want)
			}
		})
	}
}

// TestStream: every event of a stream is checked and rewritten.
func TestStream(t *testing.T) {
	h := newHarness(t, Config{})
	status, body := h.rpc(t, "alice", `{"jsonrpc":"2.0","id":"s1","method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"wait"}]}}}`)
	events := strings.Split(strings.TrimSpace(body), "\n\n")
	if status != 200 || len(events) != 2 {
		t.Fatalf("%d %q", status, body)
	}
	if strings.Contains(body, `"task-`) || strings.Contains(body, `"ctx-`) || strings.Count(body, handle.Prefix) != 4 {
		t.Fatalf("stream not rewritten: %s", body)
	}
}

func FuzzFromUpstream(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"t","contextId":"c","history":[{"taskId":"t","referenceTaskIds":["r"]}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"id":"t"}],"nextPageToken":"p"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: "http://127.0.0.1:1/jsonrpc"}}, newEnforcer(t), testKey, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{"SendMessage", "GetTask", "ListTasks", "GetTaskPushNotificationConfig", "GetExtendedAgentCard"} {
			x := &exchange{s: s, principal: "alice"}
			x.call.ID, x.call.Method = json.RawMessage("7"), method
			out, keep := x.fromUpstream(data)
			if keep && !json.Valid(out) {
				t.Fatalf("%s: kept an answer that is not JSON: %q", method, out)
			}
			if keep && strings.Contains(string(out), `"credentials"`) && method == "GetTaskPushNotificationConfig" {
				var m map[string]any
				_ = json.Unmarshal(out, &m)
				if r, ok := m["result"].(map[string]any); ok {
					if a, ok := r["authentication"].(map[string]any); ok && a["credentials"] != nil {
						t.Fatalf("credentials passed: %s", out)
					}
				}
			}
		}
	})
}

// BenchmarkA2ASidecar times one GetTask and one SendMessage through the sidecar
// in front of the in-process fake, both on real loopback HTTP servers.
func BenchmarkA2ASidecar(b *testing.B) {
	h := newProductionHarness(b, Config{})
	task := h.send(b, "alice", "input x")
	get := `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"` + task["id"].(string) + `"}}`
	send := `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`
	for _, bc := range []struct{ name, body string }{{"GetTask", get}, {"SendMessage", send}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer func(start int64) { cputime.ReportWrites(b, start, b.N) }(cputime.Writes())
			defer func(start time.Duration) {
				cputime.Report(b, start, b.N)
			}(cputime.Used())
			for b.Loop() {
				if status, body := h.rpc(b, "alice", bc.body); status != 200 || strings.Contains(body, `"error"`) {
					b.Fatalf("%d %s", status, body)
				}
			}
		})
	}
}

// BenchmarkA2ANullHop is BenchmarkA2ASidecar's GetTask through the null
// pass-through make bench compares Warden with (bench/cmd/null: an
// httputil.ReverseProxy that flushes every write) in front of the same fake,
// asking for the task by its upstream id: the floor of net/http a hop stands
// on. BenchmarkA2ASidecar's cpu-ns/op less this one's is what Warden's own
// work costs per request.
func BenchmarkA2ANullHop(b *testing.B) {
	h := newProductionHarness(b, Config{})
	h.send(b, "alice", "input x")
	u, err := url.Parse(h.up.base)
	if err != nil {
		b.Fatal(err)
	}
	null := httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	})
	startLabelled(null)
	b.Cleanup(null.Close)
	nh := &harness{up: h.up, front: null}
	get := `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"task-1"}}`
	b.Run("GetTask", func(b *testing.B) {
		b.ReportAllocs()
		defer func(start int64) { cputime.ReportWrites(b, start, b.N) }(cputime.Writes())
		defer func(start time.Duration) {
			cputime.Report(b, start, b.N)
		}(cputime.Used())
		for b.Loop() {
			if status, body := nh.rpc(b, "alice", get); status != 200 || strings.Contains(body, `"error"`) {
				b.Fatalf("%d %s", status, body)
			}
		}
	})
}

// TestUpstreamHost: the upstream is asked under its own name, never the
// client's Host (a virtual-hosted gateway would route another name to
// another agent than the one Warden's handles and state address).
func TestUpstreamHost(t *testing.T) {
	h := newHarness(t, Config{})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, h.front.URL+"/jsonrpc", strings.NewReader(body))
		req.Host = "other-agent.internal"
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", body, resp.StatusCode)
		}
	}
	up, _ := url.Parse(h.up.base)
	h.up.mu.Lock()
	defer h.up.mu.Unlock()
	if len(h.up.hosts) != 2 {
		t.Fatalf("the upstream got %d requests, want 2", len(h.up.hosts))
	}
	for _, got := range h.up.hosts {
		if got != up.Host {
			t.Errorf("the upstream was asked as %q, want its own %q", got, up.Host)
		}
	}
}

// TestListTotalSize: ListTasks' totalSize counts the caller's tasks only,
// also when the page left none out or is empty: the server's count of
// every tenant's tasks never reaches the caller. The caller's total is
// known only when the page is the whole list; on a page of several the
// page's count would be a wrong total (issue 24 item 10): left out
// (absent, want -1). The rows with a page token fail on the old code, which
// gave the page's count.
func TestListTotalSize(t *testing.T) {
	for _, tc := range []struct {
		name, result string
		params       map[string]any
		// own answers Warden's own reads of the next pages, by token.
		own  map[string]string
		want float64
	}{
		{"an empty page", `{"tasks":[],"totalSize":42}`, nil, nil, 0},
		{"no tasks member", `{"totalSize":42}`, nil, nil, 0},
		{"only hers on the page", `{"tasks":[{"id":"task-1","contextId":"%c"}],"totalSize":42}`, nil, nil, 1},
		{"hers and another's", `{"tasks":[{"id":"task-1","contextId":"%c"},{"id":"task-77"}],"totalSize":42}`, nil, nil, 1},
		{"an empty next page token", `{"tasks":[{"id":"task-1","contextId":"%c"}],"nextPageToken":"","totalSize":42}`, nil, nil, 1},
		{"more of hers to come", `{"tasks":[{"id":"task-1","contextId":"%c"}],"nextPageToken":"p2","pageSize":1,"totalSize":42}`, nil,
			map[string]string{"p2": `{"tasks":[{"id":"task-77"}],"nextPageToken":"p3"}`, "p3": `{"tasks":[{"id":"task-1","contextId":"%c"}]}`}, -1},
		// Warden read on to the end: the page is her whole list.
		{"more pages, none of hers", `{"tasks":[{"id":"task-1","contextId":"%c"}],"nextPageToken":"p2","pageSize":1,"totalSize":42}`, nil,
			map[string]string{"p2": `{"tasks":[{"id":"task-77"}]}`}, 1},
		{"more pages, none of hers here", `{"tasks":[{"id":"task-77"}],"nextPageToken":"p2","pageSize":1,"totalSize":42}`, nil,
			map[string]string{"p2": `{"tasks":[{"id":"task-1","contextId":"%c"}]}`}, 1},
		{"the last of several pages", `{"tasks":[{"id":"task-1","contextId":"%c"}],"totalSize":42}`, map[string]any{"pageToken": "page"},
			map[string]string{"p2": `{"tasks":[{"id":"task-1","contextId":"%c"}]}`}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			c := upstreamContext(t, h, "alice", h.send(t, "alice", "hello")) // task-1
			h.up.hostile = func(method string, p map[string]any) string {
				if _, own := p["pageSize"]; own {
					tok, _ := p["pageToken"].(string)
					return `{"jsonrpc":"2.0","id":"warden-list","result":` + strings.ReplaceAll(tc.own[tok], "%c", c) + `}`
				}
				if _, paged := p["pageToken"]; tc.params != nil && !paged {
					return `{"jsonrpc":"2.0","id":7,"result":{"tasks":[],"nextPageToken":"p2","totalSize":42}}`
				}
				return `{"jsonrpc":"2.0","id":7,"result":` + strings.ReplaceAll(tc.result, "%c", c) + `}`
			}
			params := map[string]any{}
			if tc.params != nil {
				// A page token Warden gave her: the first page's.
				_, first := h.call(t, "alice", "ListTasks", map[string]any{})
				params["pageToken"] = resultOf(t, first)["nextPageToken"]
			}
			_, m := h.call(t, "alice", "ListTasks", params)
			got, present := resultOf(t, m)["totalSize"]
			if tc.want < 0 && present || tc.want >= 0 && got != tc.want {
				t.Fatalf("totalSize %v (present %v), want %v (-1: absent): %v", got, present, tc.want, m)
			}
		})
	}
}

// TestChosenContext (issue 24 item 14): a contextId the client chose (A2A
// lets it; both SDK servers keep it) starts or continues a context of the
// caller's own, read back as the client spelled it; two principals choosing
// the same id, or one choosing another's raw upstream id, get contexts of
// their own (the server never sees the chosen id), so nobody learns whether
// an id was taken. Empty-string taskId and contextId are absent, as both
// servers read them, and the first message reads back without the context
// Warden gave it. Each of these was -32001 or a context the client never
// sent before.
func TestChosenContext(t *testing.T) {
	h := newHarness(t, Config{})
	msg := func(text string, fields map[string]any) map[string]any {
		m := map[string]any{"messageId": "m-" + text, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
		for k, v := range fields {
			m[k] = v
		}
		return map[string]any{"message": m}
	}
	task := func(principal string, params map[string]any) map[string]any {
		t.Helper()
		_, m := h.call(t, principal, "SendMessage", params)
		tk, _ := resultOf(t, m)["task"].(map[string]any)
		if tk == nil {
			t.Fatalf("%s: %v", principal, m)
		}
		return tk
	}
	lastContext := func() string {
		var req struct {
			Params struct {
				Message map[string]any `json:"message"`
			} `json:"params"`
		}
		r := h.up.received()
		_ = json.Unmarshal([]byte(r[len(r)-1]), &req)
		c, _ := req.Params.Message["contextId"].(string)
		return c
	}
	alice := task("alice", msg("hello", map[string]any{"contextId": "shared"}))
	aliceUp := lastContext()
	if alice["contextId"] != "shared" || aliceUp == "shared" || aliceUp == "" {
		t.Fatalf("alice's chosen context: %v (the server got %q)", alice, aliceUp)
	}
	bob := task("bob", msg("hello", map[string]any{"contextId": "shared"}))
	if bob["contextId"] != "shared" || lastContext() == aliceUp {
		t.Fatalf("bob's choice of the same id: %v, the server got %q (alice's %q)", bob, lastContext(), aliceUp)
	}
	again := task("alice", msg("again", map[string]any{"contextId": "shared"}))
	if again["contextId"] != "shared" || lastContext() != aliceUp {
		t.Fatalf("alice continuing her chosen context: %v, the server got %q", again, lastContext())
	}
	if _, m := h.call(t, "bob", "ListTasks", map[string]any{"contextId": "shared"}); len(resultOf(t, m)["tasks"].([]any)) != 1 {
		t.Fatalf("bob's tasks in his 'shared': %v", m)
	}
	// alice's context's raw upstream id, chosen by bob: a context of his.
	plain := h.send(t, "alice", "plain")
	h.up.mu.Lock()
	raw := h.up.tasks["task-4"]["contextId"].(string)
	h.up.mu.Unlock()
	if b := task("bob", msg("raw", map[string]any{"contextId": raw})); b["contextId"] != raw || lastContext() == raw {
		t.Fatalf("bob choosing alice's raw context %s: %v, the server got %q", raw, b, lastContext())
	}
	if plain["contextId"] == raw {
		t.Fatalf("alice's context read back raw: %v", plain)
	}
	// Empty strings are absent, and the first message reads back as sent.
	e := task("alice", msg("empty", map[string]any{"taskId": "", "contextId": ""}))
	if r := h.up.received(); strings.Contains(r[len(r)-1], `"taskId"`) || lastContext() == "" {
		t.Fatalf("empty ids forwarded as %s", r[len(r)-1])
	}
	hist, _ := e["history"].([]any)
	if len(hist) != 1 || hist[0].(map[string]any)["contextId"] != nil || e["contextId"] == nil {
		t.Fatalf("the first message reads back with a context it did not send: %v", e)
	}
}

// TestPushConfigsRelayed (issue 24 item 16): every webhook URL a request
// sets, in a push config or in a message's configuration (1.0 and 0.3
// nesting), reaches the server as a relay URL of Warden's, never as the
// client's URL, and reads of the config give the client its URL back.
// Before, the client's URL went to the server, which called it itself.
func TestPushConfigsRelayed(t *testing.T) {
	h := newHarness(t, Config{})
	task := h.send(t, "alice", "input name")
	hook := "https://hooks.example.com/a2a"
	calls := []struct {
		method string
		params map[string]any
	}{
		{"CreateTaskPushNotificationConfig", map[string]any{"taskId": task["id"], "url": hook}},
		{"SendMessage", map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}},
			"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": hook}}}},
		{"SendMessage", map[string]any{"message": map[string]any{"messageId": "m2", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}},
			"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": hook}}}},
	}
	for _, c := range calls {
		_, m := h.call(t, "alice", c.method, c.params)
		if m["error"] != nil {
			t.Fatalf("%s: %v", c.method, m)
		}
		r := h.up.received()
		got := r[len(r)-1]
		if strings.Contains(got, "hooks.example.com") || !strings.Contains(got, "/push/") {
			t.Errorf("%s reached the server as %s", c.method, got)
		}
		if c.method == "CreateTaskPushNotificationConfig" && resultOf(t, m)["url"] != hook {
			t.Errorf("the created config reads %v", m)
		}
	}
}

// TestServeRunsTheRelay: Serve serves the push relay on its own listener
// beside the sidecar, and both stop when ctx ends.
func TestServeRunsTheRelay(t *testing.T) {
	up := httptest.NewServer(newFakeUpstream())
	defer up.Close()
	srv, err := New(Config{HTTPConfig: listener.HTTPConfig{Listen: "127.0.0.1:0", Upstream: up.URL + "/jsonrpc", Plaintext: true}}, newEnforcer(t), testKey, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	var relay string
	for i := 0; i < 100 && relay == ""; i++ {
		relay = srv.relay.URL(pushrelay.Target{Principal: "alice", URL: "https://hooks.example.com/"})
		time.Sleep(10 * time.Millisecond)
	}
	if relay == "" {
		t.Fatal("the relay is not listening")
	}
	resp, err := http.Post(relay+"x", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a forged relay URL: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// upstreamInMemory is the fake reached without a connection
// (BenchmarkA2AHandler).
type upstreamInMemory struct{ h http.Handler }

func (u upstreamInMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	u.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// BenchmarkA2AHandler is BenchmarkA2ASidecar's requests through the
// sidecar's handler alone: the request built in memory, the fake answering
// in memory, reached as the sidecar reaches its upstream in production (the
// transport's RoundTrip, listener.Send, not http.Client.Do). Its cpu-ns/op
// is Warden's own work per request (with the constant cost of the in-memory
// request, recorder and fake), without the noise of sockets on a shared
// machine.
func BenchmarkA2AHandler(b *testing.B) {
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	b.Cleanup(upSrv.Close)
	h := newHarnessOn(b, Config{}, newEnforcer(b), up, upSrv, &http.Client{Transport: upstreamInMemory{up}}, httptest.NewServer)
	task := h.send(b, "alice", "input x")
	h.srv.send = upstreamInMemory{up}.RoundTrip
	benchA2AHandler(b, h.srv, task["id"].(string))
}

// BenchmarkA2ANullHandler is BenchmarkA2AHandler through the null hop's
// handler (BenchmarkA2ANullHop's httputil.ReverseProxy) with the same
// in-memory fake, asking for the task by its upstream id:
// BenchmarkA2AHandler's cpu-ns/op and allocs/op less this one's are what
// Warden's own work adds to a pass-through's per request.
func BenchmarkA2ANullHandler(b *testing.B) {
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	b.Cleanup(upSrv.Close)
	h := newHarnessOn(b, Config{}, newEnforcer(b), up, upSrv, &http.Client{Transport: upstreamInMemory{up}}, httptest.NewServer)
	h.send(b, "alice", "input x")
	u, err := url.Parse("http://upstream.invalid")
	if err != nil {
		b.Fatal(err)
	}
	null := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		Transport:     upstreamInMemory{up},
	}
	benchA2AHandler(b, null, "task-1")
}

func benchA2AHandler(b *testing.B, srv http.Handler, task string) {
	get := `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"` + task + `"}}`
	send := `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`
	header := http.Header{
		"Authorization": {"Bearer alice"}, "Content-Type": {"application/json"}, "A2a-Version": {"1.0"},
		"User-Agent": {"Go-http-client/1.1"}, "Accept-Encoding": {"gzip"},
	}
	for _, bc := range []struct{ name, body string }{{"GetTask", get}, {"SendMessage", send}} {
		body := []byte(bc.body)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer func(start time.Duration) {
				cputime.Report(b, start, b.N)
			}(cputime.Used())
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/jsonrpc", bytes.NewReader(body))
				r.RemoteAddr = "127.0.0.1:40000"
				r.Header = header.Clone()
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"error"`)) {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body.Bytes())
				}
			}
		})
	}
}
