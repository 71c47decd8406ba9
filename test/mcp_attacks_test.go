package test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// rawPost sends body as token with the 2026-07-28 headers plus hdr, and
// returns the HTTP status and the answer's bytes (the last data line of an
// event stream).
func rawPost(t *testing.T, base, token, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	resp := rawRequest(t, http.MethodPost, base, token, body, hdr)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, lastMessage(resp, b)
}

// rawRequest sends one HTTP request of method to base's /mcp as rawPost
// does, and returns the answer with its body unread.
func rawRequest(t *testing.T, method, base, token, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// lastMessage is the JSON-RPC message of an answer: its body, or the data
// of the last event of an event stream.
func lastMessage(resp *http.Response, b []byte) []byte {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return b
	}
	var last []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data:")); ok && len(bytes.TrimSpace(d)) > 0 {
			last = bytes.TrimSpace(d)
		}
	}
	return last
}

// metaJSON is the 2026-07-28 _meta every tasks request carries.
func metaJSON(t *testing.T) string {
	b, err := json.Marshal(extMeta)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rpcCode returns a JSON-RPC answer's error code (0 for a result).
func rpcCode(t *testing.T, b []byte) int {
	t.Helper()
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	if m.Error == nil {
		return 0
	}
	return m.Error.Code
}

// TestMCPAttacks is the catalogue of request-smuggling and identifier
// attacks on the MCP sidecar. Each case runs against the fixture server
// test/mcptasks, which decodes with encoding/json (case-insensitive member
// names, ids echoed as sent): direct, the attack works (the server applies
// it); through Warden it is refused and never reaches the server. Valid
// traffic goes through unchanged.
func TestMCPAttacks(t *testing.T) {
	upstream := startFixtureMCP(t)
	warden, _ := startMCPWarden(t, upstream)
	meta := metaJSON(t)
	alice := mcpClient{t, warden, "alice"}
	directAlice := mcpClient{t, upstream, "alice"}

	// received counts the requests of method the server received from token.
	received := func(method, token string) int {
		return count(upstreamRequests(t, upstream), method+" by "+token)
	}
	// rawTask creates a task through Warden for alice and returns its
	// handle and the server's ID (learned from the server's request log).
	rawTask := func(t *testing.T, steps int) (handle, raw string) {
		t.Helper()
		handle = alice.create(steps, 50)
		alice.call("tasks/get", map[string]any{"taskId": handle}, nil)
		var reqs []struct {
			Method string `json:"method"`
			TaskID string `json:"taskId"`
		}
		getJSON(t, upstream+"/debug/requests", &reqs)
		for i := len(reqs) - 1; i >= 0; i-- {
			if reqs[i].Method == "tasks/get" && reqs[i].TaskID != "" {
				return handle, reqs[i].TaskID
			}
		}
		t.Fatal("the server never saw the task's ID")
		return "", ""
	}
	directStatus := func(t *testing.T, raw string) string {
		t.Helper()
		return fmtStatus(directAlice.call("tasks/get", map[string]any{"taskId": raw}, nil).Result)
	}

	t.Run("9 method and Method", func(t *testing.T) {
		_, raw := rawTask(t, 200)
		body := `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tasks/cancel","params":{"taskId":"` + raw + `","_meta":` + meta + `}}`
		// Direct: "ping" to a case-sensitive reader, tasks/cancel to the server.
		status, b := rawPost(t, upstream, "bob", body, map[string]string{"Mcp-Name": raw})
		if status != 200 || rpcCode(t, b) != 0 || directStatus(t, raw) != "cancelled" {
			t.Fatalf("direct: HTTP %d %s, task %s; the server did not cancel (the attack proves nothing)", status, b, directStatus(t, raw))
		}
		_, raw2 := rawTask(t, 200)
		before := received("tasks/cancel", "bob")
		body = strings.ReplaceAll(body, raw, raw2)
		status, b = rawPost(t, warden, "bob", body, map[string]string{"Mcp-Name": raw2})
		if status != 400 || rpcCode(t, b) != -32600 {
			t.Errorf("through Warden: HTTP %d %s, want 400 -32600", status, b)
		}
		if received("tasks/cancel", "bob") != before || directStatus(t, raw2) != "working" {
			t.Errorf("through Warden the server cancelled alice's task (status %s)", directStatus(t, raw2))
		}
	})

	t.Run("9 ID makes a notification a request", func(t *testing.T) {
		_, raw := rawTask(t, 200)
		body := `{"jsonrpc":"2.0","ID":9,"method":"tasks/pause","params":{"taskId":"` + raw + `","_meta":` + meta + `}}`
		status, b := rawPost(t, upstream, "bob", body, map[string]string{"Mcp-Name": raw})
		if status != 200 || rpcCode(t, b) != 0 || !bytes.Contains(b, []byte(`"id":9`)) {
			t.Fatalf("direct: HTTP %d %s; the server did not take it as a request", status, b)
		}
		_, raw2 := rawTask(t, 200)
		before := received("tasks/pause", "bob")
		status, b = rawPost(t, warden, "bob", strings.ReplaceAll(body, raw, raw2), map[string]string{"Mcp-Name": raw2})
		if status != 400 || rpcCode(t, b) != -32600 {
			t.Errorf("through Warden: HTTP %d %s, want 400 -32600", status, b)
		}
		if received("tasks/pause", "bob") != before {
			t.Error("through Warden the server received bob's pause")
		}
		// Variants of the class: other foldings, deeper members.
		for name, v := range map[string]string{
			"Kelvin sign":             `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x","tas\u212aId":"` + raw2 + `"}}`,
			"long s":                  `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taſkId":"` + raw2 + `"}}`,
			"PARAMS":                  `{"jsonrpc":"2.0","id":1,"method":"tasks/get","PARAMS":{"taskId":"` + raw2 + `"}}`,
			"escaped capital":         `{"jsonrpc":"2.0","id":1,"method":"tasks/get","\u004dethod":"tasks/cancel","params":{"taskId":"x"}}`,
			"related-task TaskId":     `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"TaskId":"` + raw2 + `"}}}}`,
			"Task beside task":        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","task":null,"Task":{}}}`,
			"null id makes a request": `{"jsonrpc":"2.0","id":null,"method":"tasks/cancel","params":{"taskId":"` + raw2 + `"}}`,
		} {
			status, b := rawPost(t, warden, "bob", v, nil)
			if status != 400 || rpcCode(t, b) != -32600 {
				t.Errorf("%s through Warden: HTTP %d %s, want 400 -32600", name, status, b)
			}
		}
	})

	t.Run("10 ids spelled differently", func(t *testing.T) {
		h, _ := rawTask(t, 200)
		for _, id := range []string{"1.0", "1e0", "1E0", "0.1e1", "-0", "10e-1", "9007199254740993", "123456789012345678901234567890"} {
			body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{"taskId":"` + h + `","_meta":` + meta + `}}`
			// Direct, the server takes every spelling as a request.
			if status, b := rawPost(t, upstream, "alice", strings.ReplaceAll(body, h, "nope"), map[string]string{"Mcp-Name": "nope"}); status != 200 || !bytes.Contains(b, []byte(`"id":`+id)) {
				t.Errorf("direct id %s: HTTP %d %s", id, status, b)
			}
			status, b := rawPost(t, warden, "alice", body, map[string]string{"Mcp-Name": h})
			if status != 400 || rpcCode(t, b) != -32600 {
				t.Errorf("id %s through Warden: HTTP %d %s, want 400 -32600", id, status, b)
			}
		}
		// Canonical ids pass.
		for _, id := range []string{"1", "-7", "0", "9007199254740992", `"a"`, `"1.0"`} {
			body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{"taskId":"` + h + `","_meta":` + meta + `}}`
			if status, b := rawPost(t, warden, "alice", body, map[string]string{"Mcp-Name": h}); status != 200 || rpcCode(t, b) != 0 || !bytes.Contains(b, []byte(`"id":`+id)) {
				t.Errorf("id %s through Warden: HTTP %d %s", id, status, b)
			}
		}
	})

	t.Run("11 Last-Event-ID of another stream", func(t *testing.T) {
		for _, v := range []string{"1", "wt1.MQ.AAAA", "wt2.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
			req, _ := http.NewRequest(http.MethodGet, warden+"/mcp", nil)
			req.Header.Set("Authorization", "Bearer alice")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Last-Event-ID", v)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || rpcCode(t, b) != -32600 {
				t.Errorf("Last-Event-ID %q: HTTP %d %s, want 400 -32600", v, resp.StatusCode, b)
			}
		}
	})

	t.Run("12 handles reveal nothing", func(t *testing.T) {
		h, raw := rawTask(t, 5)
		if !strings.HasPrefix(h, "wt2.") {
			t.Fatalf("handle %q", h)
		}
		body, err := base64.RawURLEncoding.DecodeString(h[strings.LastIndex(h, ".")+1:]) // wt2.[key id.]base64
		if err != nil {
			t.Fatal(err)
		}
		rawBytes, _ := hex.DecodeString(raw)
		for _, leak := range [][]byte{[]byte(raw), rawBytes, []byte(raw[:8])} {
			if bytes.Contains(body, leak) || strings.Contains(h, string(leak)) {
				t.Errorf("handle %s shows the task ID %s", h, raw)
			}
		}
		if again := alice.call("tasks/get", map[string]any{"taskId": h}, nil).Result["taskId"]; again != h {
			t.Errorf("the same task came back as %v, not %s: handles must be stable", again, h)
		}
	})

	t.Run("13 raw ids where a handle belongs", func(t *testing.T) {
		h, raw := rawTask(t, 200)
		bob := mcpClient{t, warden, "bob"}
		bobs := bob.create(200, 50)
		beforeGet, beforeCall := received("tasks/get", "bob"), received("tools/call", "bob")
		unknown := bob.call("tasks/get", map[string]any{"taskId": "wt2.unknown"}, nil)
		if unknown.code() != -32602 {
			t.Fatalf("unknown task: %+v", unknown)
		}
		related := map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": raw}}
		for name, params := range map[string]map[string]any{
			"related-task on tools/call":          {"name": "greet", "_meta": related},
			"related-task on bob's own tasks/get": {"taskId": bobs, "_meta": related},
			"raw params.taskId":                   {"taskId": raw},
		} {
			method := "tasks/get"
			if _, ok := params["name"]; ok {
				method = "tools/call"
			}
			p := map[string]any{}
			for k, v := range params {
				p[k] = v
			}
			if m, ok := p["_meta"].(map[string]any); ok {
				for k, v := range extMeta {
					m[k] = v
				}
			}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": p})
			r := bob.post(body, method, p, nil)
			if r.code() != -32602 || r.Error.Message != unknown.Error.Message || r.HTTP != unknown.HTTP {
				t.Errorf("%s: HTTP %d %+v, want the unknown-task answer", name, r.HTTP, r.Error)
			}
		}
		// Mcp-Name must carry the handle of params.taskId.
		if r := alice.call("tasks/get", map[string]any{"taskId": h}, map[string]string{"Mcp-Name": raw}); r.HTTP != 400 || r.code() != -32020 {
			t.Errorf("raw Mcp-Name: HTTP %d %+v, want 400 -32020", r.HTTP, r.Error)
		}
		if n := received("tasks/get", "bob") - beforeGet + received("tools/call", "bob") - beforeCall; n != 0 {
			t.Errorf("the server received %d of bob's requests", n)
		}
	})

	t.Run("14 escaped handle", func(t *testing.T) {
		h, _ := rawTask(t, 5)
		escaped := strings.Replace(h, ".", `\u002e`, 1)
		body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + escaped + `","_meta":` + meta + `}}`
		status, b := rawPost(t, warden, "alice", body, map[string]string{"Mcp-Name": h})
		if status != 200 || rpcCode(t, b) != 0 || !bytes.Contains(b, []byte(h)) {
			t.Errorf("escaped handle: HTTP %d %s, want the task", status, b)
		}
	})

	t.Run("valid traffic unchanged", func(t *testing.T) {
		h := alice.create(3, 30)
		alice.call("tasks/steer", map[string]any{"taskId": h, "message": "left"}, nil)
		done := alice.waitStatus(h, "completed")
		if done["taskId"] != h {
			t.Errorf("completed task %v, want %s", done["taskId"], h)
		}
		if r := alice.call("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "bob"}}, nil); r.Error != nil || !strings.Contains(fmtJSON(r.Result), "hello, bob") {
			t.Errorf("greet: %+v %+v", r.Result, r.Error)
		}
		if status, b := rawPost(t, warden, "alice", `{"jsonrpc":"2.0","id":"p","method":"ping","params":{"_meta":`+meta+`}}`, nil); status != 200 || rpcCode(t, b) != 0 {
			t.Errorf("ping: HTTP %d %s", status, b)
		}
	})
}

