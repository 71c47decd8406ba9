package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// A request Warden decided reaches the upstream once. Go's HTTP transport
// sends a POST again on a new connection when the kept-alive connection it
// went out on closes before any answer byte, if the request carries
// Idempotency-Key or X-Idempotency-Key (the client's word that it is
// idempotent) and its body can be read again (GetBody, which Warden sets):
// the upstream ran the request twice on one decision (a tools/call, a
// SendMessage, a tasks/steer counted once against mcp.max_steer_queue).
// The table runs against both HTTP sidecars (ext_authz forwards nothing:
// Envoy does), each in front of its real peer behind losingHop.

// losingHop is an HTTP/1.1 hop in front of a real peer that loses one
// answer per marker: the first request whose body holds a marker
// (`once-` and a word) reaches the peer, which answers it, and then the
// connection it came on closes without the answer (a peer restarting, a
// middlebox's idle timeout on a long call). Every other request and answer
// passes. With hold, no answer is lost: every marked one is held that long
// (a slow link), for a client to hang up first.
type losingHop struct {
	peer string // base URL
	hold time.Duration
	mu   sync.Mutex
	seen map[string]*hopSeen
}

// hopSeen is what the peer received of one marker.
type hopSeen struct {
	n      int         // requests holding it that reached the peer
	reused bool        // the first came on a connection that had carried one before
	header http.Header // the first's headers, as the peer read them
}

var onceMarker = regexp.MustCompile(`once-[a-z0-9-]+`)

func startLosingHop(t testing.TB, peer string) (*losingHop, string) {
	return startHop(t, peer, 0)
}

// startHop starts a losingHop holding marked answers for hold (0: losing
// the first of each marker).
func startHop(t testing.TB, peer string, hold time.Duration) (*losingHop, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &losingHop{peer: peer, hold: hold, seen: map[string]*hopSeen{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { h.serve(c) })
		}
	})
	return h, "http://" + l.Addr().String()
}

func (h *losingHop) serve(c net.Conn) {
	defer c.Close()
	client := &http.Client{Timeout: 30 * time.Second}
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		lose, hold := false, false
		if m := onceMarker.Find(body); m != nil {
			h.mu.Lock()
			s := h.seen[string(m)]
			hold = h.hold > 0
			if s == nil {
				s = &hopSeen{reused: n > 1, header: req.Header.Clone()}
				h.seen[string(m)] = s
				lose = !hold
			}
			s.n++
			h.mu.Unlock()
		}
		out, err := http.NewRequest(req.Method, h.peer+req.RequestURI, bytes.NewReader(body))
		if err != nil {
			return
		}
		out.Header = req.Header
		resp, err := client.Do(out)
		if err != nil {
			return
		}
		if lose { // the peer ran it; its answer is lost with the connection
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return
		}
		if hold {
			time.Sleep(h.hold)
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil {
			return
		}
	}
}

func (h *losingHop) of(marker string) hopSeen {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.seen[marker]; s != nil {
		return *s
	}
	return hopSeen{}
}

// onceDoor sends, through one sidecar, a request that warms its upstream
// connection and then the request holding marker with the extra headers;
// it returns the HTTP status the client got for the second.
type onceDoor func(t *testing.T, marker string, header [][2]string) int

func TestForwardedOnce(t *testing.T) {
	requirePeersOrSkip(t)
	cases := []struct {
		name   string
		header [][2]string
	}{
		{"Idempotency-Key", [][2]string{{"Idempotency-Key", "k1"}}},
		{"X-Idempotency-Key", [][2]string{{"X-Idempotency-Key", "k2"}}},
		{"idempotency-key in lower case", [][2]string{{"idempotency-key", "k3"}}},
		{"both, empty values", [][2]string{{"Idempotency-Key", ""}, {"X-Idempotency-Key", ""}}},
		{"neither", nil},
	}
	doors := map[string]func(t *testing.T) (onceDoor, *losingHop){"mcp": mcpOnceDoor, "a2a": a2aOnceDoor}
	for name, build := range doors {
		t.Run(name, func(t *testing.T) {
			send, hop := build(t)
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					marker := fmt.Sprintf("once-%s-%d", name, i)
					status := send(t, marker, c.header)
					s := hop.of(marker)
					if !s.reused {
						t.Fatalf("the request came on a fresh upstream connection (HTTP %d): nothing to send again", status)
					}
					if s.n != 1 {
						t.Errorf("the upstream received it %d times (the client got HTTP %d), want once", s.n, status)
					}
					if status != http.StatusBadGateway {
						t.Errorf("HTTP %d, want 502 (its answer was lost)", status)
					}
					for _, kv := range c.header {
						if got, ok := s.header[http.CanonicalHeaderKey(kv[0])]; !ok || got[0] != kv[1] {
							t.Errorf("the upstream read %s as %q, want %q as sent", kv[0], got, kv[1])
						}
					}
				})
			}
		})
	}
}

