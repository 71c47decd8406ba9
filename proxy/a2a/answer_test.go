package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/a2a"
)

// TestHostileAnswers: an answer hands the caller handles only for what is
// the caller's. An agent that echoes another tenant's ids (in a result, an
// event, a history or status message, referenceTaskIds, a push config)
// hands nothing over: the answer about another's task is TaskNotFoundError,
// a stray id inside the caller's own task is left out, and no answer
// teaches Warden that another's task is the caller's. Answers that are not
// one JSON-RPC answer (an error with a result, a member in another case)
// never pass.
func TestHostileAnswers(t *testing.T) {
	const notFound = `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}`
	type want struct {
		body    string   // exact body ("" when not compared)
		has     []string // substrings of the body
		hasNot  []string
		handles int // handles in the body (-1: not counted)
	}
	task := func(id, ctx string, extra string) string {
		return `{"id":"` + id + `","contextId":"` + ctx + `","status":{"state":"TASK_STATE_COMPLETED"}` + extra + `}`
	}
	answer := func(result string) string { return `{"jsonrpc":"2.0","id":7,"result":` + result + `}` }
	msg := func(fields string) string {
		return `{"messageId":"a1","role":"ROLE_AGENT","parts":[{"text":"hi"}]` + fields + `}`
	}
	tests := []struct {
		name    string
		method  string
		params  func(own string) map[string]any // own: bob's own task handle
		upChunk string                          // what the upstream answers (%s: bob's own upstream task id)
		want    want
	}{
		{"send answered with another's task", "SendMessage", send, answer(`{"task":` + task("task-1", "ctx-9", "") + `}`), want{body: notFound}},
		{"send answered in another's context", "SendMessage", send, answer(`{"task":` + task("task-9", "ctx-1", "") + `}`), want{body: notFound}},
		{"0.3 send result: another's task", "SendMessage", send, answer(task("task-1", "ctx-1", "")), want{body: notFound}},
		{"history names another's task, context and reference", "SendMessage", send,
			answer(`{"task":` + task("task-9", "ctx-9", `,"history":[`+msg(`,"taskId":"task-1","contextId":"ctx-1","referenceTaskIds":["task-1","task-9"]`)+`]`) + `}`),
			want{hasNot: []string{`"task-1"`, `"ctx-1"`}, has: []string{`"referenceTaskIds":["wt`}, handles: 3}},
		{"status message names another's task", "SendMessage", send,
			answer(`{"task":{"id":"task-9","contextId":"ctx-9","status":{"state":"TASK_STATE_INPUT_REQUIRED","message":` + msg(`,"taskId":"task-1","contextId":"ctx-1","referenceTaskIds":["task-1"]`) + `}}}`),
			want{hasNot: []string{`"task-1"`, `"ctx-1"`, `"taskId"`}, has: []string{`"referenceTaskIds":[]`}, handles: 2}},
		{"reply message references another's task", "SendMessage", send, answer(`{"message":` + msg(`,"referenceTaskIds":["task-1"]`) + `}`),
			want{has: []string{`"referenceTaskIds":[]`}, handles: 0}},
		{"reply message in another's context", "SendMessage", send, answer(`{"message":` + msg(`,"contextId":"ctx-1"`) + `}`), want{body: notFound}},
		{"reply message names another's task", "SendMessage", send, answer(`{"message":` + msg(`,"taskId":"task-1"`) + `}`), want{body: notFound}},
		{"message to bob's task answered about another task", "SendMessage", continueOwn, answer(`{"task":` + task("task-77", "ctx-2", "") + `}`), want{body: notFound}},
		{"send stream: a second task after the one it created", "SendStreamingMessage", send,
			"data: " + answer(`{"task":`+task("task-9", "ctx-9", "")+`}`) + "\n\n" +
				"data: " + answer(`{"statusUpdate":{"taskId":"task-77","contextId":"ctx-9","status":{"state":"TASK_STATE_COMPLETED"}}}`) + "\n\n",
			want{has: []string{`"code":-32001`}, hasNot: []string{`"task-77"`}, handles: 2}},
		{"0.3 event of another's task", "SendMessage", send,
			answer(`{"kind":"status-update","taskId":"task-1","contextId":"ctx-1","status":{"state":"working"},"final":false}`), want{body: notFound}},
		{"0.3 event of another's task in the message's context", "SendMessage", send,
			answer(`{"kind":"status-update","taskId":"task-1","contextId":"ctx-9","status":{"state":"working"}}`), want{body: notFound}},
		{"0.3 message in another's context", "SendMessage", send, answer(`{"kind":"message","messageId":"r","role":"agent","contextId":"ctx-1"}`), want{body: notFound}},
		{"0.3 event of the task it created", "SendMessage", send,
			answer(`{"kind":"status-update","taskId":"task-9","contextId":"ctx-9","status":{"state":"completed"}}`), want{hasNot: []string{`"task-9"`, `"ctx-9"`}, handles: 2}},
		{"a result with no member Warden reads", "SendMessage", send, answer(`{"kind":"task-ref","task_id":"task-1"}`),
			want{has: []string{`"code":-32603`}, hasNot: []string{"task-1"}}},
		{"a task member that is not an object", "SendMessage", send, answer(`{"task":"task-1"}`),
			want{has: []string{`"code":-32603`}, hasNot: []string{"task-1"}}},
		{"SubscribeToTask: an event with no member Warden reads is dropped", "SubscribeToTask", byID,
			"data: " + answer(`{"task":`+task("%s", "ctx-2", "")+`}`) + "\n\n" +
				"data: " + answer(`{"kind":"task-ref","ref":"task-1","ctx":"ctx-1"}`) + "\n\n",
			want{hasNot: []string{"task-1", "ctx-1", "task-ref"}, handles: 2}},
		{"GetTask answered with another's task", "GetTask", byID, answer(task("task-1", "ctx-1", "")), want{body: notFound}},
		{"GetTask answered with an unknown task", "GetTask", byID, answer(task("task-77", "ctx-77", "")), want{body: notFound}},
		{"CancelTask answered with another task", "CancelTask", byID, answer(task("task-1", "ctx-1", "")), want{body: notFound}},
		{"SubscribeToTask: an event about another's task ends the stream", "SubscribeToTask", byID,
			"data: " + answer(`{"task":`+task("%s", "ctx-2", "")+`}`) + "\n\n" +
				"data: " + answer(`{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}`) + "\n\n" +
				"data: " + answer(`{"task":`+task("task-1", "ctx-1", "")+`}`) + "\n\n",
			want{has: []string{`"code":-32001`}, hasNot: []string{`"task-1"`, `"ctx-1"`}, handles: 2}},
		{"send stream: an artifact update of another's task", "SendStreamingMessage", send,
			"data: " + answer(`{"artifactUpdate":{"taskId":"task-1","contextId":"ctx-1","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`) + "\n\n",
			want{has: []string{`"code":-32001`}, hasNot: []string{`"task-1"`}, handles: 0}},
		{"an error with a result", "GetTask", byID, `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"x"},"result":` + task("task-1", "ctx-1", "") + `}`,
			want{has: []string{`"code":-32603`, "could not be matched"}, hasNot: []string{"task-1"}}},
		{"a null error with a result", "GetTask", byID, `{"jsonrpc":"2.0","id":7,"error":null,"result":` + task("task-1", "ctx-1", "") + `}`,
			want{has: []string{`"code":-32603`}, hasNot: []string{"task-1"}}},
		{"an error that is not an object", "GetTask", byID, `{"jsonrpc":"2.0","id":7,"error":"x"}`, want{has: []string{`"code":-32603`}}},
		{"the result spelled in another case", "GetTask", byID, `{"jsonrpc":"2.0","id":7,"Result":` + task("task-1", "ctx-1", "") + `}`,
			want{has: []string{`"code":-32603`}, hasNot: []string{"task-1"}}},
		{"push config of another task", "CreateTaskPushNotificationConfig", push, answer(`{"id":"p","taskId":"task-1","url":"https://hooks.example.com/"}`), want{body: notFound}},
		{"push configs of another task left out", "ListTaskPushNotificationConfigs", byTaskID,
			answer(`{"configs":[{"id":"p1","taskId":"task-1","url":"https://a.example/"},{"id":"p2","taskId":"%s","url":"https://b.example/"}]}`),
			want{has: []string{"b.example"}, hasNot: []string{"a.example", "task-1"}, handles: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			alice := h.send(t, "alice", "input secret") // task-1 in ctx-1
			own := h.send(t, "bob", "input mine")       // task-2 in ctx-2
			// The contexts are Warden's (fresh for a message naming none):
			// ctx-1 is alice's, ctx-2 bob's, ctx-9 the one Warden gave
			// bob's message.
			aliceCtx, bobCtx := upstreamContext(t, h, "alice", alice), upstreamContext(t, h, "bob", own)
			ids := func(s, msgCtx string) string {
				return strings.NewReplacer("%s", "task-2", "ctx-1", aliceCtx, "ctx-2", bobCtx, "ctx-9", msgCtx).Replace(s)
			}
			h.up.hostile = func(method string, p map[string]any) string {
				if method != tc.method {
					return ""
				}
				msg, _ := p["message"].(map[string]any)
				c, _ := msg["contextId"].(string)
				return ids(tc.upChunk, c)
			}
			p, _ := json.Marshal(tc.params(own["id"].(string)))
			_, body := h.rpc(t, "bob", fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, tc.method, p))
			if tc.want.body != "" && body != tc.want.body {
				t.Fatalf("answer %s, want %s", body, tc.want.body)
			}
			for _, s := range tc.want.has {
				if !strings.Contains(body, s) {
					t.Errorf("answer %s lacks %s", body, s)
				}
			}
			for _, s := range tc.want.hasNot {
				if s = ids(s, "ctx-9"); strings.Contains(body, s) {
					t.Errorf("answer %s holds %s", body, s)
				}
			}
			if n := strings.Count(body, handle.Prefix); tc.want.body == "" && tc.want.handles >= 0 && n != tc.want.handles {
				t.Errorf("answer %s holds %d handles, want %d", body, n, tc.want.handles)
			}
			// No handle bob got opens alice's task, and she still owns it.
			h.up.hostile = nil
			for _, hd := range handlesIn(body) {
				if id, ok := h.srv.handles.Open('t', "bob", hd); ok && id == "task-1" {
					t.Fatalf("bob was handed alice's task: %s", body)
				}
				if id, ok := h.srv.handles.Open('x', "bob", hd); ok && id == aliceCtx {
					t.Fatalf("bob was handed alice's context: %s", body)
				}
			}
			if o, err := a2aOwners(h.srv.enforcer, t.Context(), []string{"task-1"}); err != nil || o[0] != "alice" {
				t.Fatalf("alice's task now owned by %v", o)
			}
			if o, _ := a2aContextOwner(h.srv.enforcer, context.Background(), aliceCtx); o != "alice" {
				t.Fatalf("alice's context now owned by %q", o)
			}
			if _, m := h.call(t, "alice", "GetTask", map[string]any{"id": alice["id"]}); m["error"] != nil {
				t.Fatalf("alice lost her task: %v", m)
			}
		})
	}
}

