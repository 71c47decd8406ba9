package pushrelay

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc/jsonrpctest"
)

// TestNameDoors: every spelling of jsonrpctest.Spellings at every place a
// push notification gives a name the rewrite reads (a 1.0 update's task,
// a Task's id and context, a history message's task and references, 0.3's
// Task at the top): an ambiguous one is not delivered. A part's data is
// not the protocol's: the rewrite reads its task ids too, so a name given
// twice there is refused, one spelled otherwise alone is not a task id and
// passes (before, it was refused like a protocol object's).
func TestNameDoors(t *testing.T) {
	tab := owners{"t:task-1": "alice", "c:ctx-1": "alice", "t:task-b": "bob", "c:ctx-b": "bob"}
	r, err := New(Config{}, listener.Limits{}, a2a.Allow{}, ring(t, "0123456789abcdef0123456789abcdef"), tab, handles, always{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		door, tmpl, name, v, v2 string
		data                    bool
	}{
		{"an update's task", `{"statusUpdate":{%s,"contextId":"ctx-1"}}`, "taskId", `"task-1"`, `"task-b"`, false},
		{"a Task's id", `{"task":{%s,"contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}}`, "id", `"task-1"`, `"task-b"`, false},
		{"a Task's context", `{"task":{"id":"task-1",%s}}`, "contextId", `"ctx-1"`, `"ctx-b"`, false},
		{"the task", `{%s}`, "task", `{"id":"task-1","contextId":"ctx-1"}`, `{"id":"task-b","contextId":"ctx-b"}`, false},
		{"a history message's task", `{"task":{"id":"task-1","contextId":"ctx-1","history":[{"messageId":"m",%s}]}}`, "taskId", `"task-1"`, `"task-b"`, false},
		{"a status message's references", `{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1","status":{"message":{"messageId":"m",%s}}}}`, "referenceTaskIds", `["task-1"]`, `["task-b"]`, false},
		{"0.3's Task at the top", `{%s,"contextId":"ctx-1","kind":"task","status":{"state":"completed"}}`, "id", `"task-1"`, `"task-b"`, false},
		{"a part's data", `{"task":{"id":"task-1","contextId":"ctx-1","history":[{"messageId":"m","parts":[{"data":{%s}}]}]}}`, "taskId", `"task-1"`, `"task-b"`, true},
	} {
		jsonrpctest.Run(t, d.door, d.name, d.v, d.v2, func(t *testing.T, sp jsonrpctest.Spelling, members string) {
			body := fmt.Sprintf(d.tmpl, members)
			out, err := r.rewrite(context.Background(), []byte(body), Target{Principal: "alice", Task: "task-1"})
			want := sp.Protocol
			if d.data {
				want = sp.Walked
			}
			if refused := err != nil; refused != want {
				t.Fatalf("refused = %v (%v), want %v: %s as %s", refused, err, want, body, out)
			}
			if err == nil && strings.Contains(string(out), "-b") && !d.data {
				t.Fatalf("delivered bob's id: %s", out)
			}
		})
	}
}