// requirePeersOrSkip is peer's check, for a test that starts several.
func requirePeersOrSkip(t *testing.T) {
	t.Helper()
	peer(t, "test/peers/mcp/node_modules/@modelcontextprotocol/sdk/package.json")
	peer(t, ".peers/bin/a2a-go-server")
}

// mcpOnceDoor: bin/warden's MCP sidecar in front of the TypeScript SDK's
// server (JSON answers); the marked request is a tools/call of echo, which
// the server counts.
func mcpOnceDoor(t *testing.T) (onceDoor, *losingHop) {
	upstream := startNodeMCP(t, "JSON_RESP=1")
	hop, front := startLosingHop(t, upstream)
	base, _ := startMCPWarden(t, front)
	post := func(sid, body string, header [][2]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		for _, kv := range header {
			req.Header[kv[0]] = append(req.Header[kv[0]], kv[1])
		}
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	code, sid := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"once","version":"0"}}}`, nil)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", code, sid)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	return func(t *testing.T, marker string, header [][2]string) int {
		var before, after map[string]int
		getJSON(t, upstream+"/debug/invocations", &before)
		if code, _ := post(sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); code != http.StatusOK {
			t.Fatalf("ping: HTTP %d", code)
		}
		code, _ := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+marker+`"}}}`, header)
		getJSON(t, upstream+"/debug/invocations", &after)
		if ran := after["echo"] - before["echo"]; ran != 1 {
			t.Errorf("the SDK's server ran echo %d times", ran)
		}
		return code
	}, hop
}

// a2aOnceDoor: bin/warden's A2A sidecar in front of the a2a-go server; the
// marked request is a SendMessage.
func a2aOnceDoor(t *testing.T) (onceDoor, *losingHop) {
	hop, front := startLosingHop(t, startA2AGo(t))
	base, _ := startA2AWardenProcess(t, front)
	post := func(body string, header [][2]string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/jsonrpc", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		for _, kv := range header {
			req.Header[kv[0]] = append(req.Header[kv[0]], kv[1])
		}
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	return func(t *testing.T, marker string, header [][2]string) int {
		if code := post(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`, nil); code != http.StatusOK {
			t.Fatalf("ListTasks: HTTP %d", code)
		}
		return post(`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"`+marker+`","role":"ROLE_USER","parts":[{"text":"`+marker+`"}]}}}`, header)
	}, hop
}

// TestSteerBoundUnanswered: a tasks/steer Warden forwarded holds its place
// in mcp.max_steer_queue whether or not its answer comes back, since the
// server may have queued it: neither a client that hangs up before the
// answer (the upstream request is then cancelled) nor an answer lost on
// the way gives it back. Before, both did (a steer whose answer Warden
// never saw was settled as refused), so with max_steer_queue 1 each of
// three steers reached the SEP-2669 fixture and it queued all three. A
// steer that is refused upstream still gives its place back
// (TestMCPSteerQueue holds the bound itself).
func TestSteerBoundUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold time.Duration // 0: the answer is lost; else held while the client hangs up
	}{
		{"the client hangs up", 3 * time.Second},
		{"the answer is lost", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upstream := startFixtureMCP(t)
			_, front := startHop(t, upstream, tc.hold)
			cfg := filepath.Join(t.TempDir(), "warden.yaml")
			if err := os.WriteFile(cfg, []byte("mcp:\n  max_steer_queue: 1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			warden, _ := startMCPWarden(t, front, "--config", cfg)
			alice := mcpClient{t, warden, "alice"}
			h := alice.create(2, 10000) // no step (no safe point) for 10 s
			client := &http.Client{Timeout: 500 * time.Millisecond}
			for i := range 3 {
				params := map[string]any{"taskId": h, "message": fmt.Sprintf("once-steer-%d", i), "_meta": extMeta}
				body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tasks/steer", "params": params})
				r, err := alice.postWith(client, body, "tasks/steer", params, nil)
				t.Logf("steer %d: HTTP %d %+v, err %v", i, r.HTTP, r.Error, err)
			}
			if n := count(upstreamRequests(t, upstream), "tasks/steer by alice"); n != 1 {
				t.Errorf("the server received %d steers with max_steer_queue 1, want 1", n)
			}
			alice.call("tasks/cancel", map[string]any{"taskId": h}, nil)
		})
	}
}
