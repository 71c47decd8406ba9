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

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/mcp"
)

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
		tk := map[string]any{"taskId": id, "status": mcp.StatusWorking, "createdAt": time.Now().UTC().Format(time.RFC3339Nano)}
		u.mu.Lock()
		u.tasks = append(u.tasks, tk)
		u.mu.Unlock()
		return tk
	}
	switch {
	case m.Method == mcp.MethodToolsList:
		writeJSON(w, m.ID, map[string]any{"tools": []any{map[string]any{"name": "slow", "execution": map[string]any{"taskSupport": "optional"}}, map[string]any{"name": "fast"}}})
	case m.Method == mcp.MethodToolsCall && m.Params.Name == "fast":
		// Listed without taskSupport, run as a task all the same (the
		// server's list changed).
		newTask("alice-task")
		close(u.created)
		writeJSON(w, m.ID, map[string]any{"content": []any{}})
	case m.Method == mcp.MethodToolsCall && m.Params.Task != nil:
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
	case m.Method == mcp.MethodToolsCall:
		if u.implicit {
			newTask("implicit-task")
		}
		close(u.plain)
		select {
		case <-u.release:
		case <-r.Context().Done():
		}
		writeJSON(w, m.ID, map[string]any{"content": []any{}})
	case m.Method == mcp.MethodList:
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
// be told). A task the plain call itself made, which no answer names, is
// nobody's too: an owner is never guessed from the time (issue 24 item 4:
// through a second replica or after a restart the only call in flight may
// be another principal's; the old code gave mallory that task).
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
		{name: "the plain call's own task", implicit: true},
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

// taskCreated records that the answer to owner's own tools/call created
// task id, as the answer filter does through the call's decision.
func taskCreated(e *proxy.Enforcer, id, owner, status string) {
	d, err := tasks.New(e).Enforce(context.Background(), tasks.Request{Principal: authn.Principal{ID: owner, Method: string(authn.MethodDev)},
		Call: mcp.Call{Kind: mcp.KindRequest, ID: []byte(`1`), Method: mcp.MethodToolsCall}})
	if err != nil {
		panic(err)
	}
	defer d.Settle(true)
	_, _ = d.Learn(context.Background(), owners.Fact{Key: owners.Key{Kind: owners.MCPTask, ID: id}, Created: true, Status: status})
}

// taskObserved records a status an answer reported for task id.
func taskObserved(e *proxy.Enforcer, id, status string) {
	_, _ = tasks.New(e).Observe(context.Background(), owners.Fact{Key: owners.Key{Kind: owners.MCPTask, ID: id}, Status: status})
}

// taskOwner returns whose task id is, and whether Warden knows (a store
// that cannot be read: unknown).
func taskOwner(e *proxy.Enforcer, id string) (string, bool) {
	o, err := e.Owners(context.Background(), "", owners.Key{Kind: owners.MCPTask, ID: id})
	if err != nil || o[0] == "" {
		return "", false
	}
	return o[0], true
}
