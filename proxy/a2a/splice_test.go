package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	a2arules "github.com/agentwarden/warden/rules/a2a"
)

// answerCorpus is what the upstream answers bob in TestAnswerCorpus, per
// method: FuzzAnswer's seeds and TestHostileAnswers' shapes, with spacing,
// escapes, numbers and members Warden does not read.
var answerCorpus = []struct{ method, answer string }{
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING"}}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}}`},
	{"GetTask", ` { "jsonrpc" : "2.0" , "id" : 7 , "result" : { "id" : "task\u002d2" , "contextId" : "ctx-2" , "status" : { "state" : "TASK_STATE_INPUT_REQUIRED" , "message" : { "messageId" : "m1" , "role" : "ROLE_AGENT" , "taskId" : "task-2" , "contextId" : "ctx-1" , "referenceTaskIds" : [ "task-1" , "task-2" , 3 , "" ] , "parts" : [ { "text" : "<b>&amp;</b> \u2028 é" } ] } } , "artifacts" : [ { "artifactId" : "a" , "parts" : [ { "data" : { "n" : 1.50e3 , "taskId" : "task-1" } } ] } ] , "metadata" : { "x" : [ 1 , 2 , { } ] } } } `},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2","contextId":"ctx-2","history":[{"messageId":"u","role":"ROLE_USER","taskId":"task-2","contextId":"ctx-2"},{"messageId":"a","role":"ROLE_AGENT","taskId":"task-1","contextId":"ctx-1","referenceTaskIds":["task-1","task-9"]},7,null]}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2","contextId":""}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":null}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":[1]}`},
	{"GetTask", `{"jsonrpc":"2.0","id":8,"result":{"id":"task-2"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":"7","result":{"id":"task-2"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7.0,"result":{"id":"task-2"}}`},
	{"GetTask", `{"jsonrpc":"2.0","result":{"id":"task-2"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"x"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"x"},"Result":{"id":"task-1"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"error":null,"result":{"id":"task-1"}}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"error":"x"}`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2"}} x`},
	{"GetTask", `[{"jsonrpc":"2.0","id":7,"result":{"id":"task-2"}}]`},
	{"GetTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2","contextId":"ctx-2","extra":"\ud800"}}`},
	{"CancelTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_CANCELED"}}}`},
	{"CancelTask", `{"jsonrpc":"2.0","id":7,"result":{"id":"task-77","contextId":"ctx-2"}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-9","contextId":"ctx-9","status":{"state":"TASK_STATE_COMPLETED"},"history":[{"taskId":"task-1","contextId":"ctx-1","referenceTaskIds":["task-1","task-9"]}]}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"message":{"messageId":"r","role":"ROLE_AGENT","contextId":"ctx-9","referenceTaskIds":["task-2","task-1"]}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"message":{"contextId":"ctx-1","referenceTaskIds":["task-1"]}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"message":{"messageId":"r","role":"ROLE_AGENT","taskId":"task-2","contextId":"ctx-2"}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"kind":"status-update","taskId":"task-9","contextId":"ctx-9","status":{"state":"completed"}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"kind":"task","id":"task-9","contextId":"ctx-9","status":{"state":"completed"}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"kind":"message","messageId":"r","role":"agent","contextId":"ctx-9"}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"kind":"task-ref","task_id":"task-1"}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"task":"task-1"}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-9","contextId":"ctx-9"},"message":{"messageId":"r","taskId":"task-9","contextId":"ctx-9"}}}`},
	{"SendMessage", `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-9","contextId":"ctx-9","history":[{"messageId":"m","role":"ROLE_USER","contextId":"ctx-9","parts":[{"text":"hello"}]}]}}}`},
	{"SendStreamingMessage", `{"jsonrpc":"2.0","id":7,"result":{"statusUpdate":{"taskId":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING","message":{"taskId":"task-1"}}}}}`},
	{"SendStreamingMessage", `{"jsonrpc":"2.0","id":7,"result":{"artifactUpdate":{"taskId":"task-9","contextId":"ctx-9","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}}`},
	{"SendStreamingMessage", `{"jsonrpc":"2.0","id":7,"result":{"artifactUpdate":{"taskId":"task-1","contextId":"ctx-1"}}}`},
	{"SubscribeToTask", `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING"}}}}`},
	{"SubscribeToTask", `{"jsonrpc":"2.0","id":7,"result":{"statusUpdate":{"taskId":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_COMPLETED"}}}}`},
	{"SubscribeToTask", `{"jsonrpc":"2.0","id":7,"result":{"kind":"task-ref","ref":"task-1"}}`},
	{"ListTasks", `{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"id":"task-1","contextId":"ctx-1"},{"id":"task-2","contextId":"ctx-1"}],"nextPageToken":"p"}}`},
	{"ListTasks", `{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"id":"task-1","contextId":"ctx-1"},{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING","message":{"taskId":"task-1","referenceTaskIds":["task-2"]}},"history":[{"taskId":"task-2","contextId":"ctx-1"}]},"x",null,{"contextId":"ctx-2"}],"totalSize":42,"pageSize":50}}`},
	{"ListTasks", `{"jsonrpc":"2.0","id":7,"result":{"tasks":[],"totalSize":42,"nextPageToken":""}}`},
	{"ListTasks", `{"jsonrpc":"2.0","id":7,"result":{"totalSize":42}}`},
	{"ListTasks", `{"jsonrpc":"2.0","id":7,"result":{"tasks":{"id":"task-2"},"nextPageToken":"p2","totalSize":1}}`},
	{"ListTasks", `{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"id":"task-2","contextId":"ctx-2"}],"nextPageToken":7}}`},
	{"ListTaskPushNotificationConfigs", `{"jsonrpc":"2.0","id":7,"result":{"configs":[{"id":"p1","taskId":"task-1","url":"https://a.example/"},{"id":"p2","taskId":"task-2","url":"https://b.example/","token":"secret","authentication":{"schemes":["Bearer"],"credentials":"c"}}]}}`},
	{"CreateTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":7,"result":{"id":"p","taskId":"task-2","url":"https://hooks.example.com/","token":"t"}}`},
	{"CreateTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":7,"result":{"id":"p","taskId":"task-1","url":"https://hooks.example.com/"}}`},
	{"GetTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":7,"result":{"taskId":"task-2","pushNotificationConfig":{"url":"https://h/","token":"t","authentication":{"credentials":"c"}}}}`},
}

// corpusExchange is bob's exchange of method in a fresh world where task-1
// and ctx-1 are alice's, task-2 and ctx-2 bob's, and bob's message (a
// SendMessage) was given ctx-9.
func corpusExchange(t *testing.T, method string) *exchange {
	t.Helper()
	e := newEnforcer(t)
	s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: "http://127.0.0.1:1/jsonrpc"}}, e, testKey, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ task, ctx, owner string }{{"task-1", "ctx-1", "alice"}, {"task-2", "ctx-2", "bob"}} {
		if _, err := a2aSeen(e, context.Background(), owners.Key{Kind: owners.A2ATask, ID: k.task}, k.owner, "TASK_STATE_WORKING"); err != nil {
			t.Fatal(err)
		}
		if _, err := a2aSeen(e, context.Background(), owners.Key{Kind: owners.A2AContext, ID: k.ctx}, k.owner, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a2aSeen(e, context.Background(), owners.Key{Kind: owners.A2AContext, ID: "ctx-9"}, "bob", ""); err != nil {
		t.Fatal(err)
	}
	x := &exchange{s: s, principal: "bob", call: a2arules.Call{ID: json.RawMessage("7"), Method: method}}
	switch {
	case a2arules.Sends(method):
		x.contextID, x.fresh = "ctx-9", true
		x.prove(a2arules.KindContext, "ctx-9")
		x.call.Params = map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_USER"}}
	case method != "ListTasks":
		x.taskID = "task-2"
		x.prove(a2arules.KindTask, "task-2")
	}
	return x
}

// readable is an answer as the caller reads it, with every handle opened
// ("kind:id" of bob's handles): handles are compared by what they open.
func readable(t *testing.T, s *Server, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	var open func(any) any
	open = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = open(e)
			}
		case []any:
			for i, e := range v {
				v[i] = open(e)
			}
		case string:
			if !strings.HasPrefix(v, handle.Prefix) {
				return v
			}
			for _, k := range []a2arules.Kind{a2arules.KindTask, a2arules.KindContext, a2arules.KindCursor} {
				if id, ok := s.handles.Open(byte(k), "bob", v); ok {
					return fmt.Sprintf("handle %d:%s", k, id)
				}
			}
			return "a handle bob cannot open"
		}
		return v
	}
	return open(v)
}

// TestAnswerCorpus: every answer of the corpus comes out as it did from the
// decoding path that re-encoded the whole answer (testdata/answers.golden,
// recorded from it with -update before the answer was spliced): the same
// JSON, handles compared by what they open, and the same answers held back.
func TestAnswerCorpus(t *testing.T) {
	var got bytes.Buffer
	for i, c := range answerCorpus {
		x := corpusExchange(t, c.method)
		out, keep := x.fromUpstream([]byte(c.answer))
		fmt.Fprintf(&got, "%d %s\n", i, c.method)
		if !keep {
			fmt.Fprintf(&got, "held back\n")
			continue
		}
		b, err := json.Marshal(readable(t, x.s, out))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&got, "%s\n", b)
	}
	const golden = "testdata/answers.golden"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	if len(gl) != len(wl) {
		t.Fatalf("%d lines, golden has %d", len(gl), len(wl))
	}
	for i := range gl {
		if gl[i] == wl[i] {
			continue
		}
		var g, w any
		if json.Unmarshal([]byte(gl[i]), &g) != nil || json.Unmarshal([]byte(wl[i]), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("line %d (%s):\n got %s\nwant %s", i, answerCorpus[min(i/2, len(answerCorpus)-1)].answer, gl[i], wl[i])
		}
	}
}
