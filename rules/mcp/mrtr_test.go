package mcp

import (
	"errors"
	"strings"
	"testing"
)

// TestInputResponses: a multi round-trip retry's params.inputResponses and
// params.requestState (SEP-2322; tasks/update's inputResponses) are read
// strictly, as every member Warden reads: each spelled once in one way
// (pydantic's models read input_responses and request_state too), answers
// objects, and no answer naming a task of its own (a task id Warden never
// sealed nor checked, which a server correlating answers by it would
// take). Before, neither was read: every row parsed, the refused ones
// reached the server undecided.
func TestInputResponses(t *testing.T) {
	const head = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy"`
	for _, tc := range []struct {
		name, params string
		want         string // InputResponses as read
		state        string
		refused      string
	}{
		{"absent", ``, "", "", ""},
		{"null", `,"inputResponses":null`, "", "", ""},
		{"an answer and state", `,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"s1"`, `{"confirm":{"action":"accept","content":{"ok":true}}}`, "s1", ""},
		{"an answer with _meta of its own", `,"inputResponses":{"k":{"action":"accept","_meta":{"x":1}}}`, `{"k":{"action":"accept","_meta":{"x":1}}}`, "", ""},
		{"in capitals", `,"InputResponses":{"k":{"action":"accept"}}`, "", "", `must be spelled "inputResponses"`},
		{"python spelling", `,"input_responses":{"k":{"action":"accept"}}`, "", "", `"inputResponses"`},
		{"beside its python spelling", `,"inputResponses":{},"input_responses":{"k":{"action":"accept"}}`, "", "", `"inputResponses"`},
		{"state in python spelling", `,"request_state":"s"`, "", "", `"requestState"`},
		{"state not a string", `,"requestState":{"task":"t"}`, "", "", "params.requestState must be a string"},
		{"not an object", `,"inputResponses":[{"action":"accept"}]`, "", "", "params.inputResponses: must be an object"},
		{"an answer not an object", `,"inputResponses":{"k":"accept"}`, "", "", `"k" must be an object`},
		{"a key twice", `,"inputResponses":{"k":{"action":"decline"},"k":{"action":"accept"}}`, "", "", "appears twice"},
		{"keys differing in case", `,"inputResponses":{"k":{"action":"decline"},"K":{"action":"accept"}}`, "", "", "differ only in case"},
		{"an answer's _meta twice", `,"inputResponses":{"k":{"_meta":{},"_META":{}}}`, "", "", "differ only in case"},
		{"an answer naming a task", `,"inputResponses":{"k":{"action":"accept","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"raw"}}}}`, "", "", "names a task"},
		{"an answer naming a task, other spelling", `,"inputResponses":{"k":{"action":"accept","_meta":{"io.modelcontextprotocol/Related-Task":{"taskId":"raw"}}}}`, "", "", `must be spelled "io.modelcontextprotocol/related-task"`},
		{"an answer's _meta not an object", `,"inputResponses":{"k":{"_meta":"x"}}`, "", "", "_meta must be an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head + tc.params + `}}`))
			if !parsedUnlessRefused(t, err, tc.refused) {
				return
			}
			if string(c.InputResponses) != tc.want || c.RequestState != tc.state || c.HasRequestState != (tc.state != "") {
				t.Fatalf("read %s %q %v, want %s %q", c.InputResponses, c.RequestState, c.HasRequestState, tc.want, tc.state)
			}
		})
	}
}

// parsedUnlessRefused checks Parse's error: a -32600 naming params and
// refused when refused is set (false: nothing more to check), else none.
func parsedUnlessRefused(t *testing.T, err error, refused string) bool {
	t.Helper()
	if refused != "" {
		var e *Error
		if !errors.As(err, &e) || e.Code != ErrInvalidRequest || !strings.Contains(e.Message, refused) || !strings.Contains(e.Message, "params") {
			t.Fatalf("error %v, want -32600 naming %q", err, refused)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
