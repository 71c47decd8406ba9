package mcp

import (
	"fmt"
	"github.com/agentwarden/warden/rules"

	"strings"
	"testing"
)

// pydanticSchema is the inputSchema the MCP Python SDK (2.3.0) lists for
// a tool taking paths: list[str], dry_run: bool = True, limit: int | None,
// opts: Opts (a model with force: bool) and tags: dict[str, int].
const pydanticSchema = `{"$defs":{"Opts":{"properties":{"force":{"title":"Force","type":"boolean"}},"required":["force"],"title":"Opts","type":"object"}},
"properties":{"paths":{"items":{"type":"string"},"title":"Paths","type":"array"},"dry_run":{"default":true,"title":"Dry Run","type":"boolean"},
"limit":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null,"title":"Limit"},"opts":{"$ref":"#/$defs/Opts"},
"tags":{"additionalProperties":{"type":"integer"},"type":"object"},"any":{"title":"Any"}},"required":["paths","opts"],"type":"object"}`

// pydanticPatterns is the inputSchema the MCP Python SDK (2.3.0) lists for
// a tool taking limits: dict[Annotated[str, StringConstraints(pattern=r"^n_(\d+|x)$")], int].
const pydanticPatterns = `{"properties":{"limits":{"patternProperties":{"^n_(\\d+|x)$":{"type":"integer"}},"title":"Limits","type":"object"}},"required":["limits"],"title":"payArguments","type":"object"}`

// eitherSchema is the inputSchema the MCP Python SDK (2.3.0) lists for a
// tool taking paths: list[str] | str.
const eitherSchema = `{"properties":{"paths":{"anyOf":[{"items":{"type":"string"},"type":"array"},{"type":"string"}],"title":"Paths"}},"required":["paths"],"title":"readArguments","type":"object"}`

