package jsonrpc

import (
	"bytes"
	"encoding/json"
	"io"
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

// scannedMember is a Member as a decoder reads it: its name decoded, and
// its value's first token (a Delim for an object or an array).
type scannedMember struct {
	name          string
	object, depth int
	value         any
}

// decodedMembers reads b's members with encoding/json's decoder, in the
// order they come: Scan must report them so.
func decodedMembers(t *testing.T, b []byte) []scannedMember {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	type open struct {
		object, number int // number: the object's (0 for an array)
		key            bool
	}
	var stack []open
	var out []scannedMember
	objects := 0
	var pending *scannedMember
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("decoding %q: %v", b, err)
		}
		if len(stack) > 0 && stack[len(stack)-1].object == 1 && stack[len(stack)-1].key {
			if _, end := tok.(json.Delim); !end {
				top := &stack[len(stack)-1]
				top.key = false
				pending = &scannedMember{name: tok.(string), object: top.number, depth: len(stack)}
				continue
			}
		}
		if pending != nil {
			pending.value = tok
			out = append(out, *pending)
			pending = nil
		}
		switch tok {
		case json.Delim('{'):
			objects++
			stack = append(stack, open{1, objects, true})
			continue
		case json.Delim('['):
			stack = append(stack, open{0, 0, false})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object == 1 {
			stack[len(stack)-1].key = true
		}
	}
}

// FuzzScan holds Scan to Valid (whether b is JSON), to CountFold (the
// spellings of a name it counts) and to encoding/json's decoder (the
// members it reports, each name, object, depth and value).
func FuzzScan(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-1","status":"working","x":[{"TaskIds":1},"task_ids",{}],"e":"\u0074askIds"}}`))
	f.Add([]byte(`{"a\"b":{"c":[1,{"d":null}]},"e":"\\",`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Member
		folds, ok := Scan(b, "taskIds", func(m Member) { got = append(got, m) })
		if valid := Valid(b); ok && !valid || !ok && valid && depthOf(b) <= validDepth {
			t.Fatalf("Scan(%q) ok %v, Valid %v", b, ok, valid)
		}
		if !ok {
			return
		}
		if want := CountFold(b, "taskIds"); folds != want {
			t.Fatalf("Scan(%q) counted %d, CountFold %d", b, folds, want)
		}
		want := decodedMembers(t, b)
		if len(got) != len(want) {
			t.Fatalf("Scan(%q): %d members, the decoder %d", b, len(got), len(want))
		}
		for i, m := range got {
			var name string
			if err := json.Unmarshal([]byte(`"`+string(m.Name)+`"`), &name); err != nil || name != want[i].name ||
				m.Escaped != (bytes.IndexByte(m.Name, '\\') >= 0) || m.Object != want[i].object || m.Depth != want[i].depth {
				t.Fatalf("Scan(%q) member %d: %q %v object %d depth %d; the decoder %+v", b, i, m.Name, m.Escaped, m.Object, m.Depth, want[i])
			}
			if d, open := want[i].value.(json.Delim); open {
				if m.End != -1 || m.Start >= len(b) || b[m.Start] != byte(d) {
					t.Fatalf("Scan(%q) member %d: value at %d..%d, the decoder %v", b, i, m.Start, m.End, d)
				}
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(b[m.Start:m.End]))
			dec.UseNumber()
			v, err := dec.Token()
			if err != nil || v != want[i].value || dec.InputOffset() != int64(m.End-m.Start) ||
				m.ValueEscaped != (b[m.Start] == '"' && bytes.IndexByte(b[m.Start:m.End], '\\') >= 0) {
				t.Fatalf("Scan(%q) member %d: value %q (%v), the decoder %v", b, i, b[m.Start:m.End], m.ValueEscaped, want[i].value)
			}
		}
	})
}

// depthOf is how deep b's containers nest, counted as a scan counts them
// (brackets outside strings).
func depthOf(b []byte) int {
	depth, most := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
			most = max(most, depth)
		case '}', ']':
			depth--
		case '"':
			end, _ := StringEnd(b, i)
			if end < 0 {
				return most
			}
			i = end - 1
		}
	}
	return most
}
