package a2a

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc/jsonrpctest"
)

// nameDoor is a place of an A2A answer where Warden reads a name: tmpl is
// the answer to method (bob's, about his task-2) with %s where the name's
// members go, v and v2 two values it may hold (v2 another's, or a secret).
// unread: a message part's data, which Warden does not read at all.
type nameDoor struct {
	door, method, tmpl, name, v, v2 string
	unread                          bool
}

const (
	doorTask = `{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING"}%s}`
	doorCfg  = `"id":"p","taskId":"task-2","url":"https://hooks.example/"`
)

// nameDoors are every place an A2A answer gives a name Warden reads: the
// answer's result, a task's id, context, status state and history message
// (an array's element), a stream's status update, a ListTasks item, a push
// config's token and credentials (0.3's nesting too), a ListPush page, the
// extended card and its interfaces; and a part's data, which is not the
// protocol's and is not read.
func nameDoors() []nameDoor {
	answer := func(result string) string { return `{"jsonrpc":"2.0","id":7,"result":` + result + `}` }
	return []nameDoor{
		{"the answer's result", a2a.MethodGetTask, `{"jsonrpc":"2.0","id":7,%s}`, "result", fmt.Sprintf(doorTask, ""), `{"id":"task-1","contextId":"ctx-1"}`, false},
		{"a task's id", a2a.MethodGetTask, answer(`{%s,"contextId":"ctx-2"}`), "id", `"task-2"`, `"task-1"`, false},
		{"a task's context", a2a.MethodGetTask, answer(`{"id":"task-2",%s}`), "contextId", `"ctx-2"`, `"ctx-1"`, false},
		{"a task's state", a2a.MethodGetTask, answer(`{"id":"task-2","contextId":"ctx-2","status":{%s}}`), "state", `"TASK_STATE_WORKING"`, `"TASK_STATE_COMPLETED"`, false},
		{"a task's history", a2a.MethodGetTask, answer(fmt.Sprintf(doorTask, `,%s`)), "history", `[{"messageId":"m","taskId":"task-2"}]`, `[{"messageId":"m","taskId":"task-1"}]`, false},
		{"a history message's task", a2a.MethodGetTask, answer(fmt.Sprintf(doorTask, `,"history":[{"messageId":"m","role":"ROLE_AGENT",%s}]`)), "taskId", `"task-2"`, `"task-1"`, false},
		{"a status message's references", a2a.MethodGetTask, answer(`{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m",%s}}}`), "referenceTaskIds", `["task-2"]`, `["task-1"]`, false},
		{"a status update's task", a2a.MethodSendStreaming, answer(`{"statusUpdate":{%s,"contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING"}}}`), "taskId", `"task-2"`, `"task-1"`, false},
		{"a stream's task", a2a.MethodSendStreaming, answer(`{%s}`), "task", fmt.Sprintf(doorTask, ""), `{"id":"task-1","contextId":"ctx-1"}`, false},
		{"a ListTasks item's id", a2a.MethodListTasks, answer(`{"tasks":[{%s,"contextId":"ctx-2"}]}`), "id", `"task-2"`, `"task-1"`, false},
		{"a ListTasks cursor", a2a.MethodListTasks, answer(`{"tasks":[],%s}`), "nextPageToken", `"c"`, `"SECRET"`, false},
		{"a push config's token", a2a.MethodGetPush, answer(`{` + doorCfg + `,%s}`), "token", `"t"`, `"SECRET"`, false},
		{"a push config's task", a2a.MethodCreatePush, answer(`{"id":"p","url":"https://hooks.example/",%s}`), "taskId", `"task-2"`, `"task-1"`, false},
		{"a push config's credentials", a2a.MethodGetPush, answer(`{` + doorCfg + `,"authentication":{"schemes":["Bearer"],%s}}`), "credentials", `"c"`, `"SECRET"`, false},
		{"0.3's nested push config's token", a2a.MethodGetPush, answer(`{"taskId":"task-2","pushNotificationConfig":{"url":"https://h/",%s}}`), "token", `"t"`, `"SECRET"`, false},
		{"a ListPush page's configs", a2a.MethodListPush, answer(`{%s}`), "configs", `[{` + doorCfg + `}]`, `[{"taskId":"task-1","url":"https://a/","token":"SECRET"}]`, false},
		{"the extended card's interfaces", a2a.MethodExtendedCard, answer(`{"name":"a",%s}`), "supportedInterfaces", `[{"url":"http://x/","protocolBinding":"JSONRPC"}]`, `[{"url":"http://SECRET/","protocolBinding":"JSONRPC"}]`, false},
		{"an extended card interface's url", a2a.MethodExtendedCard, answer(`{"name":"a","supportedInterfaces":[{%s,"protocolBinding":"JSONRPC"}]}`), "url", `"http://x/"`, `"http://SECRET/"`, false},
		{"a part's data", a2a.MethodGetTask, answer(fmt.Sprintf(doorTask, `,"history":[{"messageId":"m","parts":[{"data":{%s}}]}]`)), "taskId", `"task-2"`, `"task-1"`, true},
	}
}