// TestCheckTypes: an argument of a JSON type the tool's inputSchema does
// not allow is refused, at any depth the schema declares one (P1: the MCP
// Python SDK reads a string of JSON as the list or object declared and
// "false" or 0 as a bool; the policy judged the string or number).
func TestCheckTypes(t *testing.T) {
	for _, tc := range []struct {
		name, schema, args string
		refused            string // "" allowed; else the path the refusal names
	}{
		{"as declared", pydanticSchema, `{"paths":["a"],"dry_run":false,"limit":3,"opts":{"force":true},"tags":{"x":1},"any":"s"}`, ""},
		{"optional null", pydanticSchema, `{"paths":[],"limit":null,"opts":{"force":false}}`, ""},
		{"undeclared member", pydanticSchema, `{"paths":[],"opts":{"force":true},"extra":"x"}`, ""},
		{"untyped member takes anything", pydanticSchema, `{"paths":[],"opts":{"force":true},"any":[1,{"a":"b"}]}`, ""},
		{"list as a string of JSON", pydanticSchema, `{"paths":"[\"..\\u002fetc\"]","opts":{"force":true}}`, `"paths"`},
		{"bool as a string", pydanticSchema, `{"paths":[],"dry_run":"false","opts":{"force":true}}`, `"dry_run"`},
		{"bool as a number", pydanticSchema, `{"paths":[],"dry_run":0,"opts":{"force":true}}`, `"dry_run"`},
		{"string element as a number", pydanticSchema, `{"paths":["a",1],"opts":{"force":true}}`, `"paths"[1]`},
		{"integer as a string", pydanticSchema, `{"paths":[],"limit":"12","opts":{"force":true}}`, `"limit"`},
		{"integer as a bool", pydanticSchema, `{"paths":[],"limit":true,"opts":{"force":true}}`, `"limit"`},
		{"model as a string of JSON", pydanticSchema, `{"paths":[],"opts":"{\"force\":true}"}`, `"opts"`},
		{"nested bool through a $ref as a string", pydanticSchema, `{"paths":[],"opts":{"force":"yes"}}`, `"opts"."force"`},
		{"additional property of another type", pydanticSchema, `{"paths":[],"opts":{"force":true},"tags":{"x":"1"}}`, `"tags"."x"`},
		{"arguments not an object", pydanticSchema, `["a"]`, "params.arguments"},
		{"arguments null", pydanticSchema, `null`, ""},
		{"no schema", ``, `{"paths":"x"}`, ""},
		{"schema without types", `{"properties":{"a":{"description":"x"}}}`, `{"a":"x"}`, ""},
		{"type list", `{"type":"object","properties":{"a":{"type":["string","null"]}}}`, `{"a":null}`, ""},
		{"type list refused", `{"type":"object","properties":{"a":{"type":["string","null"]}}}`, `{"a":[]}`, `"a"`},
		{"enum without a type", `{"type":"object","properties":{"a":{"enum":["x","y"]}}}`, `{"a":1}`, `"a"`},
		{"const bool", `{"type":"object","properties":{"a":{"const":true}}}`, `{"a":"true"}`, `"a"`},
		{"oneOf", `{"type":"object","properties":{"a":{"oneOf":[{"type":"array","items":{"type":"string"}},{"type":"object"}]}}}`, `{"a":["x"]}`, ""},
		{"oneOf refused inside", `{"type":"object","properties":{"a":{"oneOf":[{"type":"array","items":{"type":"string"}},{"type":"object"}]}}}`, `{"a":[true]}`, `"a"[0]`},
		{"anyOf with an untyped alternative", `{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{}]}}}`, `{"a":"s"}`, ""},
		{"prefixItems", `{"type":"object","properties":{"a":{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}]}}}`, `{"a":["x","false"]}`, `"a"[1]`},
		{"nullable", `{"type":"object","properties":{"a":{"type":"string","nullable":true}}}`, `{"a":null}`, ""},
		{"recursive $ref", `{"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"},"v":{"type":"integer"}}}},"$ref":"#/$defs/N"}`, `{"next":{"next":{"v":"1"}}}`, `"next"."next"."v"`},
		{"self $ref", `{"$ref":"#","type":"object","properties":{"a":{"type":"string"}}}`, `{"a":"x"}`, "could not be checked"},
		{"$anchor", `{"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"city":{"type":"string"}}}},"type":"object","properties":{"a":{"$ref":"#addressDef"}}}`, `{"a":{"city":["x"]}}`, `"a"."city"`},
		{"remote $ref not followed", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, `{"a":1}`, ""},
		{"schema not JSON", `{"type":`, `{"a":1}`, ""},
		// patternProperties: the MCP Python SDK lists dict[Annotated[str,
		// StringConstraints(pattern=...)], int] so, and pydantic reads
		// {"n_x": "5000"} as 5000
		{"patternProperties", pydanticPatterns, `{"limits":{"n_x":5000}}`, ""},
		{"patternProperties of another type", pydanticPatterns, `{"limits":{"n_x":"5000"}}`, `"limits"."n_x"`},
		{"patternProperties, a name RE2 does not match", pydanticPatterns, `{"limits":{"n_\u0663":"5000"}}`, `"limits"."n_٣"`},
		{"patternProperties, an escaped name", pydanticPatterns, `{"limits":{"n\u005fx":"5000"}}`, `"limits"."n_x"`},
		{"patternProperties and properties both apply", `{"type":"object","properties":{"n_a":{}},"patternProperties":{"^n_":{"type":"integer"}}}`, `{"n_a":"1"}`, `"n_a"`},
		{"patternProperties, each by its pattern", `{"type":"object","patternProperties":{"^s_":{"type":"string"},"^n_":{"type":"integer"}}}`, `{"s_a":"x","n_a":1}`, ""},
		{"patternProperties, additionalProperties for the rest", `{"type":"object","patternProperties":{"^n_":{"type":"integer"}},"additionalProperties":{"type":"integer"}}`, `{"x":"1"}`, `"x"`},
		// a string holding JSON where the schema allows that JSON too: the
		// Python SDK parses it (pre_parse_json) for any parameter not
		// declared as a plain str
		{"string of JSON, string or list", eitherSchema, `{"paths":"[\"..\\u002fetc\"]"}`, `"paths"`},
		{"string of JSON with Python's NaN", eitherSchema, `{"paths":" [\"../x\", NaN] "}`, `"paths"`},
		{"string of no JSON, string or list", eitherSchema, `{"paths":"[WIP] x"}`, ""},
		{"list, string or list", eitherSchema, `{"paths":["a"]}`, ""},
		{"string of JSON given twice, the last plain", eitherSchema, `{"paths":"[1]","paths":"a"}`, ""},
		{"string of JSON, untyped", `{"type":"object","properties":{"opts":{"title":"Opts"}}}`, `{"opts":"{\"force\":true}"}`, `"opts"`},
		{"string of null, optional string", `{"type":"object","properties":{"note":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`, `{"note":"null"}`, `"note"`},
		{"string of a list, optional string", `{"type":"object","properties":{"note":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`, `{"note":"[1]"}`, ""},
		{"string of JSON, plain string", `{"type":"object","properties":{"s":{"type":"string"}}}`, `{"s":"{\"a\":1}"}`, ""},
		{"string of JSON, no such property", `{"type":"object","properties":{}}`, `{"x":"[1]"}`, ""},
		{"string of a bool or number, untyped", `{"type":"object","properties":{"a":{},"b":{}}}`, `{"a":"true","b":" 5 "}`, ""},
		{"string of JSON, unannotated Python parameter", `{"type":"object","properties":{"paths":{"title":"paths","type":"string"},"mode":{"default":"r","title":"mode","type":"string"}}}`, `{"paths":"[\"../x\"]"}`, `"paths"`},
		{"string of JSON, unannotated Python parameter with a default", `{"type":"object","properties":{"mode":{"default":"r","title":"mode","type":"string"}}}`, `{"mode":"{\"a\":1}"}`, `"mode"`},
		{"string of JSON, annotated str", `{"type":"object","properties":{"count":{"default":"1","title":"Count","type":"string"}}}`, `{"count":"[1]"}`, ""},
		{"property true is no additional property", `{"type":"object","properties":{"a":true},"additionalProperties":{"type":"string"}}`, `{"a":1}`, ""},
		{"patternProperties RE2 cannot read", `{"type":"object","patternProperties":{"^(?=n)n_":{"type":"integer"}}}`, `{"n_a":"1"}`, `"n_a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(tc.args)}
			v := CheckTypes(c, ArgumentTypes([]byte(tc.schema)))
			switch {
			case tc.refused == "" && !v.OK():
				t.Fatalf("refused: %s", v.Detail)
			case tc.refused != "" && v.OK():
				t.Fatalf("allowed, want a refusal naming %s", tc.refused)
			case tc.refused != "" && (!strings.Contains(v.Detail, "argument "+tc.refused+" ") && !strings.Contains(v.Detail, tc.refused) || v.Code != rules.CodeInvalidParams):
				t.Fatalf("refusal %v %q, want invalid params naming argument %s", v.Code, v.Detail, tc.refused)
			}
		})
	}
	// A schema whose alternatives multiply (each layer two ways to the
	// next) is checked within a bound, and refused past it, not for 2^30
	// steps.
	var defs []string
	for i := range 30 {
		next := fmt.Sprintf(`{"$ref":"#/$defs/L%d"}`, i+1)
		defs = append(defs, fmt.Sprintf(`"L%d":{"anyOf":[%s,{"allOf":[%s]}]}`, i, next, next))
	}
	defs = append(defs, `"L30":{"type":"string"}`)
	diamond := `{"$defs":{` + strings.Join(defs, ",") + `},"type":"object","properties":{"a":{"$ref":"#/$defs/L0"}}}`
	if v := CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(`{"a":1}`)}, ArgumentTypes([]byte(diamond))); v.OK() || !strings.Contains(v.Detail, "could not be checked") {
		t.Fatalf("a schema of 2^30 ways: %+v", v)
	}
	// Only tools/call is held to a tool's schema.
	if v := CheckTypes(Call{Kind: KindRequest, Method: MethodPromptsGet, Arguments: []byte(`{"paths":"x"}`)}, ArgumentTypes([]byte(pydanticSchema))); !v.OK() {
		t.Fatalf("prompts/get held to a tool's schema: %s", v.Detail)
	}
}

// FuzzCheckTypes: any schema compiles and any arguments are checked, within
// the bounds (no panic, no endless recursion through $refs).
func FuzzCheckTypes(f *testing.F) {
	f.Add(pydanticSchema, `{"paths":["a"],"opts":{"force":true}}`)
	f.Add(`{"$ref":"#","allOf":[{"$ref":"#"}],"anyOf":[{"$ref":"#"}]}`, `{"a":[{"b":1}]}`)
	f.Add(`{"items":[{"type":"string"}],"additionalItems":{"$ref":"#/items/0"}}`, `["a",1]`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		_ = CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(args)}, ArgumentTypes([]byte(schema)))
	})
}
