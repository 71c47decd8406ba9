package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

// TestEnforceTaskMCPInput decides MCP requests through the Enforcer with the
// example operator policies of deploy/policies (only these tools for this
// principal; no arguments matching these patterns) and a policy on the
// resource URI and prompt name: what a request names reaches the operator
// policy (input.mcp), and arguments over the bounds are refused before it.
// On the old code input.mcp does not exist: every refusal row is allowed.
func TestEnforceTaskMCPInput(t *testing.T) {
	ctx := context.Background()
	uri := writeRego(t, "uri.rego", `package warden.mcp
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": "no secrets"} if startswith(input.mcp.uri, "file:///secrets/")
deny contains {"code": "FORBIDDEN", "msg": "no such prompt for you"} if input.mcp.prompt == "admin"
`)
	eng, err := policies.New(ctx, policies.Config{Files: []string{"../../../deploy/policies/mcp-tools.rego", "../../../deploy/policies/mcp-arguments.rego", uri}})
	if err != nil {
		t.Fatal(err)
	}
	e := newDecider(t, proxy.Config{})
	e.e.Swap(devAuth(t), eng)

	deep := strings.Repeat(`{"a":`, mcp.MaxArgumentDepth+1) + `1` + strings.Repeat(`}`, mcp.MaxArgumentDepth+1)
	big := `{"s":"` + strings.Repeat("x", mcp.MaxArgumentBytes) + `"}`
	bot := "agent://support-bot"
	for _, tc := range []struct {
		name, principal, method, body string
		reason                        rules.Reason
		detail                        string // in the refusal's detail
	}{
		{"listed tool", bot, mcp.MethodToolsCall, `{"name":"test_simple_text"}`, "", ""},
		{"unlisted tool", bot, mcp.MethodToolsCall, `{"name":"test_image_content"}`, rules.ReasonOperatorPolicy, "may call only these tools: get_weather, test_simple_text"},
		{"unlisted tool, another principal", "agent://ops", mcp.MethodToolsCall, `{"name":"test_image_content"}`, "", ""},
		{"plain arguments", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":{"city":"Paris","days":3}}`, "", ""},
		{"traversal in arguments", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":{"opts":[{"city":"../../etc/passwd"}]}}`, rules.ReasonOperatorPolicy, "matches a forbidden pattern"},
		{"traversal in prompt arguments", bot, mcp.MethodPromptsGet, `{"name":"greet","arguments":{"who":"../x"}}`, rules.ReasonOperatorPolicy, "matches a forbidden pattern"},
		{"prompt name", bot, mcp.MethodPromptsGet, `{"name":"admin"}`, rules.ReasonOperatorPolicy, "no such prompt for you"},
		{"resource uri", bot, mcp.MethodResourcesRead, `{"uri":"file:///secrets/key"}`, rules.ReasonOperatorPolicy, "no secrets"},
		{"other resource", bot, mcp.MethodResourcesRead, `{"uri":"file:///docs/a"}`, "", ""},
		{"arguments too deep", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":` + deep + `}`, rules.ReasonArgumentsTooLarge, "nested deeper than the limit of 16"},
		{"arguments at the depth limit", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":` + strings.Repeat(`[`, mcp.MaxArgumentDepth) + strings.Repeat(`]`, mcp.MaxArgumentDepth) + `}`, "", ""},
		{"member given twice", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":{"city":"../x","city":"Paris"}}`, rules.ReasonMalformedRequest, "given twice"},
		{"members folding alike", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":{"x":{"city":"Paris","CITY":"../x"}}}`, rules.ReasonMalformedRequest, "differ only in case"},
		{"arguments too large", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":` + big + `}`, rules.ReasonArgumentsTooLarge, "exceeds the limit of 65536"},
		{"depth counts no brackets in strings", bot, mcp.MethodToolsCall, `{"name":"get_weather","arguments":{"s":"` + strings.Repeat("[{", 40) + `"}}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mcp.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":` + tc.body + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if !mcp.Decided(c.Method) {
				t.Fatalf("%s is not decided: the operator policy never sees it", c.Method)
			}
			d := enforceTask(t, e, Request{Principal: authn.Principal{ID: tc.principal, Method: "dev"}, Call: c})
			d.Settle(d.Allow)
			if d.Allow != (tc.reason == "") || (!d.Allow && d.Reason != tc.reason) || !strings.Contains(d.Message, tc.detail) {
				t.Fatalf("allow=%v reason=%q detail=%q, want reason %q detail %q", d.Allow, d.Reason, d.Message, tc.reason, tc.detail)
			}
		})
	}
}

// TestMCPInputMemo: decisions of a policy that reads the arguments are
// memoized on them: the same tool with other arguments is decided afresh.
func TestMCPInputMemo(t *testing.T) {
	ctx := context.Background()
	eng, err := policies.New(ctx, policies.Config{Files: []string{"../../../deploy/policies/mcp-arguments.rego"}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := eng.Memoized(); !ok {
		t.Fatalf("not memoized: %s", why)
	}
	for i, args := range []string{`{"p":"a"}`, `{"p":"../a"}`, `{"p":"a"}`, `{"p":"../a"}`} {
		var v any
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Fatal(err)
		}
		in := &policies.Input{Protocol: "mcp", Message: policies.Message{Type: mcp.MethodToolsCall}, MCP: &policies.MCP{Tool: "t", Arguments: v}}
		d, err := eng.Evaluate(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if want := i%2 == 1; (len(d) > 0) != want {
			t.Fatalf("arguments %s: denials %+v, want denied=%v", args, d, want)
		}
	}
}

// TestEnforceJSONArguments (T2 in docs/security.md): a string the tool's
// inputSchema says holds JSON (pydantic's Json[T]) reaches the operator
// policy as the value it holds (Request.Arguments, from mcp.CheckTypes),
// so the shipped argument patterns judge what the tool reads: the escaped
// traversal is refused by deploy/policies/mcp-arguments.rego, a plain
// path passes, and the value's depth counts within the arguments' bound.
// Judged as the string it came as (Arguments unset, as before this), the
// traversal row was allowed.
func TestEnforceJSONArguments(t *testing.T) {
	ctx := context.Background()
	eng, err := policies.New(ctx, policies.Config{Files: []string{"../../../deploy/policies/mcp-arguments.rego"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newDecider(t, proxy.Config{})
	e.e.Swap(devAuth(t), eng)
	// read_batch(b: Batch), Batch a pydantic model with paths: Json[list[str]]
	types := mcp.ArgumentTypes([]byte(`{"$defs": {"Batch": {"properties": {"paths": {"contentMediaType": "application/json", "contentSchema": {"items": {"type": "string"}, "type": "array"}, "title": "Paths", "type": "string"}}, "required": ["paths"], "title": "Batch", "type": "object"}}, "properties": {"b": {"$ref": "#/$defs/Batch"}}, "required": ["b"], "type": "object"}`))
	// read_any(b: Any), Any a model with paths: Json (any JSON)
	anyJSON := mcp.ArgumentTypes([]byte(`{"properties": {"b": {"properties": {"paths": {"contentMediaType": "application/json", "contentSchema": {}, "type": "string"}}, "type": "object"}}, "type": "object"}`))
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, args string
		types      mcp.Types
		reason     rules.Reason
		detail     string
	}{
		{"a path", `{"b":{"paths":"[\"docs/a.md\"]"}}`, types, "", ""},
		{"an escaped traversal", `{"b":{"paths":"[\"..\\u002fetc/passwd\"]"}}`, types, rules.ReasonOperatorPolicy, "matches a forbidden pattern"},
		{"a traversal", `{"b":{"paths":"[\"docs/a.md\",\"../x\"]"}}`, types, rules.ReasonOperatorPolicy, "matches a forbidden pattern"},
		{"any JSON, at the bound with the string's place", `{"b":{"paths":"` + nested(mcp.MaxArgumentDepth-2) + `"}}`, anyJSON, "", ""},
		{"any JSON, past the bound with the string's place", `{"b":{"paths":"` + nested(mcp.MaxArgumentDepth-1) + `"}}`, anyJSON, rules.ReasonArgumentsTooLarge, "nested deeper than the limit of 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mcp.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_batch","arguments":` + tc.args + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			args, v := mcp.CheckTypes(c, tc.types)
			if !v.OK() {
				t.Fatalf("types refused: %s", v.Detail)
			}
			d := enforceTask(t, e, Request{Principal: authn.Principal{ID: "agent://ops", Method: "dev"}, Call: c, Arguments: args})
			d.Settle(d.Allow)
			if d.Allow != (tc.reason == "") || (!d.Allow && d.Reason != tc.reason) || !strings.Contains(d.Message, tc.detail) {
				t.Fatalf("allow=%v reason=%q detail=%q, want reason %q detail %q", d.Allow, d.Reason, d.Message, tc.reason, tc.detail)
			}
		})
	}
}
