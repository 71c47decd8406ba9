package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// parseCase is one body and what Parse must make of it. When code is not 0
// Parse must fail with that JSON-RPC code and the other fields are ignored.
type parseCase struct {
	name string
	body string
	code int // 0: parsed

	kind          Kind
	id            string // raw id ("" none)
	method        string
	taskID        string
	hasTaskID     bool
	tool          string
	taskRequested bool
	steerBytes    int
	params        string // raw params, checked when not ""
	related       string // params._meta related-task taskId
	cursor        string
	taskIDs       []string // params.notifications.taskIds; nil: absent
}

var parseCases = []parseCase{
	// Requests, with every id type JSON-RPC allows.
	{name: "request string id", body: `{"jsonrpc":"2.0","id":"a-1","method":"tasks/get","params":{"taskId":"t1"}}`,
		kind: KindRequest, id: `"a-1"`, method: MethodGet, taskID: "t1", hasTaskID: true, params: `{"taskId":"t1"}`},
	{name: "request integer id", body: `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, kind: KindRequest, id: `7`, method: MethodToolsList},
	{name: "request zero id", body: `{"jsonrpc":"2.0","id":0,"method":"ping"}`, kind: KindRequest, id: `0`, method: "ping"},
	{name: "request negative id", body: `{"jsonrpc":"2.0","id":-3,"method":"ping"}`, kind: KindRequest, id: `-3`, method: "ping"},
	{name: "request largest id", body: `{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`, kind: KindRequest, id: `9007199254740992`, method: "ping"},
	{name: "request smallest id", body: `{"jsonrpc":"2.0","id":-9007199254740992,"method":"ping"}`, kind: KindRequest, id: `-9007199254740992`, method: "ping"},
	{name: "request empty string id", body: `{"jsonrpc":"2.0","id":"","method":"ping"}`, kind: KindRequest, id: `""`, method: "ping"},
	{name: "request escaped string id", body: `{"jsonrpc":"2.0","id":"\u0041\n","method":"ping"}`, kind: KindRequest, id: `"\u0041\n"`, method: "ping"},
	{name: "leading whitespace", body: " \r\n\t" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, kind: KindRequest, id: `1`, method: "ping"},
	{name: "trailing whitespace", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n  ", kind: KindRequest, id: `1`, method: "ping"},
	{name: "fields in any order", body: `{"params":{"taskId":"t9"},"method":"tasks/cancel","id":2,"jsonrpc":"2.0"}`,
		kind: KindRequest, id: `2`, method: MethodCancel, taskID: "t9", hasTaskID: true},

	// subscriptions/listen names tasks in params.notifications.taskIds.
	{name: "listen to tasks", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a","\u0062"]}}}`,
		kind: KindRequest, id: `1`, method: MethodListen, taskIDs: []string{"a", "b"}},
	{name: "listen to no task", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":[]}}}`,
		kind: KindRequest, id: `1`, method: MethodListen, taskIDs: []string{}},
	{name: "listen without taskIds", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"other":true}}}`,
		kind: KindRequest, id: `1`, method: MethodListen},
	{name: "taskIds not an array", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":"a"}}}`, code: ErrInvalidRequest},
	{name: "taskIds holding a number", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a",1]}}}`, code: ErrInvalidRequest},
	{name: "taskIds in another case", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"TaskIds":["a"]}}}`, code: ErrInvalidRequest},
	{name: "notifications in another case", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"Notifications":{"taskIds":["a"]}}}`, code: ErrInvalidRequest},

	// Notifications: no id, or a null id.
	{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kind: KindNotification, method: "notifications/initialized"},
	{name: "request null id", body: `{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled"}`, code: ErrInvalidRequest},
	{name: "notification with taskId", body: `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1","status":"working"}}`,
		kind: KindNotification, method: NotifyStatus, taskID: "t1", hasTaskID: true},

	// Responses: result or error; Warden does not read their params.
	{name: "response result", body: `{"jsonrpc":"2.0","id":1,"result":{"tasks":[]}}`, kind: KindResponse, id: `1`},
	{name: "response null result", body: `{"jsonrpc":"2.0","id":1,"result":null}`, kind: KindResponse, id: `1`},
	{name: "response error", body: `{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"Task not found"}}`, kind: KindResponse, id: `"x"`},
	{name: "response error null id", body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, kind: KindResponse, id: `null`},
	// An answer's id follows the request rules: the server must match it to
	// the request Warden saw answered.
	{name: "response object id", body: `{"jsonrpc":"2.0","id":{"a":1},"result":{}}`, code: ErrInvalidRequest},
	{name: "response id 1e0", body: `{"jsonrpc":"2.0","id":1e0,"result":{}}`, code: ErrInvalidRequest},

	// Batches were removed in 2025-06-18.
	{name: "batch", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, code: ErrInvalidRequest},
	{name: "empty batch", body: `[]`, code: ErrInvalidRequest},
	{name: "batch after whitespace", body: "\n [{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}]", code: ErrInvalidRequest},
	{name: "broken batch", body: `[{"jsonrpc":"2.0"`, code: ErrParse},

	// Not JSON.
	{name: "empty body", body: ``, code: ErrParse},
	{name: "whitespace only", body: " \n\t\r", code: ErrParse},
	{name: "truncated", body: `{"jsonrpc":"2.0","id":1,"method":`, code: ErrParse},
	{name: "trailing garbage", body: `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, code: ErrParse},
	{name: "two messages", body: `{"jsonrpc":"2.0","method":"a"}{"jsonrpc":"2.0","method":"b"}`, code: ErrParse},
	{name: "single quotes", body: `{'jsonrpc':'2.0'}`, code: ErrParse},
	{name: "byte order mark", body: "\xef\xbb\xbf" + `{"jsonrpc":"2.0","method":"ping"}`, code: ErrParse},
	{name: "bare word", body: `hello`, code: ErrParse},

	// JSON, but not a JSON-RPC 2.0 message.
	{name: "jsonrpc 1.0", body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "jsonrpc missing", body: `{"id":1,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "jsonrpc number", body: `{"jsonrpc":2.0,"id":1,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "top-level null", body: `null`, code: ErrInvalidRequest},
	{name: "top-level string", body: `"ping"`, code: ErrInvalidRequest},
	{name: "top-level number", body: `42`, code: ErrInvalidRequest},
	{name: "empty object", body: `{}`, code: ErrInvalidRequest},
	{name: "neither method nor result", body: `{"jsonrpc":"2.0","id":1}`, code: ErrInvalidRequest},
	{name: "empty method", body: `{"jsonrpc":"2.0","id":1,"method":""}`, code: ErrInvalidRequest},
	{name: "method not a string", body: `{"jsonrpc":"2.0","id":1,"method":5}`, code: ErrInvalidRequest},
	{name: "id object", body: `{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id array", body: `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id true", body: `{"jsonrpc":"2.0","id":true,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id false", body: `{"jsonrpc":"2.0","id":false,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id number out of range", body: `{"jsonrpc":"2.0","id":1e999,"method":"ping"}`, code: ErrInvalidRequest},

	// Members are read with their exact names, and only once.
	{name: "duplicate method", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","method":"ping"}`, code: ErrInvalidRequest},
	{name: "duplicate id", body: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "duplicate jsonrpc", body: `{"jsonrpc":"2.0","jsonrpc":"2.0","method":"ping"}`, code: ErrInvalidRequest},
	{name: "duplicate taskId", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"a","taskId":"b"}}`, code: ErrInvalidRequest},
	{name: "duplicate result", body: `{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`, code: ErrInvalidRequest},
	{name: "Method is not method", body: `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, code: ErrInvalidRequest},
	{name: "JSONRPC is not jsonrpc", body: `{"JSONRPC":"2.0","id":1,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "TaskId is not taskId", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"TaskId":"t1"}}`, code: ErrInvalidRequest},
	{name: "Name is not name", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"x","Task":{}}}`, code: ErrInvalidRequest},
	{name: "duplicates deeper down are the upstream's", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"a":2}}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "x"},

	// Names equal under case folding (encoding/json reads them as one).
	{name: "method and Method", body: `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tasks/cancel","params":{"taskId":"t"}}`, code: ErrInvalidRequest},
	{name: "Method and method", body: `{"jsonrpc":"2.0","id":1,"Method":"tasks/cancel","method":"ping"}`, code: ErrInvalidRequest},
	{name: "ID makes a request", body: `{"jsonrpc":"2.0","ID":9,"method":"tasks/pause","params":{"taskId":"t"}}`, code: ErrInvalidRequest},
	{name: "id and Id", body: `{"jsonrpc":"2.0","id":1,"Id":2,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "Params alone", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","Params":{"taskId":"t"}}`, code: ErrInvalidRequest},
	{name: "Result alone", body: `{"jsonrpc":"2.0","id":1,"Result":{}}`, code: ErrInvalidRequest},
	{name: "Kelvin sign folds to k", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","tas\u212aId":"u"}}`, code: ErrInvalidRequest},
	{name: "long s folds to s", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","taſkId":"u"}}`, code: ErrInvalidRequest},
	{name: "long s alone", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taſkId":"u"}}`, code: ErrInvalidRequest},
	{name: "escaped upper case", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","\u0054askId":"u"}}`, code: ErrInvalidRequest},
	{name: "jsonRPC", body: `{"jsonRPC":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "Task object", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","Task":{}}}`, code: ErrInvalidRequest},
	{name: "case duplicates in task", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":1,"TTL":2}}}`, code: ErrInvalidRequest},
	{name: "case duplicates in _meta", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":1,"A":2}}}`, code: ErrInvalidRequest},
	{name: "related-task spelled in upper case", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"IO.modelcontextprotocol/related-task":{"taskId":"t"}}}}`, code: ErrInvalidRequest},
	{name: "related-task TaskId", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"TaskId":"t"}}}}`, code: ErrInvalidRequest},
	// pydantic's populate_by_name (the MCP Python SDK's models, alias_generator=to_camel) reads a
	// member under its Python name as under its alias: meta as _meta, task_id as taskId.
	{name: "meta read as _meta", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","meta":{"io.modelcontextprotocol/related-task":{"taskId":"raw"}}}}`, code: ErrInvalidRequest},
	{name: "task_id beside taskId", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"wt2.mine","task_id":"raw"}}`, code: ErrInvalidRequest},
	{name: "TASK_ID beside taskId", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"TASK_ID":"raw","taskId":"wt2.mine"}}`, code: ErrInvalidRequest},
	{name: "task_ids for taskIds", body: `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"task_ids":["raw"]}}}`, code: ErrInvalidRequest},
	{name: "related-task task_id", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"task_id":"raw"}}}}`, code: ErrInvalidRequest},
	{name: "meta in a client's result", body: `{"jsonrpc":"2.0","id":1,"result":{"meta":{"io.modelcontextprotocol/related-task":{"taskId":"raw"}}}}`, code: ErrInvalidRequest},
	{name: "related-task not an object", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":"t"}}}`, code: ErrInvalidRequest},
	{name: "related-task taskId not a string", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":1}}}}`, code: ErrInvalidRequest},
	{name: "Cursor", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"Cursor":"c"}}`, code: ErrInvalidRequest},
	{name: "case duplicates in a client's result _meta", body: `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a","taskid":"b"}}}}`, code: ErrInvalidRequest},
	{name: "related task read", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t\u0031"}}}}`,
		kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "x", related: "t1"},
	{name: "related task in a client's result", body: `{"jsonrpc":"2.0","id":"s1","result":{"action":"accept","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t2"}}}}`,
		kind: KindResponse, id: `"s1"`, related: "t2"},
	{name: "cursor read", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"c1"}}`, kind: KindRequest, id: `1`, method: MethodList, cursor: "c1"},
	{name: "case duplicates inside arguments are the tool's", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"A":2}}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "x"},
	{name: "method and result", body: `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, code: ErrInvalidRequest},

	// Ids: strings and canonical integers within ±2^53; anything a peer
	// would echo in another spelling is refused.
	{name: "id 1.0", body: `{"jsonrpc":"2.0","id":1.0,"method":"tasks/list"}`, code: ErrInvalidRequest},
	{name: "id 1e0", body: `{"jsonrpc":"2.0","id":1e0,"method":"tasks/list"}`, code: ErrInvalidRequest},
	{name: "id 1E0", body: `{"jsonrpc":"2.0","id":1E0,"method":"tasks/list"}`, code: ErrInvalidRequest},
	{name: "id 0.1e1", body: `{"jsonrpc":"2.0","id":0.1e1,"method":"tasks/list"}`, code: ErrInvalidRequest},
	{name: "id -0", body: `{"jsonrpc":"2.0","id":-0,"method":"tasks/list"}`, code: ErrInvalidRequest},
	{name: "id 1.5", body: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id 2^53+1", body: `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id -(2^53+1)", body: `{"jsonrpc":"2.0","id":-9007199254740993,"method":"ping"}`, code: ErrInvalidRequest},
	{name: "id beyond uint64", body: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, code: ErrInvalidRequest},

	// Params that are not an object are the upstream's to refuse.
	{name: "params array", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":["t1"]}`, kind: KindRequest, id: `1`, method: MethodGet, params: `["t1"]`},
	{name: "params string", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":"t1"}`, kind: KindRequest, id: `1`, method: MethodGet, params: `"t1"`},
	{name: "params number", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":3}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "params null", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":null}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "params empty object", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}`, kind: KindRequest, id: `1`, method: MethodGet},

	// params.taskId must be a string.
	{name: "taskId number", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":12}}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "taskId null", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":null}}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "taskId object", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":{"id":"t1"}}}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "taskId array", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":["t1"]}}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "taskId bool", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":true}}`, kind: KindRequest, id: `1`, method: MethodGet},
	{name: "taskId empty string", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":""}}`, kind: KindRequest, id: `1`, method: MethodGet, hasTaskID: true},
	{name: "taskId escaped", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t\u00e9\"1"}}`, kind: KindRequest, id: `1`, method: MethodGet, taskID: "té\"1", hasTaskID: true},

	// tools/call: the tool name and the 2025-11-25 task request.
	{name: "tools/call", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "echo"},
	{name: "tools/call task object", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000}}}`,
		kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "slow", taskRequested: true},
	{name: "tools/call empty task object", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{}}}`,
		kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "slow", taskRequested: true},
	{name: "tools/call task true", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":true}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "slow"},
	{name: "tools/call task null", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":null}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "slow"},
	{name: "tools/call task array", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":[{}]}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "slow"},
	{name: "tools/call task string", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":"{}"}}`, kind: KindRequest, id: `1`, method: MethodToolsCall, tool: "slow"},
	{name: "tools/call name not a string", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`, kind: KindRequest, id: `1`, method: MethodToolsCall},

	// tasks/steer: the message length, in bytes of the decoded string.
	{name: "steer ascii", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t1","message":"go left"}}`,
		kind: KindRequest, id: `1`, method: MethodSteer, taskID: "t1", hasTaskID: true, steerBytes: 7},
	{name: "steer multibyte", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t1","message":"héllo"}}`,
		kind: KindRequest, id: `1`, method: MethodSteer, taskID: "t1", hasTaskID: true, steerBytes: 6},
	{name: "steer escapes decoded", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t1","message":"a\nb\u0041"}}`,
		kind: KindRequest, id: `1`, method: MethodSteer, taskID: "t1", hasTaskID: true, steerBytes: 4},
	{name: "steer empty message", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t1","message":""}}`,
		kind: KindRequest, id: `1`, method: MethodSteer, taskID: "t1", hasTaskID: true},
	{name: "steer object message counts raw bytes", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t1","message":{"text":"hi"}}}`,
		kind: KindRequest, id: `1`, method: MethodSteer, taskID: "t1", hasTaskID: true, steerBytes: len(`{"text":"hi"}`)},
	{name: "steer without message", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t1"}}`,
		kind: KindRequest, id: `1`, method: MethodSteer, taskID: "t1", hasTaskID: true},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.body))
			if tc.code != 0 {
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("Parse = %+v, %v; want a *Error with code %d", c, err, tc.code)
				}
				if pe.Code != tc.code {
					t.Fatalf("code %d (%s), want %d", pe.Code, pe.Message, tc.code)
				}
				if pe.Error() == "" || pe.Error() != pe.Message {
					t.Errorf("Error() = %q, want the message %q", pe.Error(), pe.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c.Kind != tc.kind {
				t.Errorf("Kind = %d, want %d", c.Kind, tc.kind)
			}
			if string(c.ID) != tc.id {
				t.Errorf("ID = %s, want %s", c.ID, tc.id)
			}
			if c.Method != tc.method {
				t.Errorf("Method = %q, want %q", c.Method, tc.method)
			}
			if c.TaskID != tc.taskID || c.HasTaskID != tc.hasTaskID {
				t.Errorf("TaskID = %q/%v, want %q/%v", c.TaskID, c.HasTaskID, tc.taskID, tc.hasTaskID)
			}
			if c.Tool != tc.tool {
				t.Errorf("Tool = %q, want %q", c.Tool, tc.tool)
			}
			if c.TaskRequested != tc.taskRequested {
				t.Errorf("TaskRequested = %v, want %v", c.TaskRequested, tc.taskRequested)
			}
			if c.SteerBytes != tc.steerBytes {
				t.Errorf("SteerBytes = %d, want %d", c.SteerBytes, tc.steerBytes)
			}
			if tc.params != "" && string(c.Params) != tc.params {
				t.Errorf("Params = %s, want %s", c.Params, tc.params)
			}
			if c.RelatedTaskID != tc.related || c.HasRelatedTask != (tc.related != "") {
				t.Errorf("RelatedTaskID = %q/%v, want %q", c.RelatedTaskID, c.HasRelatedTask, tc.related)
			}
			if c.Cursor != tc.cursor || c.HasCursor != (tc.cursor != "") {
				t.Errorf("Cursor = %q/%v, want %q", c.Cursor, c.HasCursor, tc.cursor)
			}
			if c.HasTaskIDs != (tc.taskIDs != nil) || !slices.Equal(c.TaskIDs, tc.taskIDs) {
				t.Errorf("TaskIDs = %q/%v, want %q", c.TaskIDs, c.HasTaskIDs, tc.taskIDs)
			}
		})
	}
}

