package jsonrpc

import (
	"encoding/json"
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
