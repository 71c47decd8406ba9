package extauthz

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/redistest"
	"github.com/agentwarden/warden/proxy/state"
)

// TestMCPSessionBound: an MCP session id is bound to the first principal
// that presents it, and every other principal's request on it, whatever it
// is (the GET stream, resumed or not, DELETE, an answer to the server's
// request, a request), is refused as the sidecar refuses another's session:
// 404, JSON-RPC -32001 "Session not found", the upstream not asked. Its
// owner's own requests pass. Through one replica, and through two sharing
// the owner table in Redis (alice on one, bob on the other). Before, every
// one of bob's was allowed: the id was a bearer secret.
func TestMCPSessionBound(t *testing.T) {
	one := mcpReplica(t, nil)
	addr, _, _ := redistest.Start(t)
	store, err := state.New(state.Config{URL: "redis://" + addr, Prefix: "extauthz-session:", Timeout: 10 * time.Second}) // not the 200 ms default, which -race on a loaded machine can outlast; not what this test is about
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	shared := [2]*Server{mcpReplica(t, store), mcpReplica(t, store)}

	answer := `{"jsonrpc":"2.0","id":0,"result":{"action":"accept"}}`
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"abc"}}`
	requests := []struct {
		name, method, body string
		extra              map[string]string
	}{
		{"GET stream", "GET", "", nil},
		{"GET with Last-Event-ID", "GET", "", map[string]string{"last-event-id": "ev-1"}},
		{"DELETE", "DELETE", "", nil},
		{"POST answer", "POST", answer, nil},
		{"POST request", "POST", call, map[string]string{"mcp-name": "echo"}},
		{"POST decided request", "POST", get, nil},
	}
	for _, door := range []struct {
		name       string
		alice, bob *Server
		sid        string
	}{
		{"one replica", one, one, "sid-one"},
		{"two replicas in Redis", shared[0], shared[1], "sid-shared"},
	} {
		t.Run(door.name, func(t *testing.T) {
			check := func(srv *Server, who, sid string, i int) (bool, int, string) {
				r := requests[i]
				extra := map[string]string{"authorization": "Bearer " + who, "mcp-session-id": sid}
				for k, v := range r.extra {
					extra[k] = v
				}
				resp, err := srv.Check(context.Background(), mcpCheck(r.method, r.body, extra))
				if err != nil {
					t.Fatal(err)
				}
				dr := resp.GetDeniedResponse()
				return dr == nil, int(dr.GetStatus().GetCode()), dr.GetBody()
			}
			// alice uses her session first: the request after initialize
			if ok, status, body := check(door.alice, "alice", door.sid, 0); !ok {
				t.Fatalf("alice's first use of her session: %d %s", status, body)
			}
			for i, r := range requests {
				if ok, status, body := check(door.bob, "bob", door.sid, i); ok || status != 404 || !json.Valid([]byte(body)) ||
					!strings.Contains(body, `"code":-32001`) || !strings.Contains(body, "Session not found") {
					t.Errorf("bob's %s on alice's session: allowed=%v %d %s, want 404 -32001 Session not found", r.name, ok, status, body)
				}
				if ok, status, body := check(door.alice, "alice", door.sid, i); !ok {
					t.Errorf("alice's %s on her session: %d %s", r.name, status, body)
				}
				// bob's own session, used by him first, is his
				if ok, status, body := check(door.bob, "bob", door.sid+"-bob", i); !ok {
					t.Errorf("bob's %s on his session: %d %s", r.name, status, body)
				}
			}
		})
	}
}

// BenchmarkCheckMCPSession measures Check for an allowed tasks/get on a
// session its principal holds, with the owner table in memory and shared
// in Redis (a real redis-server): the session's owner is read from the
// replica's table, not the store, on every request but one a second.
func BenchmarkCheckMCPSession(b *testing.B) {
	addr, _, _ := redistest.Start(b)
	store, err := state.New(state.Config{URL: "redis://" + addr, Prefix: "extauthz-bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"4f1c2b7e9a0d4c3b8e6f5a1d2c3b4a59"}}`
	req := mcpCheck("POST", get, map[string]string{"authorization": "Bearer alice", "mcp-session-id": "sid-bench"})
	for _, door := range []struct {
		name string
		srv  *Server
	}{{"memory", mcpReplica(b, nil)}, {"redis", mcpReplica(b, store)}} {
		b.Run(door.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := door.srv.Check(context.Background(), req)
				if err != nil || resp.GetDeniedResponse() != nil {
					b.Fatal(err, resp.GetDeniedResponse().GetBody())
				}
			}
		})
	}
}