func send(string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}}
}
func continueOwn(own string) map[string]any {
	m := send("")
	m["message"].(map[string]any)["taskId"] = own
	return m
}
func byID(own string) map[string]any     { return map[string]any{"id": own} }
func byTaskID(own string) map[string]any { return map[string]any{"taskId": own} }
func push(own string) map[string]any {
	return map[string]any{"taskId": own, "url": "https://hooks.example.com/"}
}

// handlesIn returns the handles a body holds.
func handlesIn(body string) []string {
	var out []string
	for _, part := range strings.Split(body, `"`) {
		if strings.HasPrefix(part, handle.Prefix) {
			out = append(out, part)
		}
	}
	return out
}

// TestOwnReferences: the caller's own referenced tasks, and the context a
// reply message starts, come back as handles that work (valid traffic
// stays valid).
func TestOwnReferences(t *testing.T) {
	h := newHarness(t, Config{})
	first := h.send(t, "alice", "hello")
	_, m := h.call(t, "alice", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m2", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "again"}}, "referenceTaskIds": []string{first["id"].(string)}}})
	hist := resultOf(t, m)["task"].(map[string]any)["history"].([]any)
	refs := hist[0].(map[string]any)["referenceTaskIds"].([]any)
	if len(refs) != 1 || refs[0] != first["id"] {
		t.Fatalf("her reference came back as %v, want [%s]", refs, first["id"])
	}
	// A reply message (no task) in the context Warden gave the message.
	h.up.hostile = func(method string, p map[string]any) string {
		if method == "SendMessage" {
			c := p["message"].(map[string]any)["contextId"].(string)
			return `{"jsonrpc":"2.0","id":7,"result":{"message":{"messageId":"r","role":"ROLE_AGENT","contextId":"` + c + `","parts":[{"text":"hi"}]}}}`
		}
		return ""
	}
	_, m = h.call(t, "alice", "SendMessage", send(""))
	ctx, _ := resultOf(t, m)["message"].(map[string]any)["contextId"].(string)
	if !strings.HasPrefix(ctx, handle.Prefix) {
		t.Fatalf("reply context %q is not a handle", ctx)
	}
	h.up.hostile = nil
	if _, m := h.call(t, "alice", "ListTasks", map[string]any{"contextId": ctx}); m["error"] != nil {
		t.Fatalf("her new context refused: %v", m)
	}
	if _, m := h.call(t, "bob", "ListTasks", map[string]any{"contextId": ctx}); errorCode(m) != -32001 {
		t.Fatalf("her new context for bob: %v", m)
	}
}

// upstreamContext is the upstream context of a task handed to who.
func upstreamContext(t *testing.T, h *harness, who string, task map[string]any) string {
	t.Helper()
	c, _ := task["contextId"].(string)
	id, ok := h.srv.handles.Open(byte(a2a.KindContext), who, c)
	if !ok {
		t.Fatalf("%s's context %q is not a handle of hers", who, c)
	}
	return id
}

// downStore is a shared task table that cannot be reached.
type downStore struct{}

var errDown = errors.New("store down")

func (downStore) Claim(context.Context, string, string, int) (string, string, int, error) {
	return "", "", 0, errDown
}
func (downStore) Create(context.Context, string, string, string, int) (string, int, error) {
	return "", 0, errDown
}
func (downStore) Observe(context.Context, string, string) error        { return errDown }
func (downStore) ObserveAll(context.Context, []string, []string) error { return errDown }
func (downStore) Steer(context.Context, string, int, string) (bool, int, error) {
	return false, 0, errDown
}
func (downStore) Unsteer(context.Context, string) error                      { return errDown }
func (downStore) Owners(context.Context, string, []string) ([]string, error) { return nil, errDown }

// TestAnswerOwnersUnreadable: when whose a new task is cannot be read (the
// shared store is down), the answer that would hand it over is Warden's
// retryable error, not a handle and not "Task not found".
func TestAnswerOwnersUnreadable(t *testing.T) {
	h := newHarnessWith(t, Config{}, newEnforcerOn(t, proxy.Config{}, downStore{}))
	_, m := h.call(t, "alice", "SendMessage", send(""))
	if errorCode(m) != -32603 {
		t.Fatalf("a new task with the store down: %v, want -32603", m)
	}
}

// TestStateReadOtherTask: the state Warden reads to decide (GetTask) must be
// the task's own; an answer about another task decides nothing.
func TestStateReadOtherTask(t *testing.T) {
	h := newHarness(t, Config{})
	h.send(t, "bob", "input x") // task-1, bob's
	h.up.hostile = func(method string, p map[string]any) string {
		if method == "GetTask" {
			return `{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}}`
		}
		return ""
	}
	// alice's task the upstream has and Warden never saw (a restart).
	hd := h.srv.handles.Seal('t', "alice", "task-9")
	status, m := h.call(t, "alice", "SubscribeToTask", map[string]any{"id": hd})
	if status != 503 || errorCode(m) != -32603 {
		t.Fatalf("subscribe decided on another task's state: %d %v", status, m)
	}
}

// FuzzAnswer feeds arbitrary answers to bob's exchanges of every method:
// nothing panics, what passes is JSON, and no handle in it opens alice's
// task or context.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-9","contextId":"ctx-9","history":[{"taskId":"task-1","contextId":"ctx-1","referenceTaskIds":["task-1","task-9"]}]}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"message":{"contextId":"ctx-1","referenceTaskIds":["task-1"]}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"statusUpdate":{"taskId":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING","message":{"taskId":"task-1"}}}}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"id":"task-1","contextId":"ctx-1"},{"id":"task-2","contextId":"ctx-1"}],"nextPageToken":"p"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"configs":[{"taskId":"task-1","url":"https://a/"}]}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"x"},"Result":{"id":"task-1"}}`,
	} {
		for m := range 8 {
			f.Add(uint8(m), []byte(s))
		}
	}
	methods := []string{"SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "SubscribeToTask", "ListTasks", "ListTaskPushNotificationConfigs", "CreateTaskPushNotificationConfig"}
	s := answerServer(f, "http://127.0.0.1:1/jsonrpc")
	f.Fuzz(func(t *testing.T, m uint8, data []byte) {
		method := methods[int(m)%len(methods)]
		x := &exchange{s: s, principal: "bob", call: a2a.Call{ID: json.RawMessage("7"), Method: method}}
		if method != "SendMessage" && method != "SendStreamingMessage" && method != "ListTasks" {
			x.taskID = "task-2"
			x.prove(a2a.KindTask, "task-2")
		}
		out, keep := x.fromUpstream(data)
		if !keep {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("passed %q as %q, not JSON", data, out)
		}
		for _, hd := range handlesIn(string(out)) {
			if id, ok := s.handles.Open(byte(a2a.KindTask), "bob", hd); ok && id == "task-1" {
				t.Fatalf("%s: bob got alice's task from %s: %s", method, data, out)
			}
			if id, ok := s.handles.Open(byte(a2a.KindContext), "bob", hd); ok && id == "ctx-1" {
				t.Fatalf("%s: bob got alice's context from %s: %s", method, data, out)
			}
		}
	})
}

