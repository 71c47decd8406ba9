package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	mcprules "github.com/agentwarden/warden/rules/mcp"
)

func TestImplicitCalls(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type call struct {
		principal  string
		start, end int // ms; end -1: still under way
		augmented  bool
		resolved   bool
	}
	tests := []struct {
		name    string
		max     int
		calls   []call
		created int
		owner   string
	}{
		{name: "one call", calls: []call{{"alice", 0, 300, false, false}}, created: 5, owner: "alice"},
		{name: "within skew", calls: []call{{"alice", 2000, 2300, false, false}}, created: 1500, owner: "alice"},
		{name: "no call then", calls: []call{{"alice", 0, 300, false, false}}, created: 5000},
		{name: "two principals at once", calls: []call{{"alice", 0, 300, false, false}, {"bob", 100, 400, false, false}}, created: 150},
		{name: "two calls of one principal", calls: []call{{"alice", 0, 300, false, false}, {"alice", 100, 400, false, false}}, created: 150, owner: "alice"},
		{name: "a call still under way", calls: []call{{"alice", 0, -1, false, false}}, created: 60000, owner: "alice"},
		{name: "an unanswered task call under way", calls: []call{{"mallory", 0, -1, false, false}, {"alice", 100, 400, true, false}}, created: 150},
		{name: "a task call still open", calls: []call{{"mallory", 0, 900, false, false}, {"alice", 100, -1, true, false}}, created: 150},
		{name: "the server made the task after the caller left", calls: []call{{"mallory", 0, 90000, false, false}, {"alice", 100, 400, true, false}}, created: 60000},
		{name: "an answered task call does not block", calls: []call{{"mallory", 0, 900, false, false}, {"alice", 100, 400, true, true}}, created: 150, owner: "mallory"},
		{name: "long after an unanswered task call", calls: []call{{"alice", 100, 400, true, false}, {"mallory", 600000, 600100, false, false}}, created: 600050, owner: "mallory"},
		{name: "forgotten calls", max: 2, calls: []call{{"alice", 100, 400, true, false}, {"mallory", 0, 900, false, false}, {"bob", 5000, 5100, false, false}}, created: 150},
		{name: "a forgotten call still under way", max: 2, calls: []call{{"alice", 100, -1, true, false}, {"mallory", 200, 900, false, false}, {"bob", 5000, 5100, false, false}}, created: 5050},
		{name: "after what was forgotten", max: 2, calls: []call{{"alice", 100, 400, false, false}, {"mallory", 800, 900, false, false}, {"bob", 5000, 5100, false, false}}, created: 5050, owner: "bob"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newImplicitCalls()
			if tc.max > 0 {
				c.max = tc.max
			}
			for _, k := range tc.calls {
				rec := c.begin(k.principal, at(k.start), !k.augmented)
				if k.end >= 0 {
					c.end(rec, at(k.end), k.resolved)
				}
			}
			got, ok := c.owner(at(tc.created))
			if got != tc.owner || ok != (tc.owner != "") {
				t.Fatalf("owner = %q %v, want %q", got, ok, tc.owner)
			}
			if ok {
				if again, ok := c.owner(at(tc.created)); ok && len(tc.calls) == 1 {
					t.Fatalf("a claimed call gave a second task to %q", again)
				}
			}
		})
	}
}

// TestImplicitCallsForgottenOpen: a call forgotten while under way blocks
// every placement until it ends, then its window as any other's.
func TestImplicitCallsForgottenOpen(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := newImplicitCalls()
	c.max = 1
	alice := c.begin("alice", at(100), false) // a task call, still open
	c.begin("bob", at(5000), true)            // pushes alice's out
	for _, step := range []struct {
		end     bool // alice's call ends first, at 400 ms
		created int
		owner   string
	}{
		{false, 5050, ""},
		{false, 900000, ""},
		{true, 5050, ""},      // within alice's window and its 5 min of lateness
		{true, 900000, "bob"}, // after it
	} {
		if step.end && alice.end == 0 {
			c.end(alice, at(400), false)
		}
		if got, _ := c.owner(at(step.created)); got != step.owner {
			t.Errorf("alice's call ended %v, task at %d ms: owner %q, want %q", step.end, step.created, got, step.owner)
		}
	}
}

// holdUpstream is an MCP server whose tools/call answers when the test says:
// a plain call of "slow" (taskSupport optional) waits for release, and a
// task-augmented one creates its task, says so on created, and then answers
// as ending tells (after its caller went away, too large, or at once).
type holdUpstream struct {
	release chan struct{}
	plain   chan struct{} // closed when the plain call arrived
	created chan struct{}
	ending  string // "gone", "big" or "" (answers)
	// implicit makes a plain call create a task of its own.
	implicit bool

	mu    sync.Mutex
	tasks []map[string]any
}

