package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// pydanticSchema is the inputSchema the MCP Python SDK (2.3.0) lists for
// a tool taking paths: list[str], dry_run: bool = True, limit: int | None,
// opts: Opts (a model with force: bool) and tags: dict[str, int].
const pydanticSchema = `{"$defs":{"Opts":{"properties":{"force":{"title":"Force","type":"boolean"}},"required":["force"],"title":"Opts","type":"object"}},
"properties":{"paths":{"items":{"type":"string"},"title":"Paths","type":"array"},"dry_run":{"default":true,"title":"Dry Run","type":"boolean"},
"limit":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null,"title":"Limit"},"opts":{"$ref":"#/$defs/Opts"},
"tags":{"additionalProperties":{"type":"integer"},"type":"object"},"any":{"title":"Any"}},"required":["paths","opts"],"type":"object"}`

// The inputSchemas the MCP Python SDK (2.3.0, pydantic 2.14) lists for
// tools taking a tagged union (action: Annotated[Rm | Ls,
// Field(discriminator="kind")], Rm's dry_run a bool, Ls's a string), a
// dict keyed by pattern (f: dict[constr(pattern="^x_"), bool]), a plain
// union of two models (a: A | B, A's dry_run a bool and B's a string, each
// requiring its own second member) and a parameter of str | list[str].
const (
	pydanticTagged  = `{"$defs": {"Ls": {"properties": {"kind": {"const": "ls", "title": "Kind", "type": "string"}, "dry_run": {"default": "x", "title": "Dry Run", "type": "string"}}, "required": ["kind"], "title": "Ls", "type": "object"}, "Rm": {"properties": {"kind": {"const": "rm", "title": "Kind", "type": "string"}, "dry_run": {"default": true, "title": "Dry Run", "type": "boolean"}}, "required": ["kind"], "title": "Rm", "type": "object"}}, "properties": {"action": {"discriminator": {"mapping": {"ls": "#/$defs/Ls", "rm": "#/$defs/Rm"}, "propertyName": "kind"}, "oneOf": [{"$ref": "#/$defs/Rm"}, {"$ref": "#/$defs/Ls"}], "title": "Action"}}, "required": ["action"], "title": "opArguments", "type": "object"}`
	pydanticPattern = `{"properties": {"f": {"patternProperties": {"^x_": {"type": "boolean"}}, "title": "F", "type": "object"}}, "required": ["f"], "title": "flagsArguments", "type": "object"}`
	pydanticUnion   = `{"$defs": {"A": {"properties": {"dry_run": {"title": "Dry Run", "type": "boolean"}, "path": {"title": "Path", "type": "string"}}, "required": ["dry_run", "path"], "title": "A", "type": "object"}, "B": {"properties": {"dry_run": {"title": "Dry Run", "type": "string"}, "name": {"title": "Name", "type": "string"}}, "required": ["dry_run", "name"], "title": "B", "type": "object"}}, "properties": {"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "title": "A"}}, "required": ["a"], "title": "unArguments", "type": "object"}`
	// pydanticByName is what the MCP Python SDK lists for tidy(o: Cleanup),
	// Cleanup a model in the SDK's own style (alias_generator=to_camel,
	// populate_by_name=True) with path: str and dry_run: bool = True: the
	// schema names dryRun, pydantic reads dry_run too.
	pydanticByName = `{"$defs": {"Cleanup": {"properties": {"path": {"title": "Path", "type": "string"}, "dryRun": {"default": true, "title": "Dryrun", "type": "boolean"}}, "required": ["path"], "title": "Cleanup", "type": "object"}}, "properties": {"o": {"$ref": "#/$defs/Cleanup"}}, "required": ["o"], "title": "tidyArguments", "type": "object"}`
	// pydanticJSON is what the MCP Python SDK lists for read_batch(b:
	// Batch, n: Json[int] | None = None), Batch a model with paths:
	// Json[list[str]]: a string holding JSON, which pydantic parses.
	pydanticJSON    = `{"$defs": {"Batch": {"properties": {"paths": {"contentMediaType": "application/json", "contentSchema": {"items": {"type": "string"}, "type": "array"}, "title": "Paths", "type": "string"}}, "required": ["paths"], "title": "Batch", "type": "object"}}, "properties": {"b": {"$ref": "#/$defs/Batch"}, "n": {"anyOf": [{"contentMediaType": "application/json", "contentSchema": {"type": "integer"}, "type": "string"}, {"type": "null"}], "default": null, "title": "N"}}, "required": ["b"], "title": "read_batchArguments", "type": "object"}`
	pydanticStrList = `{"properties": {"p": {"anyOf": [{"type": "string"}, {"items": {"type": "string"}, "type": "array"}], "title": "P"}}, "required": ["p"], "title": "uArguments", "type": "object"}`
)

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
		// S1: the schema picks the sub-schema a value is read by, not
		// Warden (the pydantic rows each ran the tool on dry_run=False
		// through the Python SDK, and were allowed before)
		{"tagged union as declared", pydanticTagged, `{"action":{"kind":"rm","dry_run":false}}`, ""},
		{"tagged union, the other tag", pydanticTagged, `{"action":{"kind":"ls","dry_run":"x"}}`, ""},
		{"tagged union, the tag's bool as a string", pydanticTagged, `{"action":{"kind":"rm","dry_run":"false"}}`, `"action"`},
		{"tagged union, the tag's bool as 0", pydanticTagged, `{"action":{"dry_run":0,"kind":"rm"}}`, `"action"`},
		{"pattern member as declared", pydanticPattern, `{"f":{"x_dry":false}}`, ""},
		{"pattern member as a string", pydanticPattern, `{"f":{"x_dry":"false"}}`, `"f"."x_dry"`},
		{"pattern member escaped", pydanticPattern, `{"f":{"\u0078_dry":"no"}}`, `"f"."x_dry"`},
		{"pattern not matched takes additionalProperties", `{"type":"object","patternProperties":{"^x_":{"type":"boolean"}},"additionalProperties":{"type":"string"}}`, `{"y":"s","x_a":true}`, ""},
		{"pattern with a Unicode digit", `{"type":"object","patternProperties":{"^\\d+$":{"type":"boolean"}}}`, `{"١":"false"}`, `"١"`},
		{"pattern before a final newline", `{"type":"object","patternProperties":{"^x$":{"type":"boolean"}}}`, `{"x\n":"false"}`, `"x\n"`},
		{"pattern Go does not compile", `{"type":"object","patternProperties":{"^(?!y)":{"type":"boolean"}}}`, `{"z":"false"}`, `"z"`},
		{"union as declared", pydanticUnion, `{"a":{"dry_run":true,"path":"/x"}}`, ""},
		{"union, the other model", pydanticUnion, `{"a":{"dry_run":"x","name":"n"}}`, ""},
		{"union, a bool as a string the other model types", pydanticUnion, `{"a":{"dry_run":"false","path":"/x"}}`, `"a"`},
		{"int or str, a string", `{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`, `{"a":"5"}`, ""},
		{"int or bool, a float", `{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"boolean"}]}}}`, `{"a":1.0}`, `"a"`},
		{"constrained string or bool", `{"type":"object","properties":{"a":{"anyOf":[{"type":"string","maxLength":3},{"type":"boolean"}]}}}`, `{"a":"false"}`, `"a"`},
		{"optional constrained int", `{"type":"object","properties":{"a":{"anyOf":[{"type":"integer","minimum":0},{"type":"null"}]}}}`, `{"a":3}`, ""},
		{"str or list, a list", pydanticStrList, `{"p":["a"]}`, ""},
		{"str or list, a string", pydanticStrList, `{"p":"a.txt"}`, ""},
		{"str or list, a string of JSON", pydanticStrList, `{"p":"[\"..\u002fetc\"]"}`, `"p" `},
		{"str or list, a string of JSON after space", pydanticStrList, `{"p":" \n{}"}`, `"p" `},
		{"str or list, null in a string", pydanticStrList, `{"p":"null"}`, `"p" `},
		{"str alone, a string of JSON", `{"type":"object","properties":{"p":{"type":"string"}}}`, `{"p":"[1]"}`, ""},
		{"str alone titled by pydantic, a string of JSON", `{"type":"object","properties":{"my_p":{"title":"My P","type":"string"}}}`, `{"my_p":"[1]"}`, ""},
		{"unannotated (the SDK's string), a string of JSON", `{"type":"object","properties":{"my_p":{"title":"my_p","type":"string"}}}`, `{"my_p":"[1]"}`, `"my_p" `},
		{"untyped, a string of JSON", `{"type":"object","properties":{"p":{"title":"P"}}}`, `{"p":"{\"a\":1}"}`, `"p" `},
		{"undeclared, a string of JSON", `{"type":"object","properties":{"p":{"title":"P"}}}`, `{"q":"[1]"}`, ""},
		{"str or list, a string that only starts like JSON", pydanticStrList, `{"p":"[WIP] fix"}`, ""},
		{"optional str, a string that only starts like JSON", `{"type":"object","properties":{"p":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`, `{"p":"{draft} x"}`, ""},
		{"str or list, JSON only Python reads", pydanticStrList, `{"p":" [\"../x\", NaN] "}`, `"p" `},
		{"unannotated with a default, a string of JSON", `{"type":"object","properties":{"mode":{"default":"r","title":"mode","type":"string"}}}`, `{"mode":"{\"a\":1}"}`, `"mode" `},
		// T1: a member the schema does not declare that a reader takes
		// for one it declares (pydantic's populate_by_name reads the
		// field's Python name beside the alias listed; encoding/json any
		// case); each refused row was allowed before, unchecked
		{"alias as declared", pydanticByName, `{"o":{"path":"/x","dryRun":false}}`, ""},
		{"the Python name of an alias", pydanticByName, `{"o":{"path":"/x","dry_run":false}}`, `"o"."dry_run"`},
		{"the Python name of an alias, escaped", pydanticByName, `{"o":{"path":"/x","dry\u005frun":"no"}}`, `"o"."dry_run"`},
		{"the Python name beside the alias", pydanticByName, `{"o":{"path":"/x","dryRun":true,"dry_run":false}}`, `"o"."dry_run"`},
		{"another case", pydanticByName, `{"o":{"path":"/x","DryRun":false}}`, `"o"."DryRun"`},
		{"the alias of a Python name", `{"type":"object","properties":{"dry_run":{"type":"boolean"}}}`, `{"dryRun":false}`, `"dryRun"`},
		{"a Kelvin sign", `{"type":"object","properties":{"kind":{"type":"string"}}}`, `{"\u212aind":"rm"}`, "another spelling"},
		{"the long s", `{"type":"object","properties":{"scope":{"type":"string"}}}`, `{"ſcope":"all"}`, "another spelling"},
		{"both spellings declared", `{"type":"object","properties":{"dry_run":{"type":"boolean"},"dryRun":{"type":"string"}}}`, `{"dry_run":false,"dryRun":"x"}`, ""},
		{"a spelling declared untyped", `{"type":"object","properties":{"a_b":true,"aB":{"type":"string"}}}`, `{"a_b":1,"aB":"x"}`, ""},
		{"a member no spelling declares", pydanticByName, `{"o":{"path":"/x","dry":false}}`, ""},
		// T2: strings the schema says hold JSON: TestCheckTypesJSON
		{"the spelling of a pattern's member", pydanticPattern, `{"f":{"x_dry":true},"F":{}}`, "another spelling"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRow(t, tc.schema, tc.args, tc.refused) })
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
	if _, v := CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(`{"a":1}`)}, ArgumentTypes([]byte(diamond))); v.OK() || !strings.Contains(v.Detail, "could not be checked") {
		t.Fatalf("a schema of 2^30 ways: %+v", v)
	}
	// Only tools/call is held to a tool's schema.
	if _, v := CheckTypes(Call{Kind: KindRequest, Method: MethodPromptsGet, Arguments: []byte(`{"paths":"x"}`)}, ArgumentTypes([]byte(pydanticSchema))); !v.OK() {
		t.Fatalf("prompts/get held to a tool's schema: %s", v.Detail)
	}
}