// TestNameDoors: every spelling of jsonrpctest.Spellings at every place an
// A2A answer gives a name Warden reads: refused whole (Warden's error, or
// nothing) where the spelling is ambiguous, passing where it is not; a
// part's data, not the protocol's, passes every spelling.
func TestNameDoors(t *testing.T) {
	s := answerServer(t, "http://127.0.0.1:1/jsonrpc")
	for _, d := range nameDoors() {
		jsonrpctest.Run(t, d.door, d.name, d.v, d.v2, func(t *testing.T, sp jsonrpctest.Spelling, members string) {
			data := fmt.Sprintf(d.tmpl, members)
			out, keep := answerExchange(s, d.method).fromUpstream([]byte(data))
			refused := !keep || strings.Contains(string(out), `"error"`)
			if want := sp.Protocol && !d.unread; refused != want {
				t.Fatalf("refused = %v, want %v: %s as %s", refused, want, data, out)
			}
			if refused && keep && strings.Contains(string(out), "SECRET") {
				t.Fatalf("passed %s", out)
			}
		})
	}
}

// TestStateDoors: the same spellings where Warden reads a task's state to
// decide (its own GetTask): an ambiguous one decides nothing.
func TestStateDoors(t *testing.T) {
	for _, d := range []struct{ door, tmpl, name, v, v2 string }{
		{"the answer's result", `{"jsonrpc":"2.0","id":"warden-state",%s}`, "result", `{"id":"task-9","status":{"state":"TASK_STATE_WORKING"}}`, `{"id":"task-9","status":{"state":"TASK_STATE_COMPLETED"}}`},
		{"the task's id", `{"jsonrpc":"2.0","id":"warden-state","result":{%s,"status":{"state":"TASK_STATE_WORKING"}}}`, "id", `"task-9"`, `"task-8"`},
		{"the task's status", `{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9",%s}}`, "status", `{"state":"TASK_STATE_WORKING"}`, `{"state":"TASK_STATE_COMPLETED"}`},
		{"the state", `{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":{%s}}}`, "state", `"TASK_STATE_WORKING"`, `"TASK_STATE_COMPLETED"`},
	} {
		jsonrpctest.Run(t, d.door, d.name, d.v, d.v2, func(t *testing.T, sp jsonrpctest.Spelling, members string) {
			state, err := stateOf([]byte(fmt.Sprintf(d.tmpl, members)), "task-9")
			if (err != nil) != sp.Protocol || err == nil && state != "TASK_STATE_WORKING" {
				t.Fatalf("state %q, err %v; want refused %v", state, err, sp.Protocol)
			}
		})
	}
}

// TestCardDoors: the same spellings in the public agent card: an
// ambiguous one is Warden's 502, never the upstream's URL.
func TestCardDoors(t *testing.T) {
	for _, d := range []struct{ door, tmpl, name, v, v2 string }{
		{"the interfaces", `{"name":"a",%s}`, "supportedInterfaces", `[{"url":"http://x/","protocolBinding":"JSONRPC"}]`, `[{"url":"http://SECRET/","protocolBinding":"JSONRPC"}]`},
		{"an interface's url", `{"name":"a","supportedInterfaces":[{%s,"protocolBinding":"JSONRPC"}]}`, "url", `"http://x/"`, `"http://SECRET/"`},
		{"0.3's url", `{"name":"a",%s}`, "url", `"http://x/"`, `"http://SECRET/"`},
	} {
		jsonrpctest.Run(t, d.door, d.name, d.v, d.v2, func(t *testing.T, sp jsonrpctest.Spelling, members string) {
			card := fmt.Sprintf(d.tmpl, members)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, card)
			}))
			defer up.Close()
			s := answerServer(t, up.URL+"/jsonrpc")
			w := httptest.NewRecorder()
			s.card(w, httptest.NewRequest(http.MethodGet, "/.well-known/agent-card.json", nil))
			if refused := w.Code != http.StatusOK; refused != sp.Protocol || strings.Contains(w.Body.String(), "SECRET") {
				t.Fatalf("card %s: %d %s", card, w.Code, w.Body)
			}
		})
	}
}
