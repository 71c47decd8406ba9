package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// TestReadsAsDouble: a number a policy judges as written is the number a
// server reading 64-bit floats acts on, or it is refused.
func TestReadsAsDouble(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		same bool
	}{
		{"0", true}, {"-0", true}, {"0.0", true}, {"0e5", true}, {"1", true}, {"-1", true},
		{"1000", true}, {"1e3", true}, {"1E+3", true}, {"10.000", true}, {"0.1", true}, {"0.30000000000000004", true},
		{"123.456", true}, {"1.5e-7", true}, {"9007199254740992", true}, {"-9007199254740992", true},
		{"1.7976931348623157e308", true}, {"5e-324", true},
		{"999.99999999999999999", false}, {"1000.0000000000000001", false},
		{"9007199254740993", false}, {"-9007199254740993", false}, {"12345678901234567890", false},
		{"0.1000000000000000055511151231257827", false}, {"0.3", true}, {"0.30000000000000001", false},
		{"1e999", false}, {"-1e999", false}, {"1e-400", false}, {"2e-324", false},
		{"1e99999999999999999999", false},
	} {
		if got := ReadsAsDouble(tc.lit); got != tc.same {
			t.Errorf("ReadsAsDouble(%s) = %v, want %v", tc.lit, got, tc.same)
		}
	}
}

// TestPolicyValueNumbers: PolicyValue refuses, at any depth, a number a
// server reads as another (before, the policy was handed 999.99999999999999999
// as written and a rule "a < 1000" let the server act on 1000).
func TestPolicyValueNumbers(t *testing.T) {
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`{"a":999.5,"b":[1,2e3,-0.25]}`, true},
		{`{"a":999.99999999999999999}`, false},
		{`{"b":[1,{"c":9007199254740993}]}`, false},
		{`1e400`, false},
	} {
		_, v := PolicyValue(json.RawMessage(tc.raw), "params.arguments")
		if v.OK() != tc.ok {
			t.Errorf("PolicyValue(%s) = %+v, want ok %v", tc.raw, v, tc.ok)
		}
		if !v.OK() && (v.Code != rules.CodeInvalidParams || v.Reason != rules.ReasonMalformedRequest) {
			t.Errorf("PolicyValue(%s) = %+v, want INVALID_PARAMS malformed_request", tc.raw, v)
		}
	}
}

// decoderValue is PolicyValue as it was before it read the bytes in place:
// json.Decoder's tokens, with the same bounds and name checks. It is the
// oracle FuzzPolicyValue holds the in-place reader to.
func decoderValue(raw json.RawMessage, what string) (any, rules.Verdict) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, rules.Verdict{}
	}
	if len(raw) > MaxPolicyBytes {
		return nil, badValue(rules.ReasonArgumentsTooLarge, fmt.Sprintf("%s of %d bytes exceeds the limit of %d", what, len(raw), MaxPolicyBytes))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeToken(dec, 0)
	if err != nil {
		return nil, valueRefused(what, err)
	}
	return v, rules.Verdict{}
}

func decodeToken(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		if n, isNum := tok.(json.Number); isNum && !ReadsAsDouble(string(n)) {
			return nil, fmt.Errorf("the number %.40s is not one a 64-bit float holds (a server reading it as JavaScript, Python or encoding/json do reads another)", n)
		}
		return tok, nil
	}
	if depth++; depth > MaxPolicyDepth {
		return nil, errTooDeep{}
	}
	if d == '[' {
		list := []any{}
		for dec.More() {
			v, err := decodeToken(dec, depth)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	}
	obj, folded := map[string]any{}, map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		f := Fold(k)
		if prev, dup := folded[f]; dup {
			if prev == k {
				return nil, fmt.Errorf("member %s given twice", strconv.Quote(k))
			}
			return nil, fmt.Errorf("members %s and %s differ only in case", strconv.Quote(prev), strconv.Quote(k))
		}
		folded[f] = k
		if obj[k], err = decodeToken(dec, depth); err != nil {
			return nil, err
		}
	}
	_, err = dec.Token()
	return obj, err
}

// policySeeds are values PolicyValue reads or refuses: names given twice or
// folding alike at any depth and past the few compared in place, escapes,
// invalid UTF-8, numbers a float does not hold, nesting at the bound.
var policySeeds = []string{
	`{"q":"x"}`, `{"a":1,"b":[true,false,null,"s",{"c":-0.5e3}],"d":{}}`, `[]`, `"text"`, `12`, `null`, `true`,
	`{"a":1,"a":2}`, `{"k":1,"K":2}`, "{\"k\":1,\"\u212a\":2}", "{\"s\":1,\"\u017f\":2}", `{"x":{"y":1,"Y":2}}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"A":10}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"H":8,"h":9}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"J":11}`,
	`{"a\u0062":"\u00e9\n\"","ab":1}`, "{\"\xff\":1,\"\xfe\":2}", "\"\xff\"", `{"a":999.99999999999999999}`,
	`[1,[2,{"n":9007199254740993}]]`, `1e400`, ` { "a" : [ 1 , 2 ] , "b" : "c" } `,
	strings.Repeat("[", 16) + strings.Repeat("]", 16), strings.Repeat("[", 17) + strings.Repeat("]", 17),
	strings.Repeat(`{"a":`, 17) + "1" + strings.Repeat("}", 17), `{"a":1,"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`,
	`{"a":1}x`, `{"a":1,}`, `[1,]`, `{"a"}`, `[`, `{"a":01}`,
}

// TestPolicyValueSeeds: on every seed, PolicyValue gives the decoder's value
// or the decoder's refusal.
func TestPolicyValueSeeds(t *testing.T) {
	for _, s := range policySeeds {
		samePolicyValue(t, []byte(s))
	}
}

// FuzzPolicyValue: PolicyValue, reading the bytes in place, reads every
// valid JSON value as json.Decoder's tokens read it (the same value, numbers
// as written) and refuses exactly what they refuse, for the same reason and
// with the same words (a name given twice or folding alike, a number a float
// does not hold, nesting past the bound); anything that is not one JSON
// value it refuses as malformed.
func FuzzPolicyValue(f *testing.F) {
	for _, s := range policySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(samePolicyValue)
}

func samePolicyValue(t *testing.T, raw []byte) {
	got, gv := PolicyValue(raw, "params.arguments")
	if !json.Valid(raw) && len(raw) > 0 && len(raw) <= MaxPolicyBytes {
		if gv.OK() || gv.Reason != rules.ReasonMalformedRequest {
			t.Fatalf("%q is not JSON: PolicyValue = %v, %+v; want refused as malformed", raw, got, gv)
		}
		return
	}
	want, wv := decoderValue(raw, "params.arguments")
	if gv != wv {
		t.Fatalf("%q: verdict %+v, the decoder's %+v", raw, gv, wv)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: read %#v, the decoder %#v", raw, got, want)
	}
}

// TestPolicyValueAllocs: arguments as small as a tool call's cost the one
// map they decode to and its values, not a json.Decoder's tokens (before:
// 34 allocations, now 6).
func TestPolicyValueAllocs(t *testing.T) {
	raw := json.RawMessage(`{"q":"x","n":12}`)
	if n := testing.AllocsPerRun(100, func() { PolicyValue(raw, "params.arguments") }); n > 8 {
		t.Errorf("PolicyValue(%s): %v allocations, want at most 8", raw, n)
	}
}
