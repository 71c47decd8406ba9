package mcp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc/jsonrpctest"
)

// nameDoor is a place of an MCP answer where Warden reads a name: tmpl is
// the answer to req with %s where the name's members go, v and v2 two values
// it may hold. walked: the place is a tool's output (not the protocol's).
type nameDoor struct {
	door, req, tmpl, name, v, v2 string
	walked                       bool
}

// nameDoors are every place an MCP answer (or message on a caller's stream)
// gives a name Warden reads: the message's own members, the tasks/get
// result, the created task (nested and flat), the related-task _meta of a
// result and of a notification, a status notification, a tasks/list item
// and the list, a tool of tools/list and its taskSupport, a listen
// acknowledgement's taskIds, and a tool's output, at the top and deep in
// its content.
func nameDoors() []nameDoor {
	get, call, tools, list, listen := answerRequests[0], answerRequests[1], answerRequests[2], answerRequests[3], answerRequests[4]
	const rel = `"_meta":{"io.modelcontextprotocol/related-task":{%s}}`
	return []nameDoor{
		{"the answer's result", get, `{"jsonrpc":"2.0","id":1,%s}`, "result", `{"taskId":"t-a","status":"working"}`, `{"taskId":"t-b","status":"working"}`, false},
		{"the answer's id", get, `{"jsonrpc":"2.0",%s,"result":{"taskId":"t-a","status":"working"}}`, "id", `1`, `2`, false},
		{"a notification's method", get, `{"jsonrpc":"2.0",%s,"params":{"taskId":"t-a","status":"working"}}`, "method", `"notifications/tasks/status"`, `"notifications/message"`, false},
		{"tasks/get: the task's id", get, `{"jsonrpc":"2.0","id":1,"result":{%s,"status":"working"}}`, "taskId", `"t-a"`, `"t-b"`, false},
		{"tasks/get: the task's status", get, `{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a",%s}}`, "status", `"working"`, `"completed"`, false},
		{"tools/call: the created task", call, `{"jsonrpc":"2.0","id":1,"result":{%s}}`, "task", `{"taskId":"t-c","status":"working"}`, `{"taskId":"t-d","status":"working"}`, false},
		{"tools/call: the created task's id", call, `{"jsonrpc":"2.0","id":1,"result":{"task":{%s,"status":"working"}}}`, "taskId", `"t-c"`, `"t-d"`, false},
		{"tools/call: a flat created task's id", call, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task",%s,"status":"working"}}`, "taskId", `"t-c"`, `"t-d"`, false},
		{"tools/call: the related task's id", call, `{"jsonrpc":"2.0","id":1,"result":{"content":[],` + rel + `}}`, "taskId", `"t-c"`, `"t-d"`, false},
		{"a notification's related task's id", get, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info",` + rel + `}}`, "taskId", `"t-a"`, `"t-b"`, false},
		{"a status notification's task id", get, `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{%s,"status":"working"}}`, "taskId", `"t-a"`, `"t-b"`, false},
		{"tasks/list: the list", list, `{"jsonrpc":"2.0","id":1,"result":{%s}}`, "tasks", `[{"taskId":"t-a","status":"working"}]`, `[{"taskId":"t-b","status":"working"}]`, false},
		{"tasks/list: an item's id", list, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{%s,"status":"working"}]}}`, "taskId", `"t-a"`, `"t-b"`, false},
		{"tools/list: a tool's name", tools, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{%s,"execution":{"taskSupport":"required"}}]}}`, "name", `"echo"`, `"other"`, false},
		{"tools/list: a tool's taskSupport", tools, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","execution":{%s}}]}}`, "taskSupport", `"required"`, `"forbidden"`, false},
		{"a listen acknowledgement's tasks", listen, `{"jsonrpc":"2.0","id":1,"result":{%s}}`, "taskIds", `["t-a"]`, `["t-b"]`, false},
		{"a tool's structured output", call, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{%s}}}`, "taskId", `"t-a"`, `"t-b"`, true},
		{"deep in a tool's content", call, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x","annotations":{"deep":[[{%s}]]}}]}}`, "taskId", `"t-a"`, `"t-b"`, true},
	}
}

// TestNameDoors: every spelling of jsonrpctest.Spellings at every place an
// MCP message gives a name Warden reads, on the whole path (scanner, list
// reader, reading path): a protocol object is held to the exact spelling
// (the answer Warden's error, nothing learned, any other message dropped),
// a tool's output only to not giving the name twice (a lone "TaskId" there
// is the tool's data and passes).
func TestNameDoors(t *testing.T) {
	for _, d := range nameDoors() {
		jsonrpctest.Run(t, d.door, d.name, d.v, d.v2, func(t *testing.T, sp jsonrpctest.Spelling, members string) {
			want := sp.Protocol
			if d.walked {
				want = sp.Walked
			}
			if strings.Count(d.tmpl, "%s") != 1 {
				t.Fatal(d.tmpl)
			}
			ambiguousCase(t, d.req, fmt.Sprintf(d.tmpl, members), want, pathWhole)
		})
	}
}
