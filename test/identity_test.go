package test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Warden reads every answer it decides on, so it asks the upstream for it
// uncompressed (Accept-Encoding: identity) whatever the client accepts.
// Before, the client's Accept-Encoding was forwarded: undici's fetch (the
// MCP TypeScript SDK's client) sends "gzip, deflate", an upstream that
// compresses on request answered gzip, and Warden refused every answer
// (502, or an event stream ended without its events).
//
// None of the installed peers compresses (no `compression` middleware
// under test/peers' node_modules; a2a-go's server does not), so gzipGateway,
// a hop in front of the real peer, plays the gateway that does, as express's
// compression middleware and many gateways do.

// gzipGateway forwards to a real peer and gzips its answer when the request
// accepts gzip (or always, with always: a gateway that ignores identity),
// flushing as the peer's bytes come, so event streams stay streams.
type gzipGateway struct {
	peer   string
	always bool // once armed: the set-up (an MCP session) is answered as asked
	mu     sync.Mutex
	armed  bool
	seen   []string // the Accept-Encoding of each request, as it came
}

// arm is called before the request a door decides on.
func (g *gzipGateway) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gzipGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.seen = append(g.seen, r.Header.Get("Accept-Encoding"))
	always := g.always && g.armed
	g.mu.Unlock()
	out, err := http.NewRequestWithContext(r.Context(), r.Method, g.peer+r.RequestURI, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Header.Del("Accept-Encoding")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	if !always && !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}
	w.Header().Del("Content-Length")
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(resp.StatusCode)
	zw := gzip.NewWriter(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = zw.Write(buf[:n])
			_ = zw.Flush()
			w.(http.Flusher).Flush()
		}
		if err != nil {
			break
		}
	}
	_ = zw.Close()
}

func (g *gzipGateway) accepted() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.seen...)
}

// identityDoor starts bin/warden's sidecar in front of gw (gzipGateway in
// front of the real peer, set by the door) and sends one decided request
// as a client accepting gzip does: the status, Content-Encoding and
// body the client got.
type identityDoor func(t *testing.T, gw *gzipGateway) (status int, encoding, body string)

// postGzip posts body as a client that accepts gzip and decodes nothing
// itself (DisableCompression: what arrives is what Warden sent).
func postGzip(t *testing.T, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// mcpIdentityDoor: the MCP sidecar in front of the TypeScript SDK's server,
// answering JSON (env JSON_RESP=1) or event streams; a tools/call of echo.
func mcpIdentityDoor(env ...string) identityDoor {
	return func(t *testing.T, gw *gzipGateway) (int, string, string) {
		gw.peer = startNodeMCP(t, env...)
		front := httptest.NewServer(gw)
		t.Cleanup(front.Close)
		base, _ := startMCPWarden(t, front.URL)
		h := map[string]string{"Accept": "application/json, text/event-stream", "Authorization": "Bearer alice"}
		// initialize without gzip, so that every door's first answer is read
		init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"identity","version":"0"}}}`
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", h["Accept"])
		req.Header.Set("Authorization", h["Authorization"])
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, sid)
		}
		h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = sid, "2025-11-25"
		postGzip(t, base+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		// tools/list first: Warden learns the tools' taskSupport from it
		// (else it asks the server itself, relay.Behalf, before the call)
		postGzip(t, base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, h)
		gw.arm()
		status, hdr, body := postGzip(t, base+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"identity-marker"}}}`, h)
		return status, hdr.Get("Content-Encoding"), body
	}
}

// a2aIdentityDoor: the A2A sidecar in front of the a2a-go server; a
// SendMessage.
func a2aIdentityDoor(t *testing.T, gw *gzipGateway) (int, string, string) {
	gw.peer = startA2AGo(t)
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	base, _ := startA2AWardenProcess(t, front.URL)
	gw.arm()
	status, hdr, body := postGzip(t, base+"/jsonrpc",
		`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m-identity","role":"ROLE_USER","parts":[{"text":"identity-marker"}]}}}`,
		map[string]string{"A2A-Version": "1.0", "Authorization": "Bearer " + aliceToken})
	return status, hdr.Get("Content-Encoding"), body
}

func TestIdentityUpstreamDoors(t *testing.T) {
	requirePeersOrSkip(t)
	doors := []struct {
		name string
		send identityDoor
	}{
		{"mcp json", mcpIdentityDoor("JSON_RESP=1")},
		{"mcp event stream", mcpIdentityDoor()},
		{"a2a", a2aIdentityDoor},
	}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			t.Run("gzip when asked", func(t *testing.T) {
				gw := &gzipGateway{}
				status, enc, body := d.send(t, gw)
				if status != http.StatusOK || enc != "" || !strings.Contains(body, "identity-marker") {
					t.Errorf("HTTP %d, Content-Encoding %q, body %.300q; want 200, the answer uncompressed", status, enc, body)
				}
				for _, ae := range gw.accepted() {
					if ae != "identity" {
						t.Errorf("the upstream was sent Accept-Encoding %q, want identity", ae)
					}
				}
			})
			t.Run("gzip though asked for identity", func(t *testing.T) {
				gw := &gzipGateway{always: true}
				status, enc, body := d.send(t, gw)
				if status != http.StatusBadGateway || enc != "" || !strings.Contains(body, "compressed") || strings.Contains(body, "identity-marker") {
					t.Errorf("HTTP %d, Content-Encoding %q, body %.300q; want 502 saying the answer is compressed", status, enc, body)
				}
			})
		})
	}
}
