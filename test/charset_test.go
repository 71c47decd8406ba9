package test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// utf7 encodes s as one UTF-7 shifted sequence (RFC 2152): "+", the
// modified base64 of its UTF-16BE code units, "-".
func utf7(s string) string {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u>>8), byte(u))
	}
	return "+" + base64.RawStdEncoding.EncodeToString(b) + "-"
}

// smuggled is a message that reads as a ping with one opaque string in
// UTF-8 (what Warden reads), and as a tools/call of the forbidden-as-task
// tool echo in UTF-7 (what body-parser reads when the Content-Type says
// charset=utf-7): the shifted sequence closes the string and the params, and
// the later "method" and "params" members win in JSON.parse.
func smuggled(id int) string {
	hidden := `"},"method":"tools/call","params":{"name":"echo","arguments":{"text":"smuggled"},"w":"`
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"ping","params":{"x":"` + utf7(hidden) + `"}}`
}

// TestContentTypeSmuggle (issue 24 item 1): the MCP TypeScript SDK's own
// createMcpExpressApp() parses bodies with express.json(), whose body-parser
// decodes any utf-* charset the Content-Type names. A message Warden reads
// as a harmless ping runs a tools/call directly; through Warden, as the
// sidecar and as ext_authz, every Content-Type but application/json
// (charset=utf-8 at most) is refused before the server sees it.
func TestContentTypeSmuggle(t *testing.T) {
	upstream := startNodeMCP(t, "EXPRESS=1", "JSON_RESP=1")
	warden, _ := startMCPWarden(t, upstream)
	invocations := func() int {
		var inv map[string]int
		getJSON(t, upstream+"/debug/invocations", &inv)
		return inv["echo"]
	}
	hdr := func(sid, ct string) map[string]string {
		return map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25", "Content-Type": ct}
	}

	// Direct: the ping is a tools/call to the server.
	sid := sdkSession(t, upstream, "alice")
	before := invocations()
	status, b := rawPost(t, upstream, "alice", smuggled(1), hdr(sid, "application/json; charset=utf-7"))
	if status != 200 || !strings.Contains(string(b), "smuggled") || invocations() != before+1 {
		t.Fatalf("direct: HTTP %d %s, echo ran %d times; the smuggle proves nothing", status, b, invocations()-before)
	}

	// Through the sidecar: refused, the server never sees it.
	sid = sdkSession(t, warden, "alice")
	for _, ct := range []string{"application/json; charset=utf-7", "application/json; charset=UTF-7", `application/json; charset="utf-7"`,
		"application/json;charset=utf-16", "application/json; charset=utf-8; charset=utf-7", "text/plain; charset=utf-7"} {
		before := invocations()
		status, b := rawPost(t, warden, "alice", smuggled(2), hdr(sid, ct))
		if status != http.StatusUnsupportedMediaType || rpcCode(t, b) != -32600 || invocations() != before {
			t.Errorf("sidecar, Content-Type %s: HTTP %d %s, echo ran %d times; want 415 and no call", ct, status, b, invocations()-before)
		}
	}
	// The plain ping still passes.
	if status, b := rawPost(t, warden, "alice", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, hdr(sid, "application/json; charset=utf-8")); status != 200 || rpcCode(t, b) != 0 {
		t.Errorf("ping with charset=utf-8: HTTP %d %s", status, b)
	}

	// ext_authz: the same request as Envoy describes it is denied.
	call := extAuthzCheck(t, "--extauthz-mcp")
	check := func(ct string) *authv3.CheckResponse {
		return call("/mcp", withContentType(mcpCheckHeaders, ct), smuggled(4))
	}
	for _, ct := range []string{"application/json; charset=utf-7", "application/json;charset=utf-16le"} {
		if dr := check(ct).GetDeniedResponse(); dr == nil || dr.GetStatus().GetCode() != http.StatusUnsupportedMediaType {
			t.Errorf("ext_authz, Content-Type %s: %v, want denied 415", ct, dr)
		}
	}
	if resp := check("application/json"); resp.GetOkResponse() == nil {
		t.Errorf("ext_authz, the ping as UTF-8: %v, want allowed (it is a ping in UTF-8)", resp)
	}
}

// startA2AJS starts test/peers/a2a-js/server.mjs, an A2A server on
// @a2a-js/sdk's own Express handlers, with the peer's own node_modules
// (@a2a-js/sdk and express, pinned by its package-lock.json).
func startA2AJS(t testing.TB) string {
	t.Helper()
	peer(t, "test/peers/a2a-js/node_modules/@a2a-js/sdk/package.json")
	peer(t, "test/peers/a2a-js/node_modules/express/package.json")
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	start(t, "a2a-js-server", addr, []string{"PORT=" + port}, "node", filepath.Join(repoRoot(t), "test/peers/a2a-js/server.mjs"))
	return "http://" + addr
}

// TestContentTypeSmuggleA2A (issue 24 item 1, A2A): @a2a-js/sdk's
// jsonRpcHandler parses with express.json() too. A ListTasks in UTF-8 is a
// SendMessage in UTF-7, which the agent runs directly; through the A2A
// sidecar and ext_authz it is refused 415.
func TestContentTypeSmuggleA2A(t *testing.T) {
	upstream := startA2AJS(t)
	warden := startA2AWarden(t, upstream)
	executions := func() int {
		var e struct{ Executions int }
		getJSON(t, upstream+"/debug/executions", &e)
		return e.Executions
	}
	hidden := `"}}},"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"smuggled"}],"metadata":{"w":"`
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"x":{"y":{"z":"` + utf7(hidden) + `"}}}}`
	post := func(base, token, ct string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/jsonrpc", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	before := executions()
	if status, b := post(upstream, "x", "application/json; charset=utf-7"); status != 200 || executions() != before+1 {
		t.Fatalf("direct: HTTP %d %s, the agent ran %d messages; the smuggle proves nothing", status, b, executions()-before)
	}
	for _, ct := range []string{"application/json; charset=utf-7", "application/json; charset=utf-16be", "application/json; charset=utf-8; x=1"} {
		before := executions()
		if status, b := post(warden, aliceToken, ct); status != http.StatusUnsupportedMediaType || executions() != before {
			t.Errorf("sidecar, Content-Type %s: HTTP %d %s, the agent ran %d messages; want 415 and none", ct, status, b, executions()-before)
		}
	}
	if status, b := post(warden, aliceToken, "application/json"); status != 200 || strings.Contains(b, `"error"`) {
		t.Errorf("the ListTasks as UTF-8: HTTP %d %s, want its answer", status, b)
	}

	resp := extAuthzCheck(t, "--extauthz-a2a", "--extauthz-a2a-path", "/jsonrpc")("/jsonrpc", map[string]string{"content-type": "application/json; charset=utf-7", "a2a-version": "1.0"}, body)
	if dr := resp.GetDeniedResponse(); dr == nil || dr.GetStatus().GetCode() != http.StatusUnsupportedMediaType {
		t.Errorf("ext_authz: %v, want denied 415", resp)
	}
}

// TestExtAuthzBodyBound: ext_authz answers a body over
// extauthz.max_body_bytes with the gate's 413, and takes a CheckRequest
// carrying a body of the default bound (4 MiB), which grpc-go's default
// receive limit refused before the gate could read it.
func TestExtAuthzBodyBound(t *testing.T) {
	check := extAuthzCheck(t, "--extauthz-mcp")
	for _, tc := range []struct {
		size   int
		status int
	}{{4<<20 - 100, 0}, {4<<20 + 1, 413}} {
		body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("a", tc.size-55) + `"}}`
		resp := check("/mcp", withContentType(mcpCheckHeaders, "application/json"), body)
		if dr := resp.GetDeniedResponse(); tc.status == 0 && dr != nil || tc.status != 0 && (dr == nil || int(dr.GetStatus().GetCode()) != tc.status) {
			t.Errorf("%d bytes: %v, want HTTP %d (0: allowed)", len(body), dr.GetStatus(), tc.status)
		}
	}
}