func fmtStatus(res map[string]any) string {
	s, _ := res["status"].(string)
	return s
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sdkSession initializes a 2025-11-25 session with the TypeScript SDK
// server (directly or through Warden) and returns its Mcp-Session-Id.
func sdkSession(t *testing.T, base, token string) string {
	t.Helper()
	post := func(body, sid string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{}},"clientInfo":{"name":"attacks","version":"0"}}}`, "")
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: HTTP %d %s", resp.StatusCode, b)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	return sid
}

// TestMCPAttacksSDK runs the id-spelling attack (10) against the MCP
// TypeScript SDK server, which answers "id":1.0 with "id":1: a proxy that
// matches answers by their spelling never recognises the answer to bob's
// tasks/list, and passed the leaky server's list (alice's task IDs) to him
// unfiltered. Through Warden the request is refused, and the canonical id
// gets the filtered list.
func TestMCPAttacksSDK(t *testing.T) {
	upstream := startNodeMCP(t, "LEAKY=1", "JSON_RESP=1")
	warden, _ := startMCPWarden(t, upstream)
	create := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_sum","arguments":{"a":1,"b":2,"delay_ms":5000},"task":{"ttl":60000}}}`
	list := func(id string) string { return `{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/list","params":{}}` }
	hdr := func(sid string) map[string]string {
		return map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	}

	// Direct: the answer's id is respelled, and bob sees alice's task.
	aliceSid := sdkSession(t, upstream, "alice")
	_, created := rawPost(t, upstream, "alice", create, hdr(aliceSid))
	var c struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(created, &c) != nil || c.Result.Task.TaskID == "" {
		t.Fatalf("direct create: %s", created)
	}
	bobSid := sdkSession(t, upstream, "bob")
	_, b := rawPost(t, upstream, "bob", list("1.0"), hdr(bobSid))
	if !bytes.Contains(b, []byte(`"id":1,`)) && !bytes.Contains(b, []byte(`"id":1}`)) {
		t.Fatalf("direct: the SDK kept the spelling 1.0 (%s); the attack proves nothing", b)
	}
	if !bytes.Contains(b, []byte(c.Result.Task.TaskID)) {
		t.Fatalf("direct: bob's list %s lacks alice's task; the server is not leaky", b)
	}

	// Through Warden.
	aliceSid = sdkSession(t, warden, "alice")
	_, created = rawPost(t, warden, "alice", create, hdr(aliceSid))
	if json.Unmarshal(created, &c) != nil || !strings.HasPrefix(c.Result.Task.TaskID, "wt2.") {
		t.Fatalf("create through Warden: %s", created)
	}
	bobSid = sdkSession(t, warden, "bob")
	for _, id := range []string{"1.0", "1e0", "1E0", "0.1e1", "-0", "9007199254740993"} {
		status, b := rawPost(t, warden, "bob", list(id), hdr(bobSid))
		if status != 400 || rpcCode(t, b) != -32600 {
			t.Errorf("tasks/list id %s: HTTP %d %s, want 400 -32600", id, status, b)
		}
	}
	status, b := rawPost(t, warden, "bob", list("1"), hdr(bobSid))
	var l struct {
		Result struct {
			Tasks []struct {
				TaskID string `json:"taskId"`
			} `json:"tasks"`
		} `json:"result"`
	}
	if status != 200 || json.Unmarshal(b, &l) != nil || bytes.Contains(b, []byte(`"taskId":"`+c.Result.Task.TaskID)) || len(l.Result.Tasks) != 0 {
		t.Errorf("bob's tasks/list through Warden: HTTP %d %s, want an empty list", status, b)
	}
	status, b = rawPost(t, warden, "alice", list(`"a"`), hdr(aliceSid))
	if status != 200 || json.Unmarshal(b, &l) != nil || len(l.Result.Tasks) != 1 || l.Result.Tasks[0].TaskID != c.Result.Task.TaskID {
		t.Errorf("alice's tasks/list through Warden: HTTP %d %s, want her one task", status, b)
	}
	// A cursor that is not a handle of the caller's is refused.
	status, b = rawPost(t, warden, "alice", `{"jsonrpc":"2.0","id":3,"method":"tasks/list","params":{"cursor":"1"}}`, hdr(aliceSid))
	if status != 200 || rpcCode(t, b) != -32602 {
		t.Errorf("raw cursor: HTTP %d %s, want -32602", status, b)
	}
}
