package mcp

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// More inputSchemas pydantic (2.14.3) lists: v: Json (any JSON, an empty
// contentSchema), v: Json[list[Json[int]]] (strings of JSON within one),
// o: Json[Cleanup] (the SDK's model style, dryRun listed, dry_run read),
// m: M, M a model with v: str | Json[list[str]], and with v:
// Json[list[str]] | str (pydantic reads a string as the str in either
// order; in a model, since the SDK parses a top-level parameter's string of
// JSON itself: jsonString).
const (
	pydanticJSONAny    = `{"properties": {"v": {"contentMediaType": "application/json", "contentSchema": {}, "title": "V", "type": "string"}}, "required": ["v"], "title": "J", "type": "object"}`
	pydanticJSONNested = `{"properties": {"v": {"contentMediaType": "application/json", "contentSchema": {"items": {"contentMediaType": "application/json", "contentSchema": {"type": "integer"}, "type": "string"}, "type": "array"}, "title": "V", "type": "string"}}, "required": ["v"], "title": "N", "type": "object"}`
	pydanticJSONModel  = `{"$defs": {"Cleanup": {"properties": {"path": {"title": "Path", "type": "string"}, "dryRun": {"default": true, "title": "Dryrun", "type": "boolean"}}, "required": ["path"], "title": "Cleanup", "type": "object"}}, "properties": {"o": {"contentMediaType": "application/json", "contentSchema": {"$ref": "#/$defs/Cleanup"}, "title": "O", "type": "string"}}, "required": ["o"], "type": "object"}`
	pydanticStrOrJSON  = `{"$defs": {"M": {"properties": {"v": {"anyOf": [{"type": "string"}, {"contentMediaType": "application/json", "contentSchema": {"items": {"type": "string"}, "type": "array"}, "type": "string"}], "title": "V"}}, "required": ["v"], "title": "M", "type": "object"}}, "properties": {"m": {"$ref": "#/$defs/M"}}, "type": "object"}`
	pydanticJSONOrStr  = `{"$defs": {"M": {"properties": {"v": {"anyOf": [{"contentMediaType": "application/json", "contentSchema": {"items": {"type": "string"}, "type": "array"}, "type": "string"}, {"type": "string"}], "title": "V"}}, "required": ["v"], "title": "M", "type": "object"}}, "properties": {"m": {"$ref": "#/$defs/M"}}, "type": "object"}`
)