// TestEvictedIDNotAdopted: with no shared store, an id the table evicted is
// nobody's: an answer to bob naming alice's forgotten task or context hands
// him nothing (without the memory of evictions it would have been his),
// and alice's handle still opens her task, which Warden then knows again.
func TestEvictedIDNotAdopted(t *testing.T) {
	const notFound = `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}`
	msg := `{"messageId":"a1","role":"ROLE_AGENT","parts":[{"text":"hi"}]`
	for _, tc := range []struct{ name, answer string }{
		{"her task", `{"task":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}`},
		{"her task in a new context", `{"task":{"id":"task-1","contextId":"ctx-new","status":{"state":"TASK_STATE_COMPLETED"}}}`},
		{"her context in a reply", `{"message":` + msg + `,"contextId":"ctx-1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No share of its own for a principal (4 of 4): carol's entries
			// evict alice's as many principals' would together.
			h := newHarnessWith(t, Config{}, newEnforcerWith(t, proxy.Config{Sessions: 4, SessionsPerPrincipal: 4}))
			alice := h.send(t, "alice", "input secret") // task-1 in ctx-1
			for range 2 {
				h.send(t, "carol", "hello") // task-1 and ctx-1 evicted
			}
			if o, _ := a2aOwners(h.srv.enforcer, t.Context(), []string{"task-1"}); o[0] != "" {
				t.Fatalf("task-1 still in the table (owner %q): the test evicts nothing", o[0])
			}
			h.up.hostile = func(method string, _ map[string]any) string {
				if method != "SendMessage" {
					return ""
				}
				return `{"jsonrpc":"2.0","id":7,"result":` + tc.answer + `}`
			}
			p, _ := json.Marshal(send(""))
			if _, body := h.rpc(t, "bob", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":`+string(p)+`}`); body != notFound {
				t.Fatalf("bob's answer naming alice's forgotten ids: %s, want %s", body, notFound)
			}
			h.up.hostile = nil
			if _, m := h.call(t, "alice", "GetTask", map[string]any{"id": alice["id"]}); m["error"] != nil {
				t.Fatalf("alice's handle after the eviction: %v", m)
			}
			if o, _ := a2aOwners(h.srv.enforcer, t.Context(), []string{"task-1"}); o[0] != "alice" {
				t.Fatalf("task-1 owner after alice used it: %q", o[0])
			}
		})
	}
}

