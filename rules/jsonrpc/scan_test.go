package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
)

var envelopeNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// TestMembersRefusals: Object's reading (ReadObject, then Check) refuses what peers read
// otherwise with the text decoding member by member gives, and reads the
// names a direct scan could not (escapes, names outside ASCII, many members)
// alike.
func TestMembersRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		err       string
		want      map[string]string
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"t"}}`, "",
			map[string]string{"jsonrpc": `"2.0"`, "id": "7", "method": `"tasks/get"`, "params": `{"taskId":"t"}`}},
		{"spaces", " {\n \"id\" : [1, {\"a\":\"}\"}] , \"x\":null }\t", "", map[string]string{"id": `[1, {"a":"}"}]`, "x": "null"}},
		{"empty", `{}`, "", map[string]string{}},
		{"twice", `{"id":1,"id":2}`, `member "id" appears twice`, nil},
		{"case pair", `{"x":1,"X":2}`, `members "x" and "X" differ only in case`, nil},
		{"misspelled", `{"Method":"x"}`, `member "Method" must be spelled "method"`, nil},
		{"misspelled before a pair", `{"Method":"x","a":1,"A":2}`, `member "Method" must be spelled "method"`, nil},
		{"pair before misspelled", `{"a":1,"A":2,"Method":"x"}`, `members "a" and "A" differ only in case`, nil},
		{"pair with the known name", `{"Method":"x","method":"y"}`, `member "Method" must be spelled "method"`, nil},
		{"escaped name", `{"metho\u0064":"x"}`, "", map[string]string{"method": `"x"`}},
		{"escaped twice", `{"id":1,"i\u0064":2}`, `member "id" appears twice`, nil},
		{"non-ASCII name", `{"ſ":1}`, "", map[string]string{"ſ": "1"}},
		{"non-ASCII folding", `{"s":1,"ſ":2}`, `members "s" and "ſ" differ only in case`, nil},
		{"not an object", `[1]`, "not an object", nil},
		{"many members", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`, "", nil},
		{"many members, a pair", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"B":17}`,
			`members "b" and "B" differ only in case`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := objectMembers([]byte(tc.raw), envelopeNames, true)
			if got := errText(err); got != tc.err {
				t.Fatalf("err = %q, want %q", got, tc.err)
			}
			_, ref := decodeMembers([]byte(tc.raw), envelopeNames, true)
			if errText(ref) != errText(err) && tc.name != "not an object" {
				t.Fatalf("decoding member by member: %v, Members: %v", ref, err)
			}
			if err != nil || tc.want == nil {
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

// objectMembers is a JSON object's members as Object reads and Check
// checks them (what Members returned before every caller read Object
// itself), kept in a map: all of them, or those named in known.
func objectMembers(raw []byte, known []string, all bool) (map[string]json.RawMessage, error) {
	o, err := ReadObject(raw)
	if o == nil {
		return nil, err
	}
	if err := o.Check(known); err != nil {
		return nil, err
	}
	m := make(map[string]json.RawMessage, len(o.members))
	for _, mem := range o.members {
		n := o.text(mem)
		if all || slices.Contains(known, n) {
			m[n] = o.doc.raw[mem.start:mem.end:mem.end]
		}
	}
	return m, nil
}

// decodeMembers is objectMembers by encoding/json's tokenizer, member by member:
// the reference Object's reading agrees with (it was Members' own path for
// what its direct scan did not read).
func decodeMembers(raw []byte, known []string, all bool) (map[string]json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	m := map[string]json.RawMessage{}
	folded := map[string]string{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("member %q appears twice", k)
		}
		f := Fold(k)
		if prev, dup := folded[f]; dup {
			return nil, fmt.Errorf("members %q and %q differ only in case", prev, k)
		}
		for _, n := range known {
			if k != n && Fold(Unscored(k)) == Fold(Unscored(n)) {
				return nil, fmt.Errorf("member %q must be spelled %q", k, n)
			}
		}
		m[k], folded[f] = v, k
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	if !all {
		maps.DeleteFunc(m, func(k string, _ json.RawMessage) bool { return !slices.Contains(known, k) })
	}
	return m, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzMembersDecoded checks Object's reading (ReadObject, then Check) against decoding member by member on every valid JSON object:
// the same refusal with the same text, or the same members with the same
// values; and PlainString against encoding/json.
func FuzzMembersDecoded(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"wt2.x","_meta":{}}}`,
		`{"id":1,"ID":2}`, `{"taskid":"x"}`, `{"a":"\u00e9","b":[{"c":"]"}],"d":-1.5e3,"e":true}`,
		`{"name":"fast","arguments":{"q":"x"},"task":{"ttl":1}}`, `{"k":"\xff"}`, `{ }`, `"x\"y"`,
		`{"task_id":"x","taskId":"y"}`, `{"":1,"id":2}`, `{"Method":1,"a":2,"A":3}`, "{\"s\":1,\"\u017f\":2}",
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
		if !json.Valid(b) || b[SkipSpace(b, 0)] != '{' {
			return
		}
		for _, c := range []struct {
			known []string
			all   bool
		}{{envelopeNames, true}, {envelopeNames, false}, {[]string{"taskId", "name", "task"}, false}, {nil, true}} {
			m, err := objectMembers(b, c.known, c.all)
			ref, rerr := decodeMembers(b, c.known, c.all)
			if errText(err) != errText(rerr) {
				t.Fatalf("%q: Members %v, decoded %v", b, err, rerr)
			}
			if err != nil {
				continue
			}
			if len(m) != len(ref) {
				t.Fatalf("%q: %d members read, %d decoded", b, len(m), len(ref))
			}
			for k, want := range ref {
				if got, in := m[k]; !in || !bytes.Equal(got, want) {
					t.Fatalf("%q: %s is %q (%v) read, %q decoded", b, k, got, in, want)
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

// TestKnown checks that the members read are the ones named, names outside
// ASCII too.
func TestKnown(t *testing.T) {
	for raw, members := range map[string]int{`{"id":1,"x":{"a":2},"":3}`: 3, "{\"id\":1,\"\u212a\":2}": 2} {
		m, err := objectMembers([]byte(raw), []string{"id", "method"}, false)
		if err != nil || len(m) != 1 || string(m["id"]) != "1" {
			t.Errorf("Known(%s) = %q, %v; want only id", raw, m, err)
		}
		all, err := objectMembers([]byte(raw), []string{"id", "method"}, true)
		if err != nil || len(all) != members {
			t.Errorf("Members(%s) = %q, %v; want every member", raw, all, err)
		}
	}
}

// FuzzFoldEqualUnscored holds Misspells' comparison to its definition:
// foldEqualString of both names Unscored.
func FuzzFoldEqualUnscored(f *testing.F) {
	for _, s := range [][2]string{{"task_id", "taskId"}, {"meta", "_meta"}, {"TASK__ID", "taskid"}, {"\u212a_ind", "kind"}, {"_", ""}, {"a\xff", "A\xff"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := foldEqualUnscored([]byte(a), b), foldEqualString(Unscored(a), Unscored(b)); got != want {
			t.Fatalf("foldEqualUnscored(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
}