// TestCheckTypesJSON (T2 in docs/security.md): a string the schema says
// holds JSON (pydantic's Json[T]) is read as the tool's parser reads it
// when Warden reads it exactly so, its value held to the contentSchema, and
// the policy reads the arguments with the value in the string's place;
// what pydantic's parser (jiter) reads otherwise than Warden, or not at
// all, is refused. Before (T2's first form) every string here was refused,
// and before T2 every one was allowed and judged as a string.
func TestCheckTypesJSON(t *testing.T) {
	for _, tc := range []struct {
		name, schema, args string
		// policy: the arguments the policy reads ("" as sent); refused:
		// what the refusal names ("" allowed)
		policy, refused string
	}{
		{"a list of paths", pydanticJSON, `{"b":{"paths":"[\"a.txt\"]"}}`, `{"b":{"paths":["a.txt"]}}`, ""},
		{"an escaped traversal, judged decoded", pydanticJSON, `{"b":{"paths":"[\"..\\u002fetc\"]"}}`, `{"b":{"paths":["..\u002fetc"]}}`, ""},
		{"white space around it", pydanticJSON, `{"b":{"paths":" \t[\"a\"]\r\n"}}`, "{\"b\":{\"paths\": \t[\"a\"]\r\n}}", ""},
		{"two strings, beside other members", pydanticJSON, `{"n":"-5", "b" : {"paths":"[]"}}`, `{"n":-5, "b" : {"paths":[]}}`, ""},
		{"optional, null", pydanticJSON, `{"b":{"paths":"[]"},"n":null}`, `{"b":{"paths":[]},"n":null}`, ""},
		{"a media type with parameters", `{"type":"object","properties":{"a":{"type":"string","contentMediaType":"Application/JSON; charset=utf-8"}}}`, `{"a":"1"}`, `{"a":1}`, ""},
		{"a +json media type", `{"type":"object","properties":{"a":{"type":"string","contentMediaType":"application/geo+json"}}}`, `{"a":"{}"}`, `{"a":{}}`, ""},
		{"after another alternative", `{"type":"object","properties":{"a":{"anyOf":[{"type":"null"},{"type":"string","contentMediaType":"application/json"}]}}}`, `{"a":"1"}`, `{"a":1}`, ""},
		{"after another alternative, in a model", `{"type":"object","properties":{"m":{"type":"object","properties":{"a":{"anyOf":[{"type":"null"},{"type":"string","contentMediaType":"application/json"}]}}}}}`, `{"m":{"a":"[1]"}}`, `{"m":{"a":[1]}}`, ""},
		{"top level, a list (the SDK parses it first: jsonString)", `{"type":"object","properties":{"a":{"anyOf":[{"type":"null"},{"type":"string","contentMediaType":"application/json"}]}}}`, `{"a":"[1]"}`, "", "string holding JSON"},
		{"through a $ref, in an array", `{"$defs":{"J":{"type":"string","contentMediaType":"application/json"}},"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/J"}}}}`, `{"a":["1","{\"k\":\"v\"}"]}`, `{"a":[1,{"k":"v"}]}`, ""},
		{"any JSON", pydanticJSONAny, `{"v":"{\"a\":[true,null,\"x\"]}"}`, `{"v":{"a":[true,null,"x"]}}`, ""},
		{"a surrogate pair", pydanticJSONAny, `{"v":"\"\\ud83d\\ude00\""}`, `{"v":"\ud83d\ude00"}`, ""},
		{"strings of JSON within one", pydanticJSONNested, `{"v":"[\"1\", \"-2\"]"}`, `{"v":[1, -2]}`, ""},
		{"a model as declared", pydanticJSONModel, `{"o":"{\"path\":\"/x\",\"dryRun\":false}"}`, `{"o":{"path":"/x","dryRun":false}}`, ""},
		{"str first, a string of JSON: the str", pydanticStrOrJSON, `{"m":{"v":"[\"a\"]"}}`, "", ""},
		{"another media type", `{"type":"object","properties":{"a":{"type":"string","contentMediaType":"text/plain"}}}`, `{"a":"[1]"}`, "", ""},
		// held to the contentSchema, T1's spelling rule included
		{"an element of another type", pydanticJSON, `{"b":{"paths":"[\"a\",1]"}}`, "", `"b"."paths"[1]`},
		{"a string where the content is an integer", pydanticJSON, `{"b":{"paths":"[]"},"n":"\"-5\""}`, "", `"n"`},
		{"a bool where the content is an integer", pydanticJSON, `{"b":{"paths":"[]"},"n":"true"}`, "", `"n"`},
		{"null where the content is a list", pydanticJSON, `{"b":{"paths":"null"}}`, "", `"b"."paths"`},
		{"within one, of another type", pydanticJSONNested, `{"v":"[\"1\",\"true\"]"}`, "", `"v"[1]`},
		{"within one, not a string", pydanticJSONNested, `{"v":"[1]"}`, "", `"v"[0]`},
		{"a model's Python name (T1)", pydanticJSONModel, `{"o":"{\"path\":\"/x\",\"dry_run\":false}"}`, "", "another spelling"},
		{"a model's member as a string", pydanticJSONModel, `{"o":"{\"path\":\"/x\",\"dryRun\":\"false\"}"}`, "", `"o"."dryRun"`},
		{"a union taking it as the str too", pydanticJSONOrStr, `{"m":{"v":"[\"a\"]"}}`, "", "more than one alternative"},
		{"a union taking it as the str too, not JSON", pydanticJSONOrStr, `{"m":{"v":"a.txt"}}`, "", ""},
		// what jiter reads otherwise than Warden, or not at all
		{"a name given twice (jiter: the last)", pydanticJSONAny, `{"v":"{\"a\":\"x\",\"a\":\"..\\/etc\"}"}`, "", "given twice"},
		{"a name given twice, escaped", pydanticJSONAny, `{"v":"{\"a\":1,\"\\u0061\":2}"}`, "", "given twice"},
		{"a name given twice, deeper", pydanticJSON, `{"b":{"paths":"[{\"a\":1,\"a\":2}]"}}`, "", "given twice"},
		{"names differing in case", pydanticJSONAny, `{"v":"{\"a\":1,\"A\":2}"}`, "", "differ only in case"},
		{"NaN (jiter: nan)", pydanticJSONAny, `{"v":"[NaN]"}`, "", "contentMediaType"},
		{"Infinity", pydanticJSONAny, `{"v":"-Infinity"}`, "", "contentMediaType"},
		{"1e400 (jiter: inf)", pydanticJSONAny, `{"v":"1e400"}`, "", "64-bit float"},
		{"an integer past 2^53 (jiter: exact)", pydanticJSONAny, `{"v":"9007199254740993"}`, "", "64-bit float"},
		{"a fraction a float rounds", pydanticJSONAny, `{"v":"1.00000000000000000001"}`, "", "64-bit float"},
		{"a lone high surrogate", pydanticJSONAny, `{"v":"\"\\ud800\""}`, "", "lone surrogate"},
		{"a lone low surrogate", pydanticJSONAny, `{"v":"\"a\\udc00b\""}`, "", "lone surrogate"},
		{"a high surrogate before another escape", pydanticJSONAny, `{"v":"\"\\ud800\\u0041\""}`, "", "lone surrogate"},
		{"a lone surrogate in the string itself", pydanticJSONAny, `{"v":"\"\ud800\""}`, "", "lone surrogate"},
		{"trailing text", pydanticJSONAny, `{"v":"[1] x"}`, "", "contentMediaType"},
		{"a second value", pydanticJSONAny, `{"v":"[1] [2]"}`, "", "contentMediaType"},
		{"trailing form feed (not JSON white space)", pydanticJSONAny, `{"v":"[1]\f"}`, "", "contentMediaType"},
		{"a BOM", pydanticJSONAny, `{"v":"\ufeff[1]"}`, "", "contentMediaType"},
		{"a comment", pydanticJSONAny, `{"v":"[1]/*x*/"}`, "", "contentMediaType"},
		{"a trailing comma", pydanticJSONAny, `{"v":"[1,]"}`, "", "contentMediaType"},
		{"empty", pydanticJSONAny, `{"v":""}`, "", "empty"},
		{"white space only", pydanticJSONAny, `{"v":" "}`, "", "contentMediaType"},
		{"not JSON", pydanticJSON, `{"b":{"paths":"a.txt"}}`, "", "contentMediaType"},
		{"a control character in a string", pydanticJSONAny, `{"v":"\"a\tb\""}`, "", "contentMediaType"},
		{"deeper than the bound", pydanticJSONAny, `{"v":"` + strings.Repeat("[", 17) + strings.Repeat("]", 17) + `"}`, "", "deeper"},
		{"encoded", `{"type":"object","properties":{"a":{"type":"string","contentMediaType":"application/json","contentEncoding":"base64"}}}`, `{"a":"WzFd"}`, "", "contentEncoding"},
		{"after another alternative, NaN", `{"type":"object","properties":{"a":{"anyOf":[{"type":"null"},{"type":"string","contentMediaType":"application/json"}]}}}`, `{"a":"NaN"}`, "", "contentMediaType"},
		{"within one, a name twice", pydanticJSONNested, `{"v":"[\"{\\\"a\\\":1,\\\"a\\\":2}\"]"}`, "", "given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := checkRow(t, tc.schema, tc.args, tc.refused)
			if tc.refused == "" && string(policy) != tc.policy {
				t.Fatalf("the policy reads %s, want %s", policy, tc.policy)
			}
			if tc.refused == "" && policy != nil {
				if _, v := PolicyArguments(policy); !v.OK() {
					t.Fatalf("the policy's arguments %s refused: %s", policy, v.Detail)
				}
			}
		})
	}
}

