package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are messages json.Valid accepts and refuses at each place a
// validator can go wrong: numbers, escapes, control bytes, literals,
// nesting, separators and what follows the value.
var validCases = []string{
	`{}`, `[]`, ` {"a":1} `, `{"a":[1,2,{"b":null}],"c":"x"}`, `"s"`, `0`, `-0`, `1.5e+3`, `-12.0E-7`, `true`, `false`, `null`,
	`"\u00e9\n\"\\\/\b\f\r\t"`, "\"\xff\xfe\"", `[[[[[]]]]]`, `{"a":{}}`, `[{}, [], "", 0]`, "\t\r\n[1]\n",
	``, ` `, `{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`, `[1 2]`,
	`01`, `-`, `+1`, `1.`, `.5`, `1e`, `1e+`, `1.e5`, `0x1`, `--1`, `1-`, `Infinity`, `NaN`,
	`tru`, `truex`, `nul`, `falsy`, `True`, `"a`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\u"`, "\"a\x01b\"", "\"\x7f\"",
	`{"a":1}}`, `[1]]`, `{"a":1]`, `[1}`, `{} {}`, `1 2`, `{'a':1}`, `{a:1}`, `[1,,2]`, `{"a"::1}`, `{1:2}`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64),
	strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70),
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 70) + strings.Repeat("]", 69),
}

// TestValid: Valid answers as json.Valid on every case.
func TestValid(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.80q) = %v, json.Valid %v", c, got, want)
		}
	}
}

// FuzzValid holds Valid to json.Valid.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-1","_meta":{"x":[1,-2.5e3,true,null]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"wt1.abcdefghijklmnopqrstuvwxyz0123456789","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`)
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(msg)
		}
	})
	b.Run("jsonrpc", func(b *testing.B) {
		for b.Loop() {
			Valid(msg)
		}
	})
}

// TestLoneSurrogate: a surrogate escape is lone unless a high one is
// followed at once by a low one (pydantic's jiter refuses a lone one,
// encoding/json reads U+FFFD).
func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		json string
		lone bool
	}{
		{`"a"`, false},
		{`"\u0041\n"`, false},
		{`"\ud83d\ude00"`, false},
		{`"\uD83D\uDE00x\ud800\udc00"`, false},
		{`"\\ud800"`, false}, // an escaped backslash, then text
		{`"\\\ud800\udc00"`, false},
		{`{"\ud83d\ude00":["\u00e9"]}`, false},
		{`"\ud800"`, true},
		{`"\udc00"`, true},
		{`"\ud800\ud800"`, true},
		{`"\ud800\u0041"`, true},
		{`"\ud800x\udc00"`, true},
		{`"\udc00\ud800"`, true},
		{`"\\\ud800"`, true},
		{`["a","\uDBFF"]`, true},
		{`{"\udfff":1}`, true},
	} {
		if got := LoneSurrogate([]byte(tc.json)); got != tc.lone {
			t.Errorf("LoneSurrogate(%s) = %v, want %v", tc.json, got, tc.lone)
		}
	}
}