// ownerStore is a shared task table in memory (owners and states, set if
// absent as proxy/state keeps them) that counts its round trips.
type ownerStore struct {
	mu     sync.Mutex
	owner  map[string]string
	state  map[string]string
	ops    int
	broken bool
}

func newOwnerStore() *ownerStore {
	return &ownerStore{owner: map[string]string{}, state: map[string]string{}}
}

func (s *ownerStore) op() error {
	s.ops++
	if s.broken {
		return errDown
	}
	return nil
}

func (s *ownerStore) Claim(_ context.Context, id, owner string, _ int) (string, string, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op(); err != nil {
		return "", "", 0, err
	}
	if s.owner[id] == "" {
		s.owner[id] = owner
	}
	return s.state[id], s.owner[id], 0, nil
}

func (s *ownerStore) Create(_ context.Context, id, owner, state string, _ int) (string, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op(); err != nil {
		return "", 0, err
	}
	if s.owner[id] == "" {
		s.owner[id] = owner
	}
	if state != "" && s.owner[id] == owner {
		s.state[id] = state
	}
	return s.owner[id], 0, nil
}

func (s *ownerStore) Observe(_ context.Context, id, state string) error {
	return s.ObserveAll(context.Background(), []string{id}, []string{state})
}

func (s *ownerStore) ObserveAll(_ context.Context, ids, states []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op(); err != nil {
		return err
	}
	for i, id := range ids {
		if s.owner[id] != "" {
			s.state[id] = states[i]
		}
	}
	return nil
}

