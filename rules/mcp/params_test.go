package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// TestParamHeaders: SEP-2243's Mcp-Param-{Name} headers. Whatever the tool,
// a value no reader takes as one value is refused 400 (HeaderMismatch): a
// character outside visible ASCII, space and tab, a =?base64?...?= that
// does not decode, the name given twice. With the tool's inputSchema known
// (its x-mcp-header names), each header must be the argument it mirrors,
// after decoding; an argument mirrored and given needs its header from
// 2026-07-28 on. Before, every Mcp-Param-* header was forwarded unchecked:
// a router reading Mcp-Param-Region saw a value the policy never judged.
func TestParamHeaders(t *testing.T) {
	const v25, v26 = "2025-11-25", Era2026
	schema := MirroredArguments([]byte(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"count":{"type":"integer","x-mcp-header":"Count"},
		"dry":{"type":"boolean","x-mcp-header":"Dry"},
		"a":{"type":"string","x-mcp-header":"Twice"},
		"b":{"type":"string","x-mcp-header":"TWICE"},
		"note":{"type":"string"},
		"target":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}`))
	tool := func(args string) Call { return call(MethodToolsCall, `{"name":"deploy","arguments":`+args+`}`) }
	one := func(name, v string) []Param { return []Param{{Name: name, Values: []string{v}}} }
	mismatch := rules.CodeHeaderMismatch
	tests := []struct {
		name   string
		call   Call
		params []Param
		m      Mirrored // nil: the schema unknown
		v      string
		code   rules.Code // "": allowed
	}{
		// Read whatever the tool (the schema unknown: forwarded when they read).
		{"unknown schema: any header that reads is forwarded", tool(`{}`), one("Whatever", "x"), nil, v26, ""},
		{"unknown schema: plain value", tool(`{"region":"eu"}`), one("Region", "us-west1"), nil, v26, ""},
		{"non-ASCII byte", tool(`{}`), one("Region", "us\xc3\xa9"), nil, v26, mismatch},
		{"control character", tool(`{}`), one("Region", "us\x01"), nil, v26, mismatch},
		{"DEL", tool(`{}`), one("Region", "us\x7f"), nil, v26, mismatch},
		{"tab and inner space are allowed", tool(`{}`), one("Region", "us\twest 1"), nil, v26, ""},
		{"base64 bad padding", tool(`{}`), one("Region", "=?base64?SGVsbG8?="), nil, v26, mismatch},
		{"base64 bad characters", tool(`{}`), one("Region", "=?base64?SGVs!!!bG8=?="), nil, v26, mismatch},
		{"base64 missing suffix is literal", tool(`{}`), one("Region", "=?base64?SGVsbG8="), nil, v26, ""},
		{"upper-case sentinel is literal", tool(`{}`), one("Region", "=?BASE64?SGVsbG8=?="), nil, v26, ""},
		{"given twice", tool(`{}`), []Param{{Name: "Region", Values: []string{"eu", "us"}}}, nil, v26, mismatch},
		{"on another method too", call(MethodToolsList, `{}`), one("Region", "\xff"), nil, v26, mismatch},

		// Against the arguments, the schema known.
		{"equal", tool(`{"region":"us-west1"}`), one("Region", "us-west1"), schema, v26, ""},
		{"name in another case", tool(`{"region":"us-west1"}`), one("REGION", "us-west1"), schema, v26, ""},
		{"different", tool(`{"region":"eu-west1"}`), one("Region", "us-west1"), schema, v26, mismatch},
		{"base64 equal", tool(`{"region":" padded "}`), one("Region", "=?base64?IHBhZGRlZCA=?="), schema, v26, ""},
		{"base64 different", tool(`{"region":"eu"}`), one("Region", "=?base64?IHBhZGRlZCA=?="), schema, v26, mismatch},
		{"non-ASCII base64 equal", tool(`{"region":"日本語"}`), one("Region", "=?base64?5pel5pys6Kqe?="), schema, v26, ""},
		{"escaped JSON string equal", tool(`{"region":"\u65e5\u672c\u8a9e"}`), one("Region", "=?base64?5pel5pys6Kqe?="), schema, v26, ""},
		{"integer equal", tool(`{"count":42}`), one("Count", "42"), schema, v26, ""},
		{"integer written otherwise equal", tool(`{"count":4.2e1}`), one("Count", "42"), schema, v26, ""},
		{"integer different", tool(`{"count":42}`), one("Count", "43"), schema, v26, mismatch},
		{"integer as hex", tool(`{"count":16}`), one("Count", "0x10"), schema, v26, mismatch},
		{"boolean equal", tool(`{"dry":true}`), one("Dry", "true"), schema, v26, ""},
		{"boolean other spelling", tool(`{"dry":true}`), one("Dry", "True"), schema, v26, mismatch},
		{"header for an argument not given", tool(`{}`), one("Region", "us-west1"), schema, v26, mismatch},
		{"header for a null argument", tool(`{"region":null}`), one("Region", "null"), schema, v26, mismatch},
		{"header the schema does not mirror", tool(`{"region":"eu"}`), append(one("Region", "eu"), Param{Name: "Note", Values: []string{"x"}}), schema, v26, mismatch},
		{"header declared twice in the schema", tool(`{"a":"x","b":"y"}`), one("Twice", "x"), schema, v26, mismatch},
		{"object argument cannot be mirrored", tool(`{"region":{"x":1}}`), one("Region", "[object Object]"), schema, v26, mismatch},
		{"nested argument equal", tool(`{"target":{"zone":"z1"}}`), one("Zone", "z1"), schema, v26, ""},
		{"nested argument different", tool(`{"target":{"zone":"z1"}}`), one("Zone", "z2"), schema, v26, mismatch},
		{"nested argument, parent not an object", tool(`{"target":"z1"}`), one("Zone", "z1"), schema, v26, mismatch},
		{"nested argument given, header missing, 2026", tool(`{"target":{"zone":"z1"}}`), nil, schema, v26, mismatch},
		{"argument given, header missing, 2026", tool(`{"region":"eu"}`), nil, schema, v26, mismatch},
		{"argument given, header missing, 2025", tool(`{"region":"eu"}`), nil, schema, v25, ""},
		{"argument null, no header", tool(`{"region":null}`), nil, schema, v26, ""},
		{"argument not mirrored, no header", tool(`{"note":"n"}`), nil, schema, v26, ""},
		{"tool without mirrored arguments, no header", tool(`{"region":"eu"}`), nil, nil, v26, ""},
		{"tool without mirrored arguments, a header", tool(`{"region":"eu"}`), one("Region", "eu"), Mirrored{}, v26, mismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckHeaders(tc.call, Headers{ProtocolVersion: tc.v, Params: tc.params})
			if v.OK() && tc.m != nil {
				v = CheckParams(tc.call, tc.params, tc.m, tc.v)
			}
			if v.Code != tc.code {
				t.Fatalf("code %q (%s), want %q", v.Code, v.Detail, tc.code)
			}
			if !v.OK() && v.Reason != rules.ReasonHeaderMismatch {
				t.Fatalf("reason %q", v.Reason)
			}
		})
	}
}

// TestParamHeaderLines: an Mcp-Param-* header given on two field lines is
// refused on every door; a value holding a comma is refused only by a door
// that sees repeated lines joined with commas (Envoy's CheckRequest, where
// it may be two lines), and passes where each line is seen apart
// (net/http), as SEP-2243 clients send a plain-ASCII value ("Paris,
// France" as it is) and the SDK servers read it. Before, a comma was
// refused on every door: the sidecar refused a valid call.
func TestParamHeaderLines(t *testing.T) {
	schema := MirroredArguments([]byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`))
	tool := call(MethodToolsCall, `{"name":"deploy","arguments":{"region":"Paris, France"}}`)
	for _, tc := range []struct {
		name    string
		values  []string // as the door reads them
		joined  bool     // the door sees repeated lines joined (ext_authz)
		refused string   // a word of the refusal ("": admitted)
	}{
		{"sidecar: one line holding a comma", []string{"Paris, France"}, false, ""},
		{"sidecar: one line holding a comma, base64", []string{"=?base64?UGFyaXMsIEZyYW5jZQ==?="}, false, ""},
		{"sidecar: two lines", []string{"Paris", "France"}, false, "given 2 times"},
		{"sidecar: two lines, the second empty", []string{"Paris, France", ""}, false, "given 2 times"},
		{"ext_authz: one line holding a comma (or two lines, joined)", []string{"Paris, France"}, true, "=?base64?"},
		{"ext_authz: two lines joined without a space", []string{"Paris,France"}, true, "=?base64?"},
		{"ext_authz: base64", []string{"=?base64?UGFyaXMsIEZyYW5jZQ==?="}, true, ""},
		{"ext_authz: two values however read", []string{"Paris", "France"}, true, "given 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := []Param{{Name: "Region", Values: tc.values}}
			v := CheckHeaders(tool, Headers{ProtocolVersion: Era2026, Params: ps, Joined: tc.joined})
			if v.OK() {
				v = CheckParams(tool, ps, schema, Era2026)
			}
			switch {
			case tc.refused == "" && !v.OK():
				t.Fatalf("refused: %s", v.Detail)
			case tc.refused != "" && (v.Code != rules.CodeHeaderMismatch || !strings.Contains(v.Detail, tc.refused)):
				t.Fatalf("%q %s, want HEADER_MISMATCH naming %q", v.Code, v.Detail, tc.refused)
			}
		})
	}
}

// TestParamsRead: Mcp-Param-* headers are read whatever the case of their
// names, every value kept (two spellings of one name are one header given
// twice), and nothing else is read as one.
func TestParamsRead(t *testing.T) {
	h := http.Header{"Mcp-Param-Region": {"eu"}, "mcp-param-REGION": {"us"}, "Mcp-Param-": {"x"}, "Mcp-Name": {"n"}, "Mcp-Params-X": {"y"}}
	ps := Params(h)
	if len(ps) != 1 || len(ps[0].Values) != 2 {
		t.Fatalf("Params = %+v, want Region given twice", ps)
	}
	if v := CheckHeaders(call(MethodToolsCall, `{"name":"t"}`), Headers{Params: ps}); v.Code != rules.CodeHeaderMismatch {
		t.Fatalf("a name given in two cases: %q, want HEADER_MISMATCH", v.Code)
	}
}
