package test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

// TestExtAuthzMCPSessionBound: bin/warden --extauthz-mcp in front of the
// MCP TypeScript SDK's server (through envoyHTTP, Envoy's ext_authz filter
// as a test stands in for it). alice initializes and uses her session (the
// SDK client's initialized notification); bob, holding her session id, is
// refused on it (404, -32001, as the sidecar answers another's session)
// and the server never sees his requests: his DELETE does not end her
// session, which still answers her. Before, bob's DELETE was forwarded and
// ended it: her next request got the server's 404.
func TestExtAuthzMCPSessionBound(t *testing.T) {
	upstream := startNodeMCP(t)
	ext := freeAddr(t)
	start(t, "warden-extauthz", ext, nil, wardenBinary(t), "serve", "--extauthz-listen", ext, "--extauthz-mcp", "--auth", "dev", "--insecure-dev-auth", "--log-level", "warn")
	front := envoyHTTP(t, ext, upstream)

	sid := sdkSession(t, front, "alice")
	echo := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	call := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	for _, r := range []struct{ method, body string }{{http.MethodDelete, ""}, {http.MethodGet, ""}, {http.MethodPost, echo}} {
		status, b := send(t, front, r.method, "bob", r.body, call)
		if status != http.StatusNotFound || !strings.Contains(string(b), `"code":-32001`) || !strings.Contains(string(b), "Session not found") {
			t.Errorf("bob's %s on alice's session: HTTP %d %s, want 404 -32001 Session not found", r.method, status, b)
		}
	}
	if status, b := rawPost(t, front, "alice", echo, call); status != http.StatusOK || rpcCode(t, b) != 0 || !strings.Contains(string(b), "hi") {
		t.Errorf("alice's call on her session after bob's DELETE: HTTP %d %s, want her echo", status, b)
	}
	if status, b := send(t, front, http.MethodDelete, "alice", "", call); status != http.StatusOK {
		t.Errorf("alice's DELETE of her session: HTTP %d %s", status, b)
	}
}

// send sends method with body (none when "") to base's /mcp as token's
// bearer and returns the status and the body.
func send(t *testing.T, base, method, token, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, base+"/mcp", strings.NewReader(body))
	if body == "" {
		req.Body = nil
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// envoyHTTP stands in for Envoy's HTTP ext_authz filter in front of
// upstream (with_request_body, pack_as_bytes): each request is buffered and
// described to the ext_authz server at ext; a denial is answered as Warden
// shaped it, an allowed request is forwarded with the headers Warden sets
// and removes, its answer streamed back. It returns the front's base URL.
func envoyHTTP(t *testing.T, ext, upstream string) string {
	t.Helper()
	client := dialCheck(t, "warden-extauthz", ext).c
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := map[string]string{":method": r.Method, ":path": r.URL.RequestURI(), ":authority": r.Host}
		for k, v := range r.Header {
			h[strings.ToLower(k)] = strings.Join(v, ",")
		}
		resp, err := client.Check(r.Context(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host, Scheme: "http", Protocol: "HTTP/1.1", RawBody: body, Size: int64(len(body)), Headers: h,
		}}}})
		if err != nil {
			http.Error(w, "ext_authz: "+err.Error(), http.StatusForbidden)
			return
		}
		if dr := resp.GetDeniedResponse(); dr != nil {
			for _, o := range dr.GetHeaders() {
				w.Header().Set(o.GetHeader().GetKey(), o.GetHeader().GetValue())
			}
			w.WriteHeader(int(dr.GetStatus().GetCode()))
			io.WriteString(w, dr.GetBody())
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		if len(body) == 0 {
			req.Body = nil
		}
		req.Header = r.Header.Clone()
		ok := resp.GetOkResponse()
		for _, k := range ok.GetHeadersToRemove() {
			req.Header.Del(k)
		}
		for _, o := range ok.GetHeaders() {
			req.Header.Set(o.GetHeader().GetKey(), o.GetHeader().GetValue())
		}
		up, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Body.Close()
		for k, v := range up.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(up.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 4096)
		for {
			n, err := up.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(front.Close)
	return front.URL
}