func (s *ownerStore) Steer(context.Context, string, int, string) (bool, int, error) {
	return true, 0, nil
}
func (s *ownerStore) Unsteer(context.Context, string) error { return nil }

func (s *ownerStore) Owners(_ context.Context, _ string, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.op(); err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = s.owner[id]
	}
	return out, nil
}

func (s *ownerStore) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.ops }

// TestContextsAcrossReplicas: a context's owner is in the shared store, so
// a replica that never saw alice's context refuses an answer putting bob's
// new task in it (and records nothing of the task); a new task in a new
// context costs two round trips, one per id; the store down, the answer is
// -32603 retry.
func TestContextsAcrossReplicas(t *testing.T) {
	store := newOwnerStore()
	replica := func() *harness { return newHarnessWith(t, Config{}, newEnforcerOn(t, proxy.Config{}, store)) }
	first, other := replica(), replica()
	aliceCtx := upstreamContext(t, first, "alice", first.send(t, "alice", "input secret")) // task-1, through the first replica
	answer := func(task, ctx string) {
		other.up.hostile = func(method string, p map[string]any) string {
			if ctx == "" { // the context Warden gave the message
				ctx = p["message"].(map[string]any)["contextId"].(string)
			}
			return `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"` + task + `","contextId":"` + ctx + `","status":{"state":"TASK_STATE_WORKING"}}}}`
		}
	}
	bob := func() string {
		p, _ := json.Marshal(send(""))
		_, body := other.rpc(t, "bob", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":`+string(p)+`}`)
		return body
	}

	answer("task-50", "")
	before := store.count()
	if body := bob(); !strings.Contains(body, handle.Prefix) {
		t.Fatalf("bob's new task in a new context: %s", body)
	}
	if n := store.count() - before; n != 2 {
		t.Errorf("a new task in a new context: %d round trips to the store, want 2 (the context before forwarding, the task)", n)
	}

	answer("task-51", aliceCtx)
	if body := bob(); body != `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}` {
		t.Fatalf("bob's task in alice's context, on a replica that never saw it: %s", body)
	}
	if o, _ := store.Owners(t.Context(), "", []string{"a2a:t:task-51", "a2a:c:" + aliceCtx}); o[0] != "" || o[1] != "alice" {
		t.Fatalf("store owners after the refused answer: %q, want none for the task and alice for her context", o)
	}

	store.mu.Lock()
	store.broken = true
	store.mu.Unlock()
	answer("task-52", "")
	if body := bob(); !strings.Contains(body, `"code":-32603`) {
		t.Fatalf("a new context with the store down (not recorded, so not forwarded): %s, want -32603", body)
	}
}

// TestTakeoverInFlight: while alice's blocking SendMessage (naming no task
// and no context) is in flight, the agent answers bob about her context or
// her task (an agent that files a newcomer into the latest conversation).
// Warden gave her message a context of hers before forwarding it, so bob's
// answer hands him nothing (-32001), he cannot file a task into her
// context, and her own answer, when it comes, is hers. Without the fresh
// context the first answer naming it made it bob's.
func TestTakeoverInFlight(t *testing.T) {
	for _, tc := range []struct{ name, join string }{
		{"a reply in her context", `{"message":{"messageId":"r","role":"ROLE_AGENT","parts":[{"text":"joined"}],"contextId":"%c"}}`},
		{"her task", `{"task":{"id":"task-alice","contextId":"%c","status":{"state":"TASK_STATE_WORKING"}}}`},
		{"her task, no context", `{"task":{"id":"task-alice","status":{"state":"TASK_STATE_WORKING"}}}`},
		{"an event about her task", `{"statusUpdate":{"taskId":"task-alice","contextId":"%c","status":{"state":"TASK_STATE_WORKING"}}}`},
	} {
		for _, replicas := range []string{"one replica", "two replicas on one store"} {
			t.Run(tc.name+"/"+replicas, func(t *testing.T) {
				takeoverInFlight(t, tc.join, replicas != "one replica")
			})
		}
	}
}

// takeoverInFlight runs one case of TestTakeoverInFlight: alice through
// the first replica, bob through the second when there are two.
func takeoverInFlight(t *testing.T, join string, two bool) {
	const notFound = `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}`
	var h, b *harness // alice's replica, bob's
	if two {
		store := newOwnerStore()
		h = newHarnessWith(t, Config{}, newEnforcerOn(t, proxy.Config{}, store))
		b = newHarnessWith(t, Config{}, newEnforcerOn(t, proxy.Config{}, store))
	} else {
		h = newHarness(t, Config{})
		b = h
	}
	release, inFlight := make(chan struct{}), make(chan string, 1)
	h.up.hostile = func(method string, p map[string]any) string {
		msg, _ := p["message"].(map[string]any)
		parts, _ := msg["parts"].([]any)
		if len(parts) == 0 {
			return ""
		}
		text, _ := parts[0].(map[string]any)["text"].(string)
		c, _ := msg["contextId"].(string)
		switch text {
		case "wait": // alice's, in the context her message names (the server's own when none)
			if c == "" {
				c = "ctx-alice"
			}
			inFlight <- c
			<-release
			return `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-alice","contextId":"` + c + `","status":{"state":"TASK_STATE_COMPLETED"}}}}`
		case "join": // bob's: answered about alice's conversation
			return `{"jsonrpc":"2.0","id":7,"result":` + strings.ReplaceAll(join, "%c", <-inFlight) + `}`
		}
		return ""
	}
	b.up.hostile = h.up.hostile
	msg := func(text string, fields map[string]any) string {
		m := map[string]any{"messageId": "m-" + text, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
		for k, v := range fields {
			m[k] = v
		}
		p, _ := json.Marshal(map[string]any{"message": m})
		return `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":` + string(p) + `}`
	}
	done := make(chan string, 1)
	go func() { _, b := h.rpc(t, "alice", msg("wait", nil)); done <- b }()
	_, joined := b.rpc(t, "bob", msg("join", nil))
	if joined != notFound {
		t.Errorf("bob's answer about alice's conversation: %s, want %s", joined, notFound)
	}
	for _, hd := range handlesIn(joined) {
		_, got := b.rpc(t, "bob", msg("hello", map[string]any{"contextId": hd}))
		if strings.Contains(got, `"result"`) {
			t.Errorf("bob filed a task with %s: %s", hd, got)
		}
	}
	close(release)
	var a map[string]any
	if err := json.Unmarshal([]byte(<-done), &a); err != nil || a["error"] != nil {
		t.Fatalf("alice's own answer: %v (%v)", a, err)
	}
	task := resultOf(t, a)["task"].(map[string]any)
	if id, ok := h.srv.handles.Open(byte(a2a.KindTask), "alice", task["id"].(string)); !ok || id != "task-alice" {
		t.Fatalf("alice's task came back as %v", task["id"])
	}
	if o, err := a2aOwners(h.srv.enforcer, t.Context(), []string{"task-alice"}); err != nil || o[0] != "alice" {
		t.Fatalf("alice's task owned by %v (%v)", o, err)
	}
	if o, _ := a2aContextOwner(b.srv.enforcer, t.Context(), upstreamContext(t, h, "alice", task)); o != "alice" {
		t.Fatalf("alice's context owned by %q where bob asked", o)
	}
}

// TestStreamDropLeavesNoTrace: an event Warden withholds from a stream
// leaves nothing behind (issue 24 item 10): no blank event at its time, and
// no SSE id, whose gaps (a server's counter) would count the events
// withheld; A2A resumes with SubscribeToTask, not Last-Event-ID, so ids are
// left out. The old code sent "id: 2\n\n" for the dropped event and the ids.
func TestStreamDropLeavesNoTrace(t *testing.T) {
	h := newHarness(t, Config{})
	own := h.send(t, "bob", "input mine")
	bobCtx := upstreamContext(t, h, "bob", own)
	ownID, _ := h.srv.handles.Open(byte(a2a.KindTask), "bob", own["id"].(string))
	answer := func(result string) string { return `{"jsonrpc":"2.0","id":7,"result":` + result + `}` }
	mine := `{"id":"` + ownID + `","contextId":"` + bobCtx + `","status":{"state":"TASK_STATE_WORKING"}}`
	h.up.hostile = func(method string, _ map[string]any) string {
		if method != "SubscribeToTask" {
			return ""
		}
		return "data: " + answer(`{"task":`+mine+`}`) + "\nid: 1\n\n" +
			"data: " + answer(`{"kind":"task-ref","ref":"task-1"}`) + "\nid: 2\nretry: 500\n\n" +
			": keep-alive\n\n" +
			"data: " + answer(`{"statusUpdate":{"taskId":"`+ownID+`","contextId":"`+bobCtx+`","status":{"state":"TASK_STATE_COMPLETED"}}}`) + "\nid: 3\n\n"
	}
	_, body := h.rpc(t, "bob", fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"SubscribeToTask","params":{"id":%q}}`, own["id"]))
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	// The dropped event's retry, a setting of the stream, comes with the
	// next event sent.
	if len(events) != 3 || events[1] != "retry: 500\n: keep-alive" {
		t.Fatalf("events %q, want bob's two and the keep-alive", events)
	}
	for _, e := range events {
		if strings.Contains(e, "id:") || strings.Contains(e, "task-ref") {
			t.Fatalf("event %q tells of the dropped one", e)
		}
	}
}

// a2aOwners returns whose each A2A task is, "" unknown.
func a2aOwners(e *proxy.Enforcer, ctx context.Context, ids []string) ([]string, error) {
	keys := make([]owners.Key, len(ids))
	for i, id := range ids {
		keys[i] = owners.Key{Kind: owners.A2ATask, ID: id}
	}
	return e.Owners(ctx, "", keys...)
}

// a2aContextOwner returns whose an A2A context is, "" unknown.
func a2aContextOwner(e *proxy.Enforcer, ctx context.Context, id string) (string, error) {
	o, err := e.Owners(ctx, "", owners.Key{Kind: owners.A2AContext, ID: id})
	if err != nil {
		return "", err
	}
	return o[0], nil
}

// a2aSeen records that the answer to owner's own message created the task
// or context under key (with its state), as the answer filter does through
// the request's decision, and returns its owner afterwards.
func a2aSeen(e *proxy.Enforcer, ctx context.Context, key owners.Key, owner, state string) (string, error) {
	d, err := tenancy.New(e).Enforce(ctx, tenancy.Request{Principal: authn.Principal{ID: owner, Method: string(authn.MethodDev)}, Method: a2a.MethodSend, New: true})
	if err != nil {
		return "", err
	}
	defer d.Settle(true)
	o, err := d.Learn(ctx, owners.Fact{Key: key, Created: true, Status: state})
	if err != nil {
		return "", err
	}
	return o[0], nil
}