func (u *holdUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string          `json:"name"`
			Task json.RawMessage `json:"task"`
		} `json:"params"`
	}
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &m) != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	newTask := func(id string) map[string]any {
		tk := map[string]any{"taskId": id, "status": mcprules.StatusWorking, "createdAt": time.Now().UTC().Format(time.RFC3339Nano)}
		u.mu.Lock()
		u.tasks = append(u.tasks, tk)
		u.mu.Unlock()
		return tk
	}
	switch {
	case m.Method == mcprules.MethodToolsList:
		writeJSON(w, m.ID, map[string]any{"tools": []any{map[string]any{"name": "slow", "execution": map[string]any{"taskSupport": "optional"}}, map[string]any{"name": "fast"}}})
	case m.Method == mcprules.MethodToolsCall && m.Params.Name == "fast":
		// Listed without taskSupport, run as a task all the same (the
		// server's list changed).
		newTask("alice-task")
		close(u.created)
		writeJSON(w, m.ID, map[string]any{"content": []any{}})
	case m.Method == mcprules.MethodToolsCall && m.Params.Task != nil:
		tk := newTask("alice-task")
		close(u.created)
		switch u.ending {
		case "gone":
			<-r.Context().Done()
		case "big":
			writeJSON(w, m.ID, map[string]any{"task": tk, "pad": strings.Repeat("x", 8<<10)})
		default:
			writeJSON(w, m.ID, map[string]any{"task": tk})
		}
	case m.Method == mcprules.MethodToolsCall:
		if u.implicit {
			newTask("implicit-task")
		}
		close(u.plain)
		select {
		case <-u.release:
		case <-r.Context().Done():
		}
		writeJSON(w, m.ID, map[string]any{"content": []any{}})
	case m.Method == mcprules.MethodList:
		u.mu.Lock()
		list := append([]map[string]any(nil), u.tasks...)
		u.mu.Unlock()
		writeJSON(w, m.ID, map[string]any{"tasks": list})
	default:
		writeJSON(w, m.ID, map[string]any{})
	}
}

// TestImplicitTaskNotGuessed: while mallory holds a plain call of an
// optional tool open, alice makes a task whose answer Warden never reads;
// mallory's tasks/list must not get it (nor anyone's, as its owner cannot
// be told). A task the plain call itself made is still its caller's.
func TestImplicitTaskNotGuessed(t *testing.T) {
	tests := []struct {
		name     string
		ending   string
		tool     string // alice's tool: "slow" with a task, or "fast" plainly
		implicit bool   // mallory's plain call makes a task itself; alice makes none
		mallory  int    // tasks in mallory's list
		alice    int
	}{
		{name: "alice's client went away", ending: "gone", tool: "slow"},
		{name: "alice's answer over the limit", ending: "big", tool: "slow"},
		{name: "alice's answer read", tool: "slow", alice: 1},
		{name: "alice's plain call of a tool listed without tasks", tool: "fast"},
		{name: "the plain call's own task", implicit: true, mallory: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := &holdUpstream{release: make(chan struct{}), plain: make(chan struct{}), created: make(chan struct{}), ending: tc.ending, implicit: tc.implicit}
			upSrv := httptest.NewServer(up)
			t.Cleanup(upSrv.Close)
			var cfg Config
			cfg.MaxResponseBytes = 4 << 10
			h := newHarnessFor(t, cfg, nil, upSrv)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // mallory's plain call, held open
				defer wg.Done()
				h.post(t, "mallory", rpc(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}}), nil)
			}()
			<-up.plain
			if !tc.implicit {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					params := map[string]any{"name": tc.tool, "arguments": map[string]any{}}
					if tc.tool == "slow" {
						params["task"] = map[string]any{"ttl": 60000}
					}
					body := rpc(7, "tools/call", params)
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.front.URL+"/mcp", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer alice")
					req.Header.Set("Content-Type", "application/json")
					if resp, err := h.front.Client().Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}()
				<-up.created
				if tc.ending == "gone" {
					cancel()
				}
				<-done
				cancel()
			}
			close(up.release)
			wg.Wait()
			for who, want := range map[string]int{"mallory": tc.mallory, "alice": tc.alice} {
				r := h.post(t, who, rpc(2, "tasks/list", map[string]any{}), nil)
				list, _ := r.result(t)["tasks"].([]any)
				if len(list) != want {
					t.Errorf("%s's tasks/list: %s, want %d task(s)", who, r.body, want)
				}
			}
		})
	}
}

// BenchmarkImplicitCalls is what every tools/call pays (begin and end with
// the record full), and what a tasks/list pays per task no answer named.
func BenchmarkImplicitCalls(b *testing.B) {
	c := newImplicitCalls()
	t0 := time.Now()
	for i := range c.max {
		c.end(c.begin("p", t0.Add(time.Duration(i)*time.Millisecond), true), t0.Add(time.Duration(i)*time.Millisecond+time.Microsecond), false)
	}
	at := t0.Add(time.Duration(c.max) * time.Millisecond)
	b.Run("call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			at = at.Add(time.Millisecond)
			c.end(c.begin("p", at, true), at.Add(time.Microsecond), false)
		}
	})
	b.Run("owner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.owner(at.Add(-5 * time.Second)) // within the record: a full scan
		}
	})
}