// FuzzCheckTypesJSON holds the reading of a string of JSON (readContent,
// then the policy's reading of the arguments it returns) to an oracle
// built on encoding/json's decoder: a string its schema says holds JSON is
// accepted exactly when its literal is UTF-8 without a lone surrogate
// escape and its text is one JSON value (json.Valid) whose objects name
// no member twice nor two alike under strings.EqualFold, whose numbers are
// the float64 they read as (the value of its shortest spelling, compared
// as big.Rat), whose strings hold no
// lone surrogate escape (paired by unicode/utf16) and which nests within
// the bound where it stands; and then the policy reads the value the
// decoder reads. body is the literal's text between its quotes.
func FuzzCheckTypesJSON(f *testing.F) {
	for _, s := range []string{`[\"a.txt\"]`, `{\"a\":1,\"a\":2}`, `{\"a\":1,\"A\":2}`, `[NaN]`, `1e400`, `9007199254740993`, `0.1`, `-0`, `1E2`,
		`\"\\ud83d\\ude00\"`, `\"\\ud800\"`, `\ud800`, `\ud83d\ude00`, ` [1] `, `[1] x`, ``, ` `, `null`, `{\"k\\u0061\":[true,false,null]}`, `[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]`,
		`{\"\\u212a\":1,\"k\":2}`, `\"\\\\ud800\"`, `1.00000000000000000001`, `\u0031`, `\t{}\r\n`, `\f1`} {
		f.Add(s)
	}
	// m: M, M a model with v: Json (any JSON): in a model, so that the
	// top-level rule (jsonString) does not apply; v stands at depth 2
	schema := ArgumentTypes([]byte(`{"properties": {"m": {"properties": {"v": {"contentMediaType": "application/json", "contentSchema": {}, "type": "string"}}, "type": "object"}}, "type": "object"}`))
	const at = 2
	f.Fuzz(func(t *testing.T, body string) {
		args := `{"m":{"v":"` + body + `"}}`
		if !json.Valid([]byte(args)) {
			return
		}
		policy, v := CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(args)}, schema)
		var got any
		if v.OK() {
			if policy == nil {
				t.Fatalf("%s: allowed, but not read", args)
			}
			var pv rules.Verdict
			if got, pv = PolicyArguments(policy); pv.OK() {
				got = got.(map[string]any)["m"].(map[string]any)["v"]
			} else {
				v = pv
			}
		}
		want, ok, sure := oracleJSON(`"`+body+`"`, at)
		if !sure {
			return
		}
		if ok != v.OK() {
			t.Fatalf("%s: allowed %v (%s), the oracle %v", args, v.OK(), v.Detail, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the policy reads %#v, the decoder %#v", args, got, want)
		}
	})
}

