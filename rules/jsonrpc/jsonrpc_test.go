package jsonrpc

import (
	"encoding/json"
	"testing"
)

func TestMembers(t *testing.T) {
	tests := []struct {
		name, in string
		known    []string
		ok       bool
	}{
		{"plain", `{"a":1,"b":"x"}`, []string{"a"}, true},
		{"twice", `{"a":1,"a":2}`, nil, false},
		{"fold alike", `{"id":1,"ID":2}`, nil, false},
		{"known name misspelled", `{"Method":"x"}`, []string{"method"}, false},
		{"kelvin sign folds to k", "{\"\u212aey\":1}", []string{"key"}, false},
		{"not an object", `[1]`, nil, false},
		{"truncated", `{"a":`, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := objectMembers([]byte(tc.in), tc.known, true)
			if (err == nil) != tc.ok {
				t.Fatalf("Members(%s) = %v, want ok %v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	for in, want := range map[string]bool{`"x"`: true, `1`: true, `-5`: true, `1.0`: false, `01`: false, `-0`: false, `9007199254740993`: false, `null`: false, ``: false} {
		if got := ValidID(json.RawMessage(in)); got != want {
			t.Errorf("ValidID(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestSameID: an answer's id is the request's by value for strings, by
// literal for numbers, never across types.
func TestSameID(t *testing.T) {
	tests := []struct {
		name string
		v    any // as a decoder with UseNumber gives it
		raw  string
		want bool
	}{
		{"integer", json.Number("1"), `1`, true},
		{"integer with spaces", json.Number("-7"), ` -7 `, true},
		{"string", "abc", `"abc"`, true},
		{"empty string", "", `""`, true},
		{"escaped in the request", "a<b", `"a\u003cb"`, true},
		{"escape the client chose", "a", `"\u0061"`, true},
		{"< > & plain (json.Marshal would escape them)", "<a&b>", `"<a&b>"`, true},
		{"U+2028 plain", "a\u2028b", "\"a\u2028b\"", true},
		{"number vs string", json.Number("1"), `"1"`, false},
		{"string vs number", "1", `1`, false},
		{"other literal of the number", json.Number("1.0"), `1`, false},
		{"other string", "abd", `"abc"`, false},
		{"no request id", json.Number("1"), ``, false},
		{"request id not JSON", "a", `"a`, false},
		{"null answer id", nil, `1`, false},
		{"object", map[string]any{}, `{}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameID(tc.v, json.RawMessage(tc.raw)); got != tc.want {
				t.Fatalf("SameID(%#v, %s) = %v, want %v", tc.v, tc.raw, got, tc.want)
			}
		})
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct{ id, want string }{
		{`7`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Task not found"}}`},
		{``, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Task not found"}}`},
		{`{bad`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Task not found"}}`},
	}
	for _, tc := range tests {
		if got := string(ErrorBody(json.RawMessage(tc.id), -32001, "Task not found")); got != tc.want {
			t.Errorf("ErrorBody(%s) = %s, want %s", tc.id, got, tc.want)
		}
	}
}

func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`))
	f.Add([]byte(`{"a":{"b":[1,2]},"A":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := objectMembers(b, []string{"id", "method"}, true)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for k := range m {
			if seen[Fold(k)] {
				t.Fatalf("two members fold to %q", Fold(k))
			}
			seen[Fold(k)] = true
		}
	})
}
