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
	// the standing streams' own shares as large as the caps here: this test
	// is about the caps (TestMCPStandingStreams about the shares)
	base, _ := startMCPWarden(t, upstream, "--sidecar-max-streams-per-principal", "4", "--sidecar-max-streams", "6",
		"--sidecar-max-watches-per-principal", "4", "--sidecar-max-watches", "6")
	_, session, open, refused := mcpStreamHelpers(t, base)
	aliceSessions, alice := openStreams(t, session, open, "alice", 6, 4)
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

// TestMCPStandingStreams (issue 24 item 20): standing streams (the
// standalone GET stream) hold at most their share of a principal's
// streams, so its decided requests always find room, and one that passes
// nothing for --sidecar-watch-idle ends. With a per-principal cap of 8,
// alice's fifth GET stream is refused 429 and her POST is served while
// four are open; the four end once idle. Before, eight idle GET streams
// took her whole share (her POST got 429) and stayed open for good.
// Against the MCP TypeScript SDK's Express server.
func TestMCPStandingStreams(t *testing.T) {
	upstream := startNodeMCP(t)
	base, _ := startMCPWarden(t, upstream, "--sidecar-max-streams-per-principal", "8", "--sidecar-watch-idle", "2s")
	do, session, open, refused := mcpStreamHelpers(t, base)
	sessions, streams := openStreams(t, session, open, "alice", 5, 4)
	refused(open("alice", sessions[4]), http.StatusTooManyRequests)
	resp := do("alice", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, sessions[0])
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's POST beside her standing streams: HTTP %d", resp.StatusCode)
	}
	began := time.Now()
	ended := make(chan error, len(streams))
	for _, s := range streams {
		go func() { _, err := io.Copy(io.Discard, s.Body); ended <- err }()
	}
	for range streams {
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("an idle standing stream was still open 10 s later (watch idle 2s)")
		}
	}
	t.Logf("idle standing streams ended %v after the last open", time.Since(began).Round(10*time.Millisecond))
	if r := open("alice", sessions[4]); r.StatusCode != http.StatusOK {
		t.Fatalf("a stream after the idle ones ended: HTTP %d", r.StatusCode)
	}
}

// openStreams opens n sessions as token and the standalone stream of the
// first streams of them, each of which must be admitted.
func openStreams(t *testing.T, session func(string) string, open func(token, sid string) *http.Response, token string, n, streams int) ([]string, []*http.Response) {
	sessions := make([]string, n)
	for i := range sessions {
		sessions[i] = session(token)
	}
	var open200 []*http.Response
	for i := range streams {
		resp := open(token, sessions[i])
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's stream %d: HTTP %d", token, i, resp.StatusCode)
		}
		open200 = append(open200, resp)
	}
	return sessions, open200
}

// mcpStreamHelpers are the requests the stream tests send to the MCP
// sidecar at base: do sends one, session opens an MCP session as a
// principal, open its standalone GET stream (closed at the test's end),
// refused checks a capacity refusal.
func mcpStreamHelpers(t *testing.T, base string) (do func(token, method, body, sid string) *http.Response, session func(token string) string,
	open func(token, sid string) *http.Response, refused func(resp *http.Response, status int)) {
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	do = func(token, method, body, sid string) *http.Response {
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
	session = func(token string) string {
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
	open = func(token, sid string) *http.Response {
		resp := do(token, http.MethodGet, "", sid)
		if resp.StatusCode == http.StatusOK {
			t.Cleanup(func() { resp.Body.Close() })
		}
		return resp
	}
	refused = func(resp *http.Response, status int) {
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
	return do, session, open, refused
}