// checkRow checks args against schema as a tools/call's, and fails t
// unless the call is allowed (refused "") or refused -32602 with a detail
// naming refused (an argument's path, or words of the refusal). It returns
// the arguments as the policy reads them (nil: as they came).
func checkRow(t *testing.T, schema, args, refused string) json.RawMessage {
	t.Helper()
	policy, v := CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(args)}, ArgumentTypes([]byte(schema)))
	switch {
	case refused == "" && !v.OK():
		t.Fatalf("refused: %s", v.Detail)
	case refused != "" && v.OK():
		t.Fatalf("allowed (the policy reading %s), want a refusal naming %s", policy, refused)
	case refused != "" && (!strings.Contains(v.Detail, refused) || v.Code != rules.CodeInvalidParams || policy != nil):
		t.Fatalf("refusal %v %q (%s), want invalid params naming %s", v.Code, v.Detail, policy, refused)
	}
	return policy
}

// FuzzCheckTypes: any schema compiles and any arguments are checked, within
// the bounds (no panic, no endless recursion through $refs).
func FuzzCheckTypes(f *testing.F) {
	f.Add(pydanticSchema, `{"paths":["a"],"opts":{"force":true}}`)
	f.Add(`{"$ref":"#","allOf":[{"$ref":"#"}],"anyOf":[{"$ref":"#"}]}`, `{"a":[{"b":1}]}`)
	f.Add(`{"items":[{"type":"string"}],"additionalItems":{"$ref":"#/items/0"}}`, `["a",1]`)
	f.Add(pydanticTagged, `{"action":{"kind":"rm","dry_run":"false"}}`)
	f.Add(pydanticUnion, `{"a":{"dry_run":"false","path":"/x"}}`)
	f.Add(`{"type":"object","patternProperties":{"^[\\d]\\u0041$":{"type":"boolean"},"(?<=a)":{}}}`, `{"1A":"x"}`)
	f.Add(pydanticJSON, `{"b":{"paths":"[\"a\", \"\\ud83d\\ude00\"]"},"n":"-5"}`)
	f.Add(pydanticJSONNested, `{"v":"[\"1\",\"{\\\"a\\\":1}\"]"}`)
	f.Add(pydanticJSONOrStr, `{"m":{"v":"[\"a\"]"}}`)
	f.Add(pydanticJSONModel, `{"o":"{\"path\":\"/x\",\"dry_run\":false}"}`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		_, _ = CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(args)}, ArgumentTypes([]byte(schema)))
	})
}
