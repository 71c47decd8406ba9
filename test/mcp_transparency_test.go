package test

import (
	"fmt"
	"slices"
	"strings"
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
// task of its own shows that task in its owner's tasks/list, and not in
// another principal's; an answer over mcp.max_response_bytes is an error
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
			// lists it, and through Warden so does its owner's.
			if len(direct.Tasks) != 1 {
				t.Fatalf("direct tasks/list %+v, want the implicit task", direct.Tasks)
			}
			if len(through.Tasks) != 1 || !strings.HasPrefix(through.Tasks[0].TaskID, "wt2.") {
				t.Errorf("alice's tasks/list through Warden %+v, want her implicit task as a handle", through.Tasks)
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
			w.mu.Lock()
			logged := strings.Contains(w.out.String(), "over mcp.max_response_bytes")
			w.mu.Unlock()
			if !logged {
				t.Errorf("%v: Warden logged nothing about the bound", env)
			}
		}
	})
	t.Run("implicit task not another's", func(t *testing.T) {
		upstream := startNodeMCP(t, "LEAKY=1")
		warden, _ := startMCPWarden(t, upstream)
		a := runProbe(t, warden, "alice")
		b := runProbe(t, warden, "bob")
		if len(a.Tasks) != 1 {
			t.Errorf("alice's tasks/list %+v, want her implicit task", a.Tasks)
		}
		// The leaky server lists alice's task to bob too; Warden shows
		// him his own only.
		if len(b.Tasks) != 1 || len(a.Tasks) == 1 && b.Tasks[0].TaskID == a.Tasks[0].TaskID {
			t.Errorf("bob's tasks/list %+v (alice's %+v), want only his own", b.Tasks, a.Tasks)
		}
	})
}

// TestMCPDryRun: with --dry-run, Warden forwards every request as the server
// would receive it without Warden and shows the client what the server
// answered (the leaky server's lists unfiltered, bob's read of alice's task
// answered as direct), and logs each refusal it would have made.
func TestMCPDryRun(t *testing.T) {
	upstream := startNodeMCP(t, "LEAKY=1")
	direct := runSDKClient(t, upstream)
	warden, w := startMCPWarden(t, upstream, "--dry-run")
	r := runSDKClient(t, warden)
	if _, refused := asErr(r.BGetA); refused {
		t.Errorf("bob's tasks/get of alice's task in dry run: %s, want the server's answer (direct: %s)", r.BGetA, direct.BGetA)
	}
	// The leaky server lists every task to everyone, the direct run's too.
	if !slices.Contains(r.BList, r.Created) || !slices.Contains(r.AList, r.BCreated) || !slices.Contains(r.BList, direct.Created) {
		t.Errorf("tasks/list in dry run: alice %v bob %v, want unfiltered as the server answers (alice's %s and bob's %s in both)", r.AList, r.BList, r.Created, r.BCreated)
	}
	if r.Final != "completed" || fmt.Sprint(r.Result) != "sum=42" {
		t.Errorf("alice's task in dry run: %q %v", r.Final, r.Result)
	}
	if strings.HasPrefix(r.Created, "wt2.") {
		t.Errorf("dry run handed out a handle %s, not the server's task ID", r.Created)
	}
	w.mu.Lock()
	log := w.out.String()
	w.mu.Unlock()
	for _, want := range []string{`"message_type":"tasks/get"`, `tasks/list would have shown`} {
		if !strings.Contains(log, want) || !strings.Contains(log, `"dry_run":true`) {
			t.Errorf("Warden's log lacks a dry-run refusal with %s", want)
		}
	}
}
