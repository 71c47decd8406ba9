package test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMCPStreamCaps (issue 24 item 19): one principal opening standalone
// GET /mcp SSE streams by the hundred cost Warden an upstream connection
// each, with nothing refused, until it ran out of file descriptors. Streams
// are now capped per principal (429, Retry-After, a JSON-RPC error) and in
// total (503): the one caller fills its own share, another principal still
// gets through, and a closed stream gives its place back. Against the MCP
// TypeScript SDK's Express server; before, every GET was admitted.
func TestMCPStreamCaps(t *testing.T) {
	upstream := startNodeMCP(t)
	base, _ := startMCPWarden(t, upstream, "--sidecar-max-streams-per-principal", "4", "--sidecar-max-streams", "6")
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	do := func(token, method, body, sid string) *http.Response {
		req, _ := http.NewRequest(method, base+"/mcp", strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// The SDK server allows one standalone stream a session: a session each.
	session := func(token string) string {
		resp := do(token, http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"caps","version":"0"}}}`, "")
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("initialize as %s: HTTP %d", token, resp.StatusCode)
		}
		r := do(token, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
		r.Body.Close()
		return sid
	}
	open := func(token, sid string) *http.Response {
		resp := do(token, http.MethodGet, "", sid)
		if resp.StatusCode == http.StatusOK {
			t.Cleanup(func() { resp.Body.Close() })
		}
		return resp
	}
	refused := func(resp *http.Response, status int) {
		t.Helper()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var msg struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if resp.StatusCode != status || resp.Header.Get("Retry-After") == "" || json.Unmarshal(b, &msg) != nil || msg.Error.Code == 0 {
			t.Fatalf("HTTP %d Retry-After %q %s, want %d with Retry-After and a JSON-RPC error", resp.StatusCode, resp.Header.Get("Retry-After"), b, status)
		}
		t.Logf("refused: %d %s", resp.StatusCode, msg.Error.Message)
	}
	var alice []*http.Response
	aliceSessions := make([]string, 6)
	for i := range aliceSessions {
		aliceSessions[i] = session("alice")
	}
	for i := range 4 {
		resp := open("alice", aliceSessions[i])
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("alice's stream %d: HTTP %d", i, resp.StatusCode)
		}
		alice = append(alice, resp)
	}
	refused(open("alice", aliceSessions[4]), http.StatusTooManyRequests)

	// Another principal is not refused for alice's streams.
	bobSessions := []string{session("bob"), session("bob"), session("bob")}
	for i := range 2 {
		if resp := open("bob", bobSessions[i]); resp.StatusCode != http.StatusOK {
			t.Fatalf("bob's stream %d: HTTP %d", i, resp.StatusCode)
		}
	}
	// The total is reached: 503 for anyone.
	refused(open("bob", bobSessions[2]), http.StatusServiceUnavailable)

	// A stream closed gives its place back.
	alice[0].Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := open("alice", aliceSessions[5])
		if resp.StatusCode == http.StatusOK {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("alice's stream after closing one: HTTP %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
