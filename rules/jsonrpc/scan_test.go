package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

var envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}

func TestScan(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		scanned   bool
		err       string
		want      map[string]string
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"t"}}`, true, "",
			map[string]string{"jsonrpc": `"2.0"`, "id": "7", "method": `"tasks/get"`, "params": `{"taskId":"t"}`}},
		{"spaces", " {\n \"id\" : [1, {\"a\":\"}\"}] , \"x\":null }\t", true, "", map[string]string{"id": `[1, {"a":"}"}]`, "x": "null"}},
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
			m, scanned, err := scan([]byte(tc.raw), envelopeNames, true)
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

// FuzzScan checks the scan against the decoding path on every valid JSON
// input it reads: the same refusal with the same text, or the same members
// with the same values; and PlainString against encoding/json.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"wt2.x","_meta":{}}}`,
		`{"id":1,"ID":2}`, `{"taskid":"x"}`, `{"a":"\u00e9","b":[{"c":"]"}],"d":-1.5e3,"e":true}`,
		`{"name":"fast","arguments":{"q":"x"},"task":{"ttl":1}}`, `{"k":"\xff"}`, `{ }`, `"x\"y"`,
		`{"task_id":"x","taskId":"y"}`, `{"":1,"id":2}`,
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
		for _, c := range []struct {
			known []string
			all   bool
		}{{envelopeNames, true}, {envelopeNames, false}, {[]string{"taskId", "name", "task"}, false}, {nil, true}} {
			m, scanned, err := scan(b, c.known, c.all)
			if !scanned {
				continue
			}
			ref, rerr := decode(b, c.known, c.all)
			if errText(err) != errText(rerr) {
				t.Fatalf("%q: scan %v, decode %v", b, err, rerr)
			}
			if err != nil {
				continue
			}
			if len(m) != len(ref) {
				t.Fatalf("%q: %d members scanned, %d decoded", b, len(m), len(ref))
			}
			for k, want := range ref {
				if got, in := m[k]; !in || !bytes.Equal(got, want) {
					t.Fatalf("%q: %s is %q (%v) scanned, %q decoded", b, k, got, in, want)
				}
			}
		}
	})
}

func TestValueEnd(t *testing.T) {
	for in, want := range map[string]int{
		`"a\"b",`: 6, `{"a":"}"} `: 9, `[1,[2]]`: 7, `12.5e3}`: 6, `true`: 4, `"open`: -1, `{"a":1`: -1, ``: -1,
	} {
		if got := ValueEnd([]byte(in), 0); got != want {
			t.Errorf("ValueEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestKnown checks that Known keeps only the named members, on the scanning
// path and on the decoding one (a name outside ASCII).
func TestKnown(t *testing.T) {
	for raw, members := range map[string]int{`{"id":1,"x":{"a":2},"":3}`: 3, "{\"id\":1,\"\u212a\":2}": 2} {
		m, err := Known([]byte(raw), []string{"id", "method"})
		if err != nil || len(m) != 1 || string(m["id"]) != "1" {
			t.Errorf("Known(%s) = %q, %v; want only id", raw, m, err)
		}
		all, err := Members([]byte(raw), []string{"id", "method"})
		if err != nil || len(all) != members {
			t.Errorf("Members(%s) = %q, %v; want every member", raw, all, err)
		}
	}
}