// oracleJSON is FuzzCheckTypesJSON's oracle on the string literal lit
// standing at depth at: the value its text holds, whether it is accepted,
// and false for sure when it holds a number whose exponent is too large to
// compare exactly at little cost.
func oracleJSON(lit string, at int) (any, bool, bool) {
	if !utf8.ValidString(lit) || loneUTF16(lit) {
		return nil, false, true
	}
	var text string
	if json.Unmarshal([]byte(lit), &text) != nil || !json.Valid([]byte(text)) {
		return nil, false, true
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	type frame struct {
		object bool
		names  []string
		key    bool // the next string is a name
	}
	var stack []frame
	ok := true
	prev := int64(0)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, true
		}
		raw := text[prev:d.InputOffset()]
		prev = d.InputOffset()
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].object && stack[top].key
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				stack = append(stack, frame{object: tok == '{', key: tok == '{'})
				ok = ok && at+len(stack) <= jsonrpc.MaxPolicyDepth
			default:
				stack = stack[:top]
			}
			continue
		case string:
			if loneUTF16(raw[strings.IndexByte(raw, '"'):]) {
				ok = false
			}
			if isKey {
				for _, n := range stack[top].names {
					ok = ok && !strings.EqualFold(n, tok)
				}
				stack[top].names = append(stack[top].names, tok)
				stack[top].key = false
				continue
			}
		case json.Number:
			exact, sure := exactDouble(string(tok))
			if !sure {
				return nil, false, false
			}
			ok = ok && exact
		}
		if top >= 0 && stack[top].object {
			stack[top].key = true
		}
	}
	if !ok {
		return nil, false, true
	}
	d = json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false, true
	}
	return v, true, true
}

// exactDouble reports whether the JSON number lit has the value of the
// float64 it reads as, spelled shortest (0.1 does), compared as rationals;
// not sure past an exponent of four digits (a rational of 10^99999 is
// costly).
func exactDouble(lit string) (exact, sure bool) {
	if i := strings.IndexAny(lit, "eE"); i >= 0 && len(strings.TrimLeft(lit[i+1:], "+-0")) > 4 {
		return false, false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
		return false, true
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return false, true
	}
	short, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return r.Cmp(short) == 0, true
}

// loneUTF16 reports whether the JSON string literal lit (quotes included)
// has a \u escape of a surrogate that unicode/utf16 does not pair with the
// escape after it.
func loneUTF16(lit string) bool {
	var units []uint16
	for i := 1; i < len(lit)-1; i++ {
		if lit[i] != '\\' {
			units = append(units, 0) // a character: no surrogate
			continue
		}
		if lit[i+1] != 'u' {
			units = append(units, 0)
			i++
			continue
		}
		u, _ := strconv.ParseUint(lit[i+2:i+6], 16, 16)
		units = append(units, uint16(u))
		i += 5
	}
	for i := 0; i < len(units); i++ {
		r := rune(units[i])
		if !utf16.IsSurrogate(r) {
			continue
		}
		if i+1 == len(units) || utf16.DecodeRune(r, rune(units[i+1])) == unicode.ReplacementChar {
			return true
		}
		i++
	}
	return false
}
