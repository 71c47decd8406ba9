package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// probe is what test/peers/mcp/transparency.mjs reports.
type probe struct {
	Big []struct {
		Bytes int     `json:"bytes"`
		Ms    int     `json:"ms"`
		Len   int     `json:"len"`
		AllX  bool    `json:"allX"`
		Error *rpcErr `json:"error"`
	} `json:"big"`
	PlainSum any `json:"plainSum"`
	Tasks    []struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	} `json:"tasks"`
	Fatal any `json:"fatal"`
}

// runProbe runs the transparency probe as principal token against url.
func runProbe(t testing.TB, url, token string, sizes ...int) probe {
	t.Helper()
	var s []string
	for _, n := range sizes {
		s = append(s, fmt.Sprint(n))
	}
	var p probe
	runNode(t, "transparency.mjs", &p, "MCP_URL="+url+"/mcp", "TOKEN="+token, "SIZES="+strings.Join(s, ","))
	if p.Fatal != nil {
		t.Fatalf("transparency.mjs: %v", p.Fatal)
	}
	return p
}

// TestMCPTransparency drives the MCP TypeScript SDK server and client direct
// and through bin/warden and compares: tool results of 1, 5 and 20 MB pass
// whole in SSE (with an event store, so a dropped event would loop the
// client's resumption) and JSON modes; a plain call the server runs as a
// task of its own, which no answer names, is nobody's: no tasks/list shows
// it (its owner is never guessed, issue 24 item 4); an answer over mcp.max_response_bytes is an error
// for its request naming the limit, logged, and the session goes on.
func TestMCPTransparency(t *testing.T) {
	const mb = 1 << 20
	sizes := []int{1 * mb, 5 * mb, 20 * mb}
	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"sse", []string{"EVENT_STORE=1"}},
		{"json", []string{"JSON_RESP=1"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			upstream := startNodeMCP(t, mode.env...)
			direct := runProbe(t, upstream, "alice", sizes...)
			warden, _ := startMCPWarden(t, upstream)
			through := runProbe(t, warden, "alice", sizes...)
			for i, n := range sizes {
				d, w := direct.Big[i], through.Big[i]
				if d.Error != nil || d.Len != n {
					t.Fatalf("direct %d bytes: %+v", n, d)
				}
				if w.Error != nil || w.Len != n || !w.AllX {
					t.Errorf("through Warden %d bytes: len %d error %+v, want the whole text", n, w.Len, w.Error)
				}
				t.Logf("%s %2d MB: direct %4d ms, through Warden %4d ms", mode.name, n/mb, d.Ms, w.Ms)
			}
			if fmt.Sprint(direct.PlainSum) != "sum=3" || fmt.Sprint(through.PlainSum) != "sum=3" {
				t.Errorf("plain slow_sum: direct %v, through Warden %v", direct.PlainSum, through.PlainSum)
			}
			// The server ran the plain call as a task: direct its session
			// lists it; through Warden nobody's list does, as no answer
			// named it (the call's own answer is the tool's result).
			if len(direct.Tasks) != 1 {
				t.Fatalf("direct tasks/list %+v, want the implicit task", direct.Tasks)
			}
			if len(through.Tasks) != 0 {
				t.Errorf("alice's tasks/list through Warden %+v, want none: a task no answer named is nobody's", through.Tasks)
			}
		})
	}
	t.Run("bound", func(t *testing.T) {
		for _, env := range [][]string{{"EVENT_STORE=1"}, {"JSON_RESP=1"}} {
			upstream := startNodeMCP(t, env...)
			warden, w := startMCPWarden(t, upstream, "--mcp-max-response-bytes", fmt.Sprint(2*mb))
			p := runProbe(t, warden, "alice", 3*mb, 1*mb)
			e := p.Big[0].Error
			if e == nil || e.Code == nil || *e.Code != -32603 || !strings.Contains(e.Message, "mcp.max_response_bytes (2097152 bytes)") {
				t.Errorf("%v: 3 MB answer over a 2 MB bound: %+v, want -32603 naming mcp.max_response_bytes", env, p.Big[0])
			}
			if p.Big[0].Ms > 10000 {
				t.Errorf("%v: the error came after %d ms", env, p.Big[0].Ms)
			}
			if p.Big[1].Error != nil || p.Big[1].Len != 1*mb {
				t.Errorf("%v: the next call, within the bound: %+v", env, p.Big[1])
			}
			if !strings.Contains(w.output(), "over mcp.max_response_bytes") {
				t.Errorf("%v: Warden logged nothing about the bound", env)
			}
		}
	})
	t.Run("implicit task not another's", func(t *testing.T) {
		// Alice's and bob's plain calls, each through its own replica (no
		// --state, the same handle key): the replica bob uses sees only his
		// call under way when alice's task is created. The leaky server
		// lists every task to everyone. The old code placed the task on the
		// principal whose plain call was under way at createdAt, so bob got
		// alice's task with a handle sealed to him.
		upstream := startNodeMCP(t, "LEAKY=1")
		key := filepath.Join(t.TempDir(), "handle.key")
		if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-test-key"), 0o600); err != nil {
			t.Fatal(err)
		}
		w1, _ := startMCPWarden(t, upstream, "--mcp-handle-key-file", key)
		w2, _ := startMCPWarden(t, upstream, "--mcp-handle-key-file", key)
		var a, b probe
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); a = runProbe(t, w1, "alice") }()
		go func() { defer wg.Done(); b = runProbe(t, w2, "bob") }()
		wg.Wait()
		for who, p := range map[string]probe{"alice": a, "bob": b} {
			if len(p.Tasks) != 0 {
				t.Errorf("%s's tasks/list %+v, want none: a task no answer named is nobody's", who, p.Tasks)
			}
		}
		for _, w := range []string{w1, w2} {
			bob := mcpClient{t, w, "bob"}
			for _, tk := range append(a.Tasks, b.Tasks...) {
				if r := bob.call("tasks/get", map[string]any{"taskId": tk.TaskID}, nil); r.Error == nil {
					t.Errorf("bob's tasks/get of %s through %s: %+v, want refused", tk.TaskID, w, r.Result)
				}
			}
		}
	})
}
