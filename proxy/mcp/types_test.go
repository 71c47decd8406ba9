package mcp

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestArgumentTypes (P1 in docs/security.md): the sidecar holds each
// argument of a tools/call to the JSON type the tool's inputSchema declares
// (learned from tools/list, Warden's own or the caller's), before the policy
// and the server: a string where the schema says array or boolean, a number
// where it says boolean, is refused -32602 and the server never runs the
// call (a Python SDK server reads "[\"../x\"]" as a list and "false" as
// false; the policy judged a string). Before, every row reached the server.
func TestArgumentTypes(t *testing.T) {
	h := newHarness(t, Config{})
	h.up.configure(func(u *fakeUpstream) {
		u.toolsFor = map[string][]map[string]any{"Bearer alice": {{
			"name": "remove",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
				"paths":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"dry_run": map[string]any{"type": "boolean", "default": true},
				"limit":   map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "null"}}},
				"batch":   map[string]any{"type": "string", "contentMediaType": "application/json"},
			}},
		}}}
	})
	for _, tc := range []struct {
		name    string
		args    map[string]any
		refused string
	}{
		{"as declared", map[string]any{"paths": []any{"a"}, "dry_run": false, "limit": nil}, ""},
		{"list as a string of JSON", map[string]any{"paths": `["..\u002fx"]`}, `"paths"`},
		{"bool as a string", map[string]any{"paths": []any{}, "dry_run": "false"}, `"dry_run"`},
		{"bool as a number", map[string]any{"paths": []any{}, "dry_run": 0}, `"dry_run"`},
		{"element as a number", map[string]any{"paths": []any{"a", 1}}, `"paths"[1]`},
		{"integer as a string", map[string]any{"paths": []any{}, "limit": "3"}, `"limit"`},
		// T1: not declared, but read as a member declared by some readers
		{"a declared member's alias", map[string]any{"paths": []any{}, "dryRun": false}, `"dryRun"`},
		{"a declared member in another case", map[string]any{"paths": []any{}, "DRY_RUN": false}, `"DRY_RUN"`},
		{"undeclared", map[string]any{"paths": []any{}, "note": "x"}, ""},
		// T2: a string the schema says holds JSON, which the tool parses:
		// decided on the value it holds (TestEnforceJSONArguments) and
		// forwarded as it came when Warden reads it as the tool's parser
		// does; refused when not (both rows reached the server before
		// T2, neither under T2's first form)
		{"a string holding JSON by its schema", map[string]any{"paths": []any{}, "batch": `["a", {"b": null}]`}, ""},
		{"a string holding JSON read two ways", map[string]any{"paths": []any{}, "batch": `{"a":"x","a":"y"}`}, `"batch"`},
		{"a string holding NaN", map[string]any{"paths": []any{}, "batch": `[NaN]`}, `"batch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.up.received("tools/call"))
			r := h.post(t, alice, rpc(7, "tools/call", map[string]any{"name": "remove", "arguments": tc.args}), nil)
			ran := len(h.up.received("tools/call")) > before
			if tc.refused == "" {
				if r.status != http.StatusOK || r.errCode(t) != 0 || !ran {
					t.Fatalf("as declared: HTTP %d %s (ran: %v)", r.status, r.body, ran)
				}
				calls := h.up.received("tools/call")
				if got := calls[len(calls)-1].params["arguments"]; !reflect.DeepEqual(got, tc.args) {
					t.Fatalf("the server got %v, want the arguments as sent, %v", got, tc.args)
				}
				return
			}
			if ran || r.errCode(t) != mcp.ErrInvalidParams || !strings.Contains(r.errMessage(t), "argument "+tc.refused+" ") {
				t.Fatalf("HTTP %d %s (the server ran it: %v), want -32602 naming argument %s", r.status, r.body, ran, tc.refused)
			}
		})
	}
}