// extAuthzCheck starts `warden serve --extauthz-listen` with args and
// returns a function that sends it a POST of body to path with headers, as
// Envoy describes a request (a failed call fails the test).
func extAuthzCheck(t *testing.T, args ...string) func(path string, headers map[string]string, body string) *authv3.CheckResponse {
	t.Helper()
	ext := freeAddr(t)
	start(t, "warden-extauthz", ext, nil, wardenBinary(t), append([]string{"serve", "--extauthz-listen", ext, "--auth", "dev", "--insecure-dev-auth", "--log-level", "warn"}, args...)...)
	conn, err := grpc.NewClient(ext, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func(path string, headers map[string]string, body string) *authv3.CheckResponse {
		t.Helper()
		h := map[string]string{":method": "POST", ":path": path, ":authority": "127.0.0.1", "authorization": "Bearer alice"}
		for k, v := range headers {
			h[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "POST", Path: path, Host: "127.0.0.1", Scheme: "http", Protocol: "HTTP/1.1", RawBody: []byte(body), Size: int64(len(body)), Headers: h,
		}}}})
		if err != nil {
			t.Fatalf("Check of %d bytes: %v", len(body), err)
		}
		return resp
	}
}

// mcpCheckHeaders are an MCP ping's headers but its Content-Type.
var mcpCheckHeaders = map[string]string{"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25", "mcp-method": "ping"}

func withContentType(h map[string]string, ct string) map[string]string {
	out := map[string]string{"content-type": ct}
	for k, v := range h {
		out[k] = v
	}
	return out
}
