package test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// mcpExchange posts (or, with body "", DELETEs) as alice in session sid
// (none when empty) and returns the status, the Mcp-Session-Id answered
// and the body.
func mcpExchange(t *testing.T, base, sid, body string) (int, string, []byte) {
	t.Helper()
	method := http.MethodPost
	if body == "" {
		method = http.MethodDelete
	}
	req, err := http.NewRequest(method, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer alice")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b
}

// TestMCPSessionEndAnswers: the MCP TypeScript SDK 1.32.2 server refuses a
// message of a session it ended (after the client's DELETE; likewise after
// a restart or an idle timeout) with HTTP 404 and a JSON-RPC error whose id
// is null, and a non-initialize request without a session with HTTP 400
// (the Python SDK 2.3.0 client's first message, server/discover, gets
// this). The 404 is what tells a client to initialize again. Through
// Warden the client gets the same status and the server's error. Before,
// Warden took a null id for an answer to no request of the caller's and
// answered 502 with its own -32603 "could not be matched", so a client
// never learned its session was gone.
func TestMCPSessionEndAnswers(t *testing.T) {
	upstream := startNodeMCP(t)
	warden, _ := startMCPWarden(t, upstream)
	type answer struct {
		Status int
		Error  json.RawMessage
		ID     json.RawMessage
	}
	run := func(base string) map[string]answer {
		code, sid, b := mcpExchange(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"end","version":"0"}}}`)
		if code != http.StatusOK || sid == "" {
			t.Fatalf("initialize at %s: %d %s", base, code, b)
		}
		mcpExchange(t, base, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if code, _, b := mcpExchange(t, base, sid, ""); code != http.StatusOK {
			t.Fatalf("DELETE at %s: %d %s", base, code, b)
		}
		out := map[string]answer{}
		for name, c := range map[string]struct{ sid, body string }{
			"request of the ended session":      {sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`},
			"notification of the ended session": {sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
			"request without a session":         {"", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`},
			"server/discover without a session": {"", `{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{}}`},
		} {
			code, _, b := mcpExchange(t, base, c.sid, c.body)
			var m struct {
				Error json.RawMessage `json:"error"`
				ID    json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s at %s: %d %q: %v", name, base, code, b, err)
			}
			out[name] = answer{code, m.Error, m.ID}
		}
		return out
	}
	direct, through := run(upstream), run(warden)
	for name, d := range direct {
		w := through[name]
		if d.Status != w.Status || string(d.Error) != string(w.Error) || string(d.ID) != string(w.ID) {
			t.Errorf("%s:\n direct HTTP %d id %s error %s\n warden HTTP %d id %s error %s", name, d.Status, d.ID, d.Error, w.Status, w.ID, w.Error)
		}
	}
	if d := direct["request of the ended session"]; d.Status != http.StatusNotFound {
		t.Errorf("the server answered a request of an ended session %d, not 404: the test proves little", d.Status)
	}
}