// TestParseKeysAreCaseSensitive checks that Parse reads the members the
// upstream reads. JSON-RPC member names are case-sensitive, and the upstream
// (and Warden's own handle rewriting in proxy/mcp, which decodes into a map)
// read "taskId" and "method" exactly; a reader that also accepts "TaskId" or
// "Method" decides on another value than the one the upstream acts on.
func TestParseKeysAreCaseSensitive(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		method string
		taskID string
	}{
		{"params.TaskId after taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"victim","TaskId":"mine"}}`, MethodCancel, "victim"},
		{"params.TaskId before taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"TaskId":"mine","taskId":"victim"}}`, MethodCancel, "victim"},
		{"params.TASKID alone", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"TASKID":"mine"}}`, MethodCancel, ""},
		{"Method after method", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","Method":"ping","params":{"taskId":"victim"}}`, MethodCancel, "victim"},
		{"METHOD before method", `{"jsonrpc":"2.0","id":1,"METHOD":"ping","method":"tasks/cancel","params":{"taskId":"victim"}}`, MethodCancel, "victim"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.body))
			if err != nil {
				return // refusing such a body is as good
			}
			if c.Method != tc.method || c.TaskID != tc.taskID {
				t.Errorf("Parse read method %q taskId %q; the upstream reads method %q taskId %q", c.Method, c.TaskID, tc.method, tc.taskID)
			}
		})
	}
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		code   rules.Code
		detail string
		status int
		rpc    int
		msg    string
	}{
		{rules.CodeTaskNotFound, "detail that must not show", 200, ErrInvalidParams, "Task not found"},
		{rules.CodeInvalidTaskState, "pause is not allowed", 200, ErrInvalidParams, "pause is not allowed"},
		{rules.CodeInvalidParams, "too large", 200, ErrInvalidParams, "too large"},
		{rules.CodeMethodNotFound, "no tasks", 200, ErrMethodNotFound, "no tasks"},
		{rules.CodeHeaderMismatch, "Mcp-Name", 400, ErrHeaderMismatch, "Mcp-Name"},
		{rules.CodeInvalidRequest, "bad", 400, ErrInvalidRequest, "bad"},
		{rules.CodeUnauthenticated, "expired", 401, ErrUnauthorized, "Unauthorized: expired"},
		{rules.CodeInternal, "retry", 503, ErrInternal, "retry"},
		{rules.CodeForbidden, "operator rule", 403, ErrInvalidRequest, "Forbidden: operator rule"},
		{rules.CodePolicyDenied, "x", 403, ErrInvalidRequest, "Forbidden: x"},
	}
	for _, tc := range tests {
		t.Run(string(tc.code), func(t *testing.T) {
			status, code, msg := Answer(tc.code, tc.detail)
			if status != tc.status || code != tc.rpc || msg != tc.msg {
				t.Fatalf("Answer = %d %d %q, want %d %d %q", status, code, msg, tc.status, tc.rpc, tc.msg)
			}
		})
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		name string
		id   json.RawMessage
		want string
	}{
		{"no id", nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"m \u003c\u003e"}}`},
		{"string id", json.RawMessage(`"a"`), `{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"m \u003c\u003e"}}`},
		{"number id", json.RawMessage(`7`), `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"m \u003c\u003e"}}`},
		{"id that is not JSON", json.RawMessage(`{`), `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"m \u003c\u003e"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(ErrorBody(tc.id, ErrInvalidParams, "m <>")); got != tc.want {
				t.Fatalf("ErrorBody = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPredicates(t *testing.T) {
	methods := []string{MethodInitialize, MethodToolsList, MethodToolsCall, MethodGet, MethodResult, MethodList,
		MethodCancel, MethodUpdate, MethodSteer, MethodPause, MethodResume, NotifyStatus, NotifyTasks, "", "tasks/other", "TASKS/GET"}
	type want struct{ task, name, status bool }
	wants := map[string]want{
		MethodGet:    {task: true, name: true},
		MethodResult: {task: true},
		MethodCancel: {task: true, name: true},
		MethodUpdate: {task: true, name: true, status: true},
		MethodSteer:  {task: true, name: true, status: true},
		MethodPause:  {task: true, name: true, status: true},
		MethodResume: {task: true, name: true, status: true},
	}
	for _, m := range methods {
		t.Run("method "+strconv.Quote(m), func(t *testing.T) {
			w := wants[m]
			if got := TaskMethod(m); got != w.task {
				t.Errorf("TaskMethod = %v, want %v", got, w.task)
			}
			if got := NameRequired(m); got != w.name {
				t.Errorf("NameRequired = %v, want %v", got, w.name)
			}
			if got := NeedsStatus(m); got != w.status {
				t.Errorf("NeedsStatus = %v, want %v", got, w.status)
			}
		})
	}
	statuses := []struct {
		s               string
		known, terminal bool
	}{
		{StatusWorking, true, false},
		{StatusInputRequired, true, false},
		{StatusPaused, true, false},
		{StatusCompleted, true, true},
		{StatusFailed, true, true},
		{StatusCancelled, true, true},
		{"", false, false},
		{"canceled", false, false},
		{"Working", false, false},
		{"submitted", false, false},
	}
	for _, tc := range statuses {
		t.Run("status "+strconv.Quote(tc.s), func(t *testing.T) {
			if got := KnownStatus(tc.s); got != tc.known {
				t.Errorf("KnownStatus = %v, want %v", got, tc.known)
			}
			if got := Terminal(tc.s); got != tc.terminal {
				t.Errorf("Terminal = %v, want %v", got, tc.terminal)
			}
		})
	}
}

// b64 is SEP-2243's =?base64?...?= form of a header value.
func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

func call(method string, params string) Call {
	c, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`))
	if err != nil {
		panic(err)
	}
	return c
}

func TestCheckHeaders(t *testing.T) {
	const v25, v26 = "2025-11-25", Era2026
	named := func(v, name string) Headers { return Headers{ProtocolVersion: v, Name: name, HasName: true} }
	get := call(MethodGet, `{"taskId":"t1"}`)
	notif, err := Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	mismatch, invalid := rules.CodeHeaderMismatch, rules.CodeInvalidParams
	tests := []struct {
		name string
		call Call
		h    Headers
		code rules.Code // "": allowed
	}{
		// Mcp-Method.
		{"no headers", get, Headers{}, ""},
		{"Mcp-Method equal", get, Headers{Method: MethodGet}, ""},
		{"Mcp-Method different", get, Headers{Method: MethodCancel}, mismatch},
		{"Mcp-Method is case sensitive", get, Headers{Method: "TASKS/GET"}, mismatch},
		{"Mcp-Method on a non-task request", call(MethodToolsList, `{}`), Headers{Method: MethodToolsCall}, mismatch},
		{"Mcp-Method on a notification", notif, Headers{Method: "notifications/other"}, mismatch},
		{"Mcp-Method equal on a notification", notif, Headers{Method: NotifyStatus}, ""},
		{"response has no headers to check", resp, Headers{Method: "anything", Name: "x", HasName: true, ProtocolVersion: v26}, ""},

		// A task method needs a string taskId.
		{"taskId missing", call(MethodGet, `{}`), Headers{}, invalid},
		{"taskId number", call(MethodCancel, `{"taskId":1}`), Headers{}, invalid},
		{"params not an object", call(MethodGet, `["t1"]`), Headers{}, invalid},
		{"taskId missing, 2026", call(MethodGet, `{}`), Headers{ProtocolVersion: v26}, invalid},

		// Mcp-Name is required from 2026-07-28 on SEP-2663 and SEP-2669 methods.
		{"get without Mcp-Name 2026", get, Headers{ProtocolVersion: v26}, mismatch},
		{"update without Mcp-Name 2026", call(MethodUpdate, `{"taskId":"t1"}`), Headers{ProtocolVersion: v26}, mismatch},
		{"cancel without Mcp-Name 2026", call(MethodCancel, `{"taskId":"t1"}`), Headers{ProtocolVersion: v26}, mismatch},
		{"steer without Mcp-Name 2026", call(MethodSteer, `{"taskId":"t1","message":"m"}`), Headers{ProtocolVersion: v26}, mismatch},
		{"pause without Mcp-Name 2026", call(MethodPause, `{"taskId":"t1"}`), Headers{ProtocolVersion: v26}, mismatch},
		{"resume without Mcp-Name 2026", call(MethodResume, `{"taskId":"t1"}`), Headers{ProtocolVersion: v26}, mismatch},
		{"later version without Mcp-Name", get, Headers{ProtocolVersion: "2027-01-01"}, mismatch},
		{"result without Mcp-Name 2026", call(MethodResult, `{"taskId":"t1"}`), Headers{ProtocolVersion: v26}, ""},
		{"get without Mcp-Name 2025", get, Headers{ProtocolVersion: v25}, ""},
		{"cancel without Mcp-Name, no version", call(MethodCancel, `{"taskId":"t1"}`), Headers{}, ""},
		{"get with Mcp-Name 2026", get, named(v26, "t1"), ""},
		{"steer with Mcp-Name 2026", call(MethodSteer, `{"taskId":"t1"}`), named(v26, "t1"), ""},
		{"empty Mcp-Name 2026", get, named(v26, ""), mismatch},

		// Present and different is a mismatch in every version.
		{"get Mcp-Name different 2026", get, named(v26, "t2"), mismatch},
		{"get Mcp-Name different 2025", get, named(v25, "t2"), mismatch},
		{"result Mcp-Name different 2025", call(MethodResult, `{"taskId":"t1"}`), named(v25, "t2"), mismatch},
		{"result Mcp-Name equal 2025", call(MethodResult, `{"taskId":"t1"}`), named(v25, "t1"), ""},
		{"Mcp-Name is case sensitive", get, named(v26, "T1"), mismatch},

		// SEP-2243's base64 form.
		{"base64 Mcp-Name", call(MethodGet, `{"taskId":"tâche-1"}`), named(v26, b64("tâche-1")), ""},
		{"base64 of a plain value", get, named(v26, b64("t1")), ""},
		{"base64 of another value", get, named(v26, b64("t2")), mismatch},
		{"base64 sentinel as a literal", call(MethodGet, `{"taskId":"=?base64?literal?="}`), named(v26, b64("=?base64?literal?=")), ""},
		{"undecodable base64 mismatch", get, named(v26, "=?base64?!!?="), mismatch},
		{"prefix without suffix", call(MethodGet, `{"taskId":"=?base64?dDE="}`), named(v26, "=?base64?dDE="), ""},
		// A value readers read otherwise is refused, not compared: raw
		// UTF-8 (Go reads it so, Node and Starlette as Latin-1), a sentinel
		// that does not decode (the Python SDK reads it as no value), a
		// control character.
		{"raw UTF-8 Mcp-Name equal to the body", call(MethodToolsCall, `{"name":"écho"}`), named(v26, "écho"), mismatch},
		{"raw UTF-8 Mcp-Name on a task method", call(MethodGet, `{"taskId":"tâche-1"}`), named(v26, "tâche-1"), mismatch},
		{"raw UTF-8 Mcp-Name on resources/read", call(MethodResourcesRead, `{"uri":"demo://vault/café"}`), named(v25, "demo://vault/café"), mismatch},
		{"undecodable sentinel equal to the body", call(MethodToolsCall, `{"name":"=?base64?!!?="}`), named(v26, "=?base64?!!?="), mismatch},
		{"control character in Mcp-Name", call(MethodToolsCall, `{"name":"a\u0001b"}`), named(v26, "a\x01b"), mismatch},
		{"raw UTF-8 Mcp-Method equal to the body", call("méthode/x", `{}`), Headers{Method: "méthode/x"}, mismatch},
		{"space and tab in Mcp-Name", call(MethodToolsCall, `{"name":"a b\tc"}`), named(v26, "a b\tc"), ""},

		// tools/call: Mcp-Name is params.name when present.
		{"tools/call Mcp-Name equal", call(MethodToolsCall, `{"name":"echo"}`), named(v26, "echo"), ""},
		{"tools/call Mcp-Name different", call(MethodToolsCall, `{"name":"echo"}`), named(v26, "rm"), mismatch},
		{"tools/call Mcp-Name base64", call(MethodToolsCall, `{"name":"écho"}`), named(v26, b64("écho")), ""},
		{"tools/call without Mcp-Name", call(MethodToolsCall, `{"name":"echo"}`), Headers{ProtocolVersion: v26}, ""},
		{"tools/list ignores Mcp-Name", call(MethodToolsList, `{}`), named(v26, "anything"), ""},

		// resources/read and prompts/get: Mcp-Name is params.uri and
		// params.name (SEP-2243), which an intermediary or server may route
		// or look up by in place of the body Warden decided on.
		{"resources/read Mcp-Name equal", call(MethodResourcesRead, `{"uri":"demo://vault/public"}`), named(v26, "demo://vault/public"), ""},
		{"resources/read Mcp-Name different", call(MethodResourcesRead, `{"uri":"demo://vault/public"}`), named(v26, "demo://vault/secret"), mismatch},
		{"resources/read Mcp-Name different 2025", call(MethodResourcesRead, `{"uri":"demo://vault/public"}`), named(v25, "demo://vault/secret"), mismatch},
		{"resources/read Mcp-Name base64", call(MethodResourcesRead, `{"uri":"demo://vault/café"}`), named(v26, b64("demo://vault/café")), ""},
		{"resources/read Mcp-Name base64 of another", call(MethodResourcesRead, `{"uri":"demo://vault/public"}`), named(v26, b64("demo://vault/secret")), mismatch},
		{"resources/read without Mcp-Name", call(MethodResourcesRead, `{"uri":"demo://vault/public"}`), Headers{ProtocolVersion: v26}, ""},
		{"resources/read Mcp-Name without params.uri", call(MethodResourcesRead, `{}`), named(v26, "demo://vault/secret"), mismatch},
		{"prompts/get Mcp-Name equal", call(MethodPromptsGet, `{"name":"greet"}`), named(v26, "greet"), ""},
		{"prompts/get Mcp-Name different", call(MethodPromptsGet, `{"name":"greet"}`), named(v26, "vault"), mismatch},
		{"prompts/get Mcp-Name without params.name", call(MethodPromptsGet, `{}`), named(v26, "vault"), mismatch},
		{"tools/call Mcp-Name without params.name is a mismatch", call(MethodToolsCall, `{}`), named(v26, "rm"), mismatch},
		{"completion/complete ignores Mcp-Name", call(MethodComplete, `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"a","value":"b"}}`), named(v26, "anything"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckHeaders(tc.call, tc.h)
			if v.Code != tc.code {
				t.Fatalf("code %q (%s), want %q", v.Code, v.Detail, tc.code)
			}
			switch tc.code {
			case mismatch:
				if v.Reason != rules.ReasonHeaderMismatch || v.Detail == "" {
					t.Errorf("reason %q detail %q", v.Reason, v.Detail)
				}
			case invalid:
				if v.Reason != rules.ReasonMalformedRequest || !strings.Contains(v.Detail, "taskId") {
					t.Errorf("reason %q detail %q", v.Reason, v.Detail)
				}
			case "":
				if v != (rules.Verdict{}) {
					t.Errorf("allowed verdict carries %+v", v)
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	task := call(MethodToolsCall, `{"name":"slow","task":{}}`)
	plain := call(MethodToolsCall, `{"name":"slow"}`)
	steer := func(n int) Call {
		return call(MethodSteer, `{"taskId":"t1","message":"`+strings.Repeat("x", n)+`"}`)
	}
	lim := Limits{MaxSteerBytes: 8, MaxSteerQueue: 2}
	tests := []struct {
		name   string
		req    Request
		code   rules.Code
		reason rules.Reason
	}{
		{"forbidden with task", Request{Call: task, Support: SupportForbidden}, rules.CodeMethodNotFound, rules.ReasonTaskSupport},
		{"forbidden without task", Request{Call: plain, Support: SupportForbidden}, "", ""},
		{"required without task", Request{Call: plain, Support: SupportRequired}, rules.CodeMethodNotFound, rules.ReasonTaskSupport},
		{"required with task", Request{Call: task, Support: SupportRequired}, "", ""},
		{"optional with task", Request{Call: task, Support: SupportOptional}, "", ""},
		{"optional without task", Request{Call: plain, Support: SupportOptional}, "", ""},
		{"unknown tool with task", Request{Call: task}, "", ""},
		{"unknown tool without task", Request{Call: plain}, "", ""},
		{"unknown support value with task", Request{Call: task, Support: "sometimes"}, "", ""},
		{"unknown support value without task", Request{Call: plain, Support: "sometimes"}, "", ""},
		{"task: true is no task request", Request{Call: call(MethodToolsCall, `{"name":"slow","task":true}`), Support: SupportForbidden}, "", ""},

		{"steer at the size bound", Request{Call: steer(8), Limits: lim}, "", ""},
		{"steer over the size bound", Request{Call: steer(9), Limits: lim}, rules.CodeInvalidParams, rules.ReasonSteerTooLarge},
		{"steer size unbounded", Request{Call: steer(1 << 12), Limits: Limits{MaxSteerQueue: 2}}, "", ""},
		{"steer queue below the bound", Request{Call: steer(1), Steers: 1, Limits: lim}, "", ""},
		{"steer queue at the bound", Request{Call: steer(1), Steers: 2, Limits: lim}, rules.CodeInvalidParams, rules.ReasonSteerQueueFull},
		{"steer queue over the bound", Request{Call: steer(1), Steers: 5, Limits: lim}, rules.CodeInvalidParams, rules.ReasonSteerQueueFull},
		{"steer queue unbounded", Request{Call: steer(1), Steers: 1000, Limits: Limits{MaxSteerBytes: 8}}, "", ""},
		{"too large wins over queue full", Request{Call: steer(9), Steers: 2, Limits: lim}, rules.CodeInvalidParams, rules.ReasonSteerTooLarge},
		{"bounds apply only to steer", Request{Call: call(MethodPause, `{"taskId":"t1","message":"`+strings.Repeat("x", 20)+`"}`), Steers: 9, Limits: lim}, "", ""},
		{"support applies only to tools/call", Request{Call: call(MethodGet, `{"taskId":"t1","task":{}}`), Support: SupportForbidden}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(tc.req)
			if v.Code != tc.code || v.Reason != tc.reason {
				t.Fatalf("got %q/%q (%s), want %q/%q", v.Code, v.Reason, v.Detail, tc.code, tc.reason)
			}
			if tc.code != "" && v.Detail == "" {
				t.Error("a refusal without a detail")
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Parse(body)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *Error", err)
			}
			if pe.Code != ErrParse && pe.Code != ErrInvalidRequest {
				t.Fatalf("code %d", pe.Code)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("parsed a body that is not JSON: %q", body)
		}
		// Parse finds method and params once each: what it took is what
		// the envelope's own readers give.
		if raw, _ := c.Request.Raw("params"); !bytes.Equal(c.Params, raw) || (c.Params == nil) != (raw == nil) {
			t.Fatalf("params %q, the envelope's %q", c.Params, raw)
		}
		if m, _ := c.Request.StrOf("method", nil); c.Method != m {
			t.Fatalf("method %q, the envelope's %q", c.Method, m)
		}
		switch c.Kind {
		case KindRequest:
			if c.Method == "" {
				t.Fatal("request without a method")
			}
			if !json.Valid(c.ID) {
				t.Fatalf("request id %q is not JSON", c.ID)
			}
			var id any
			dec := json.NewDecoder(bytes.NewReader(c.ID))
			dec.UseNumber()
			if err := dec.Decode(&id); err != nil {
				t.Fatal(err)
			}
			switch v := id.(type) {
			case string:
			case json.Number:
				n, err := strconv.ParseInt(v.String(), 10, 64)
				if err != nil || n > jsonrpc.MaxID || n < -jsonrpc.MaxID || strconv.FormatInt(n, 10) != string(c.ID) {
					t.Fatalf("request id %s is not a canonical integer within 2^53", v)
				}
			default:
				t.Fatalf("request id %s is a %T", c.ID, id)
			}
		case KindNotification:
			if c.Method == "" {
				t.Fatal("notification without a method")
			}
			if len(c.ID) != 0 {
				t.Fatalf("notification with id %s", c.ID)
			}
		case KindResponse:
			if c.Method != "" || c.HasTaskID || c.Tool != "" || c.TaskRequested || c.SteerBytes != 0 {
				t.Fatalf("response with request fields: %+v", c)
			}
		default:
			t.Fatalf("kind %d", c.Kind)
		}
		if !c.HasTaskID && c.TaskID != "" {
			t.Fatalf("TaskID %q without HasTaskID", c.TaskID)
		}
		if c.SteerBytes < 0 {
			t.Fatalf("SteerBytes %d", c.SteerBytes)
		}
		// Parsing is a function of the body.
		again, err := Parse(body)
		if err != nil || again.Method != c.Method || again.TaskID != c.TaskID || string(again.ID) != string(c.ID) {
			t.Fatalf("second Parse differs: %+v %v", again, err)
		}
	})
}

// TestFoldMatchesEncodingJSON checks Fold against encoding/json's own
// matching for every rune: a one-rune member name decodes into the field
// named by another rune exactly when their Folds are equal. Runes are
// checked against the fold orbit's members (the only candidates).
func TestFoldMatchesEncodingJSON(t *testing.T) {
	for r := rune(0x20); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF || r == '"' || r == '\\' {
			continue
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if jsonrpc.Fold(string(r)) != jsonrpc.Fold(string(o)) {
				t.Fatalf("Fold(%U) = %q, Fold(%U) = %q: encoding/json folds them together", r, jsonrpc.Fold(string(r)), o, jsonrpc.Fold(string(o)))
			}
		}
		if u := unicode.ToUpper(r); u != r && jsonrpc.Fold(string(u)) == jsonrpc.Fold(string(r)) != bytes.EqualFold([]byte(string(u)), []byte(string(r))) {
			t.Fatalf("Fold and bytes.EqualFold disagree on %U and %U", r, u)
		}
	}
	// And end to end, on the names the rules read.
	for _, tc := range []struct{ name, key string }{
		{"Kelvin", "tas\u212aId"}, {"long s", "taſkId"}, {"upper", "TASKID"}, {"dotless i is not i", "taskıd"},
	} {
		var v struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal([]byte(`{"`+tc.key+`":"x"}`), &v)
		if got, want := v.TaskID == "x", jsonrpc.Fold(tc.key) == jsonrpc.Fold("taskId"); got != want {
			t.Errorf("%s: encoding/json matched %v, Fold matched %v", tc.name, got, want)
		}
	}
}

// envelope is how a Go server built on encoding/json reads a message.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// goParams is how such a server reads the params Warden reads.
type goParams struct {
	TaskID string          `json:"taskId"`
	Name   string          `json:"name"`
	Task   json.RawMessage `json:"task"`
	Cursor string          `json:"cursor"`
	Meta   struct {
		Related *struct {
			TaskID string `json:"taskId"`
		} `json:"io.modelcontextprotocol/related-task"`
	} `json:"_meta"`
	Notifications struct {
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

// FuzzParseAgreesWithEncodingJSON: for every message Parse accepts, a Go
// server decoding it with encoding/json (case-insensitive member names, last
// duplicate wins) reads the same method, the same id (present or not, same
// bytes) and the same params; and where it decodes the params Warden reads
// (taskId, name, task, cursor, _meta related-task), the same values.
func FuzzParseAgreesWithEncodingJSON(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.body))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"ping","Method":"tasks/cancel","params":{"taskId":"t"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","ID":9,"method":"tasks/pause","params":{"taskId":"t"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"ta\u017fkId":"t"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a"],"ta\u017fkIds":["b"]}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Parse(body)
		if err != nil || c.Kind == KindResponse {
			return
		}
		var e envelope
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("Parse accepted what encoding/json refuses: %v", err)
		}
		if e.Method != c.Method {
			t.Fatalf("method: Warden %q, encoding/json %q", c.Method, e.Method)
		}
		if (len(e.ID) > 0) != (c.Kind == KindRequest) || !bytes.Equal(e.ID, c.ID) {
			t.Fatalf("id: Warden %s (kind %d), encoding/json %s", c.ID, c.Kind, e.ID)
		}
		if !bytes.Equal(e.Params, c.Params) {
			t.Fatalf("params: Warden %s, encoding/json %s", c.Params, e.Params)
		}
		var p goParams
		if len(c.Params) == 0 || c.Params[0] != '{' || json.Unmarshal(c.Params, &p) != nil {
			return // a server refuses params it cannot decode
		}
		if p.TaskID != c.TaskID || p.Name != c.Tool || p.Cursor != c.Cursor {
			t.Fatalf("params: Warden taskId %q name %q cursor %q, encoding/json %q %q %q", c.TaskID, c.Tool, c.Cursor, p.TaskID, p.Name, p.Cursor)
		}
		if (len(p.Task) > 0 && p.Task[0] == '{') != c.TaskRequested {
			t.Fatalf("params.task: Warden %v, encoding/json %s", c.TaskRequested, p.Task)
		}
		if !slices.Equal(p.Notifications.TaskIDs, c.TaskIDs) {
			t.Fatalf("notifications.taskIds: Warden %q, encoding/json %q", c.TaskIDs, p.Notifications.TaskIDs)
		}
		if (p.Meta.Related != nil) != c.HasRelatedTask || (p.Meta.Related != nil && p.Meta.Related.TaskID != c.RelatedTaskID) {
			t.Fatalf("related task: Warden %q/%v, encoding/json %+v", c.RelatedTaskID, c.HasRelatedTask, p.Meta.Related)
		}
	})
}

// BenchmarkParse measures reading one request the way every MCP adapter
// does.
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fast","arguments":{"q":"x"},"_meta":{"progressToken":1}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCheckKind(t *testing.T) {
	for _, tc := range []struct {
		body    string
		refused bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t","message":"m"}}`, false},
		{`{"jsonrpc":"2.0","method":"tasks/steer","params":{"taskId":"t","message":"m"}}`, true},
		{`{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"t"}}`, true},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, true},
		{`{"jsonrpc":"2.0","method":"tasks/list"}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t","status":"working"}}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
	} {
		c, err := Parse([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		v := CheckKind(c)
		if v.OK() == tc.refused || tc.refused && (v.Code != rules.CodeInvalidRequest || !strings.Contains(v.Detail, "needs an id")) {
			t.Errorf("CheckKind(%s) = %+v, refused want %v", tc.body, v, tc.refused)
		}
	}
}

func TestUnknownSupport(t *testing.T) {
	for _, tc := range []struct {
		unlisted  bool
		cause     string
		status    int
		code      int
		inMessage string
	}{
		{true, "", 200, ErrInvalidParams, `Unknown tool: "t"`},
		{false, "", 503, ErrInternal, `taskSupport of tool "t" from the MCP server's tools/list; retry later`},
		{false, "the cause", 503, ErrInternal, `taskSupport of tool "t" from the MCP server's tools/list: the cause`},
	} {
		v := UnknownSupport("t", tc.unlisted, tc.cause)
		status, code, msg := Answer(v.Code, v.Detail)
		if v.OK() || v.Reason != rules.ReasonTaskSupport || status != tc.status || code != tc.code || !strings.Contains(msg, tc.inMessage) {
			t.Errorf("UnknownSupport(unlisted %v) = %+v, reads %d %d %q", tc.unlisted, v, status, code, msg)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	hosts := []string{"localhost:3001", "127.0.0.1:3001", "[::1]:3001", "mcp.example"}
	origins := []string{"https://app.example"}
	for _, tc := range []struct {
		origin string
		want   bool
	}{
		{"", true},
		{"http://localhost:3001", true},
		{"http://LOCALHOST:3001", true},
		{"http://127.0.0.1:3001", true},
		{"http://[::1]:3001", true},
		{"https://mcp.example", true},
		{"https://mcp.example:8443", true}, // no port configured: any
		{"https://app.example", true},
		{"http://localhost:3002", false},
		{"http://localhost", false}, // port 80
		{"http://rebound.example:3001", false},
		{"https://app.example:443", false}, // origins compare exactly
		{"http://localhost:3001/x", false},
		{"http://user@localhost:3001", false},
		{"null", false},
		{"localhost:3001", false},
	} {
		if got := OriginAllowed(tc.origin, hosts, origins); got != tc.want {
			t.Errorf("OriginAllowed(%q) = %v, want %v", tc.origin, got, tc.want)
		}
	}
	if !OriginAllowed("http://anything.example", nil, []string{"*"}) {
		t.Error(`"*" does not allow every origin`)
	}
	if !OriginAllowed("http://[2001:db8::5]:3001", []string{"[2001:db8::5]"}, nil) {
		t.Error("a bracketed IPv6 host does not match")
	}
	if !OriginAllowed("http://localhost", []string{"localhost:80"}, nil) {
		t.Error("the scheme's default port is not the origin's")
	}
}

func TestValidHosts(t *testing.T) {
	for _, tc := range []struct {
		hosts []string
		ok    bool
	}{
		{nil, true},
		{[]string{"localhost:3001", "127.0.0.1", "[::1]:80", "mcp.example"}, true},
		{[]string{""}, false},
		{[]string{"http://mcp.example"}, false},
		{[]string{"mcp.example/mcp"}, false},
		{[]string{"user@mcp.example"}, false},
		{[]string{":3001"}, false},
	} {
		if err := ValidHosts(tc.hosts); (err == nil) != tc.ok {
			t.Errorf("ValidHosts(%q) = %v, want ok %v", tc.hosts, err, tc.ok)
		}
	}
}

// TestParseRef: completion/complete's params.ref names the prompt (Tool) or
// the resource template (URI) the policy sees, replacing params.name and
// params.uri; an ambiguous ref is refused. Before, completion/complete's
// Tool was params.name (a decoy) and its ref was never read.
func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		name, params   string
		ref, tool, uri string
		err            string
	}{
		{"prompt", `{"ref":{"type":"ref/prompt","name":"p"}}`, RefPrompt, "p", "", ""},
		{"resource", `{"ref":{"type":"ref/resource","uri":"demo://v/{n}"}}`, RefResource, "", "demo://v/{n}", ""},
		{"decoys replaced", `{"name":"x","uri":"y","ref":{"type":"ref/prompt","name":"p"}}`, RefPrompt, "p", "", ""},
		{"no ref", `{"name":"x"}`, "", "", "", ""},
		{"name twice", `{"ref":{"type":"ref/prompt","name":"a","name":"p"}}`, "", "", "", "params.ref"},
		{"names differing in case", `{"ref":{"type":"ref/prompt","name":"a","NAME":"p"}}`, "", "", "", "params.ref"},
		{"ref twice", `{"ref":{"type":"ref/prompt","name":"a"},"ref":{"type":"ref/prompt","name":"p"}}`, "", "", "", "params"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":` + tc.params + `}`))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Ref != tc.ref || c.Tool != tc.tool || c.URI != tc.uri {
				t.Fatalf("ref, tool, uri = %q, %q, %q; want %q, %q, %q", c.Ref, c.Tool, c.URI, tc.ref, tc.tool, tc.uri)
			}
			if !Decided(c.Method) || !Decided(MethodSubscribe) || !Decided(MethodUnsubscribe) {
				t.Fatal("a method naming a resource or prompt is not decided")
			}
		})
	}
}
