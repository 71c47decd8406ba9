package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestScanMembers(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		scanned   bool
		err       string
		want      map[string]string
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"t"}}`, true, "",
			map[string]string{"jsonrpc": `"2.0"`, "id": "7", "method": `"tasks/get"`, "params": `{"taskId":"t"}`}},
		{"spaces", " {\n \"id\" : [1, {\"a\":\"}\"}] , \"x\":null }\t", true, "", map[string]string{"id": `[1, {"a":"}"}]`}},
		{"empty", `{}`, true, "", map[string]string{}},
		{"twice", `{"id":1,"id":2}`, true, `member "id" appears twice`, nil},
		{"case pair", `{"x":1,"X":2}`, true, `members "x" and "X" differ only in case`, nil},
		{"misspelled", `{"Method":"x"}`, true, `member "Method" must be spelled "method"`, nil},
		{"escaped name", `{"metho\u0064":"x"}`, false, "", nil},
		{"non-ASCII name", `{"ſ":1}`, false, "", nil},
		{"not an object", `[1]`, false, "", nil},
		{"many members", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`, false, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, scanned, err := scanMembers([]byte(tc.raw), envelopeNames)
			if scanned != tc.scanned {
				t.Fatalf("scanned = %v, want %v", scanned, tc.scanned)
			}
			if got := errText(err); got != tc.err {
				t.Fatalf("err = %q, want %q", got, tc.err)
			}
			if !scanned || err != nil {
				return
			}
			if len(m) != len(tc.want) {
				t.Errorf("got %d members %v, want %v", len(m), m, tc.want)
			}
			for k, v := range tc.want {
				if string(m[k]) != v {
					t.Errorf("%s = %s, want %s", k, m[k], v)
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzScanMembers checks the scan against the decoding path on every valid
// JSON input it reads: the same refusal with the same text, or the same
// value for every member it keeps; and PlainString against encoding/json.
func FuzzScanMembers(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"wt2.x","_meta":{}}}`,
		`{"id":1,"ID":2}`, `{"taskid":"x"}`, `{"a":"\u00e9","b":[{"c":"]"}],"d":-1.5e3,"e":true}`,
		`{"name":"fast","arguments":{"q":"x"},"task":{"ttl":1}}`, `{"k":"\xff"}`, `{ }`, `"x\"y"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, ok := PlainString(b); ok {
			var ref string
			if err := json.Unmarshal(b, &ref); err != nil || ref != s {
				t.Fatalf("PlainString(%q) = %q; encoding/json: %q, %v", b, s, ref, err)
			}
		}
		if !json.Valid(b) {
			return
		}
		for _, known := range [][]string{envelopeNames, paramNames, metaNames, nil} {
			m, scanned, err := scanMembers(b, known)
			if !scanned {
				continue
			}
			ref, rerr := decodeMembers(b, known)
			if errText(err) != errText(rerr) {
				t.Fatalf("%q: scan %v, decode %v", b, err, rerr)
			}
			for _, k := range known {
				got, in := m[k]
				want, inRef := ref[k]
				if in != inRef || !bytes.Equal(got, want) {
					t.Fatalf("%q: %s is %q (%v) scanned, %q (%v) decoded", b, k, got, in, want, inRef)
				}
			}
		}
	})
}

// BenchmarkParse measures reading one request the way every MCP adapter
// does.
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fast","arguments":{"q":"x"},"_meta":{"progressToken":1}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}
