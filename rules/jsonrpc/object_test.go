package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestReadObject(t *testing.T) {
	for _, tc := range []struct{ name, raw, err string }{
		{"plain", `{"a":1,"b":{"c":[1,"x",{"d":null}]}}`, ""},
		{"spaces", " {\n \"a\" : [ ] , \"b\" : { } }\t", ""},
		{"twice", `{"id":1,"id":2}`, `member "id" appears twice`},
		{"case pair", `{"x":1,"X":2}`, `members "x" and "X" differ only in case`},
		{"escaped twin", `{"taskId":1,"task\u0049d":2}`, `member "taskId" appears twice`},
		{"kelvin", "{\"k\":1,\"\u212a\":2}", "members \"k\" and \"\u212a\" differ only in case"},
		{"not an object", `[1]`, "not an object"},
		{"not JSON", `{"a":}`, "not JSON"},
		{"trailing", `{} {}`, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ReadObject([]byte(tc.raw))
			if err == nil {
				err = o.Check(nil) // a request's reading
			}
			if got := errText(err); got != tc.err {
				t.Fatalf("err = %q, want %q", got, tc.err)
			}
		})
	}
}

func TestUnique(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"a":1,"b":{"c":[{"d":1,"e":"d"}]}}`: true, `{"a":1,"A":2}`: true, `{"a":[{"b":1,"b":2}]}`: false,
		`{"a":{"b":1},"c":{"b":2}}`: true, `{"x":{"url":"a","url":"b"}}`: false, `[{"k":"k","k":1}]`: false,
		`{"a":"{"a":1,"a":2}"}`: true,
		// Invalid UTF-8 decodes as U+FFFD: one name twice to a decoder.
		"{\"\x93\":0,\"\xa1\":0}": false, "{\"\x93\":0,\"\ufffd\":0}": false, "{\"\x93\":0,\"x\":0}": true,
	} {
		if got := Unique([]byte(raw)); got != want {
			t.Errorf("Unique(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestUniqueAllocs: Unique reads a request of a few dozen names, nested a
// few deep, without allocating (it ran once per A2A request forwarded), and
// still tells duplicates apart past its stack buffers.
func TestUniqueAllocs(t *testing.T) {
	req := []byte(`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","taskId":"t","contextId":"c","parts":[{"text":"hello","metadata":{"a":{"b":[{"c":1}]}}}]},"configuration":{"historyLength":1}}}`)
	if n := testing.AllocsPerRun(100, func() { Unique(req) }); n != 0 {
		t.Errorf("Unique allocates %v times per request", n)
	}
	deep := strings.Repeat(`{"a":[`, 40) + `{"k":1,"k":2}` + strings.Repeat(`]}`, 40)
	var wide strings.Builder
	wide.WriteString(`{`)
	for i := range 100 {
		fmt.Fprintf(&wide, `"n%d":%d,`, i, i)
	}
	wide.WriteString(`"n7":0}`)
	for _, raw := range []string{deep, wide.String()} {
		if Unique([]byte(raw)) {
			t.Errorf("Unique(%.40s...) = true", raw)
		}
	}
}

// TestObjectNested: a refusal met reading a name from an object read later
// is Err's.
func TestObjectNested(t *testing.T) {
	o, err := ReadObject([]byte(`{"result":{"history":[{"taskId":"a","TaskId":"b"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := o.Obj("result")
	h, _ := r.Arr("history")
	if o.Err() != nil {
		t.Fatal("refused before the object was read")
	}
	x, _ := h.Obj(0)
	if o.Err() != nil {
		t.Fatal("refused before a name was read")
	}
	x.Str("taskId")
	if errText(o.Err()) != `members "taskId" and "TaskId" differ only in case` {
		t.Fatalf("Err = %v", o.Err())
	}
}

func TestObjectSplice(t *testing.T) {
	raw := ` { "id" : "t1" , "keep" : [ 1 , 2 ] , "status" : { "state" : "s" , "message" : { "taskId" : "t1" , "contextId" : "c" } } , "refs" : [ "a" , "b" , 3 ] } `
	o, err := ReadObject([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	o.SetStr("id", `h"1`)
	st, _ := o.Obj("status")
	m, _ := st.Obj("message")
	m.Del("contextId")
	m.SetStr("taskId", "h1")
	refs, _ := o.Arr("refs")
	refs.Drop(0)
	refs.SetStr(1, "B")
	refs.Drop(2)
	o.SetRaw("totalSize", []byte("1"))
	want := `{"id":"h\"1","keep":[ 1 , 2 ],"status":{"state":"s","message":{"taskId":"h1"}},"refs":["B"],"totalSize":1}`
	if got := string(o.AppendTo(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Unchanged: the bytes as they came.
	o, _ = ReadObject([]byte(raw))
	o.Obj("status")
	if got := string(o.AppendTo(nil)); got != strings.TrimSpace(raw) {
		t.Fatalf("unchanged object written as %s", got)
	}
}

// refNames is the reference refusal: a name twice or two names that fold
// alike, in any object of v's JSON text.
func refNames(d *json.Decoder) (bad bool, err error) {
	tok, err := d.Token()
	if err != nil {
		return false, err
	}
	delim, _ := tok.(json.Delim)
	switch delim {
	case '[':
		for d.More() {
			b, err := refNames(d)
			if err != nil {
				return false, err
			}
			bad = bad || b
		}
	case '{':
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return false, err
			}
			f := Fold(Unscored(k.(string)))
			bad = bad || seen[f]
			seen[f] = true
			b, err := refNames(d)
			if err != nil {
				return false, err
			}
			bad = bad || b
		}
	default:
		return false, nil
	}
	_, err = d.Token()
	return bad, err
}

// numberDecoder is a decoder of b that reads numbers as written: a number
// past a float64 (1e700) is no error to the references that read names.
func numberDecoder(b []byte) *json.Decoder {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d
}

// refTwice is the reference of Unique: a name given twice in any object.
func refTwice(d *json.Decoder) bool {
	tok, _ := d.Token()
	switch tok {
	case json.Delim('['):
		twice := false
		for d.More() {
			twice = refTwice(d) || twice
		}
		_, _ = d.Token()
		return twice
	case json.Delim('{'):
		seen, twice := map[string]bool{}, false
		for d.More() {
			k, _ := d.Token()
			twice = twice || seen[k.(string)]
			seen[k.(string)] = true
			twice = refTwice(d) || twice
		}
		_, _ = d.Token()
		return twice
	}
	return false
}

// edit changes an object read for splicing and its decoded twin alike, at
// every depth: a member whose name has a length of 0 mod 3 is left out, a
// string member of 1 mod 3 is replaced, an array loses its odd elements and
// has its even string elements replaced. It checks Str, Obj and Arr against
// the decoded values on the way.
func edit(t *testing.T, o *Object, m map[string]any) {
	names := o.Names()
	if len(names) != len(m) {
		t.Fatalf("names %q, decoded %d members", names, len(m))
	}
	for _, n := range names {
		v, in := m[n]
		if !in {
			t.Fatalf("member %q not decoded", n)
		}
		if s, ok := o.Str(n); ok != isStr(v) || ok && s != v {
			t.Fatalf("Str(%q) = %q %v, decoded %#v", n, s, ok, v)
		}
		switch len(n) % 3 {
		case 0:
			o.Del(n)
			delete(m, n)
			continue
		case 1:
			if s, ok := v.(string); ok {
				o.SetStr(n, "<"+s+"\x01>")
				m[n] = "<" + s + "\x01>"
				continue
			}
		}
		switch v := v.(type) {
		case map[string]any:
			sub, ok := o.Obj(n)
			if !ok {
				t.Fatalf("Obj(%q) not read", n)
			}
			edit(t, sub, v)
		case []any:
			a, ok := o.Arr(n)
			if !ok || a.Len() != len(v) {
				t.Fatalf("Arr(%q) not read as %d elements", n, len(v))
			}
			kept := []any{}
			for i, e := range v {
				switch {
				case i%2 == 1:
					a.Drop(i)
					continue
				case isStr(e):
					s, _ := a.Str(i)
					if s != e {
						t.Fatalf("%q[%d] = %q, decoded %q", n, i, s, e)
					}
					a.SetStr(i, "["+s+"]")
					e = "[" + s + "]"
				case isObj(e):
					sub, _ := a.Obj(i)
					edit(t, sub, e.(map[string]any))
				}
				kept = append(kept, e)
			}
			m[n] = kept
		}
	}
}

// readAll reads every object and array of o.
func readAll(o *Object) {
	for _, n := range o.Names() {
		if sub, ok := o.Obj(n); ok {
			readAll(sub)
		}
		if a, ok := o.Arr(n); ok {
			readArray(a)
		}
	}
}

func readArray(a *Array) {
	raw := a.doc.raw
	for i := range a.Len() {
		if sub, ok := a.Obj(i); ok {
			readAll(sub)
		}
		if e := a.elems[i]; raw[e.start] == '[' {
			readArray(a.doc.array(int(e.start), false))
		}
	}
}

func isStr(v any) bool { _, ok := v.(string); return ok }
func isObj(v any) bool { _, ok := v.(map[string]any); return ok }

func decodeNumber(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return v
}

// FuzzObject checks the splicing reader against encoding/json: the same
// refusals (a name twice or folding like another, at any depth, once every
// object is read), the same members and strings, and the same message after
// the same changes made to the spliced object and to the decoded map that
// encoding/json then re-encodes.
func FuzzObject(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"id":"t","contextId":"c","status":{"state":"s","message":{"taskId":"t","referenceTaskIds":["a","b"]}},"history":[{"taskId":"x"},1,"s",null]}}`,
		`{"a":"\u00e9\ud800","b":[{"c":"]"}],"d":-1.5e3,"e":true,"abc":{"x":[[1],{}]}}`,
		`{"id":1,"ID":2}`, `{"k":"\xff","\xff":1}`, `{ }`, `{"a\"b":"c\\d","":""}`, "{\"k\":{\"K\":1,\"\u212a\":2}}",
		`{"tasks":[{"id":"1"},{"id":"2"},{"id":"3"}],"nextPageToken":"p","totalSize":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ReadObject(b)
		if !json.Valid(b) || bytes.TrimLeft(b, " \t\r\n")[0] != '{' {
			if err == nil {
				t.Fatalf("%q read", b)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: ReadObject %v", b, err)
		}
		ref, top := decodeMembers(b, nil, true)
		if errText(o.Check(nil)) != errText(top) {
			t.Fatalf("%q: Check %v, decode %v", b, o.Check(nil), top)
		}
		_, spelled := decodeMembers(b, envelopeNames, true)
		if errText(o.Check(envelopeNames)) != errText(spelled) {
			t.Fatalf("%q: Check %v, decode %v", b, o.Check(envelopeNames), spelled)
		}
		if twice := refTwice(numberDecoder(b)); Unique(b) == twice {
			t.Fatalf("%q: Unique %v, a name twice: %v", b, Unique(b), twice)
		}
		bad, rerr := refNames(numberDecoder(b))
		if rerr != nil {
			t.Fatal(rerr)
		}
		m := decodeNumber(t, b).(map[string]any)
		if top == nil && len(ref) != len(m) {
			t.Fatalf("%q: %d members, %d decoded", b, len(ref), len(m))
		}
		// StrOf reads what Str reads (on a copy: reading any name may
		// refuse the object, which the checks below read)
		o2, _ := ReadObject(b)
		for k := range m {
			s, ok := o2.Str(k)
			known := []string{"2.0", "t", "c", "", "s"}
			if raw, _ := o2.Raw(k); len(raw) >= 2 && raw[0] == '"' {
				// the literal's own bytes, escapes and invalid UTF-8 kept:
				// a known id need not decode to itself
				known = append(known, string(raw[1:len(raw)-1]))
			}
			if s2, ok2 := o2.StrOf(k, known); s2 != s || ok2 != ok {
				t.Fatalf("%q: StrOf(%q) %q %v, Str %q %v", b, k, s2, ok2, s, ok)
			}
		}
		readAll(o)
		if (o.Err() != nil) != bad {
			t.Fatalf("%q: Err %v, a name twice or folded: %v", b, o.Err(), bad)
		}
		if bad {
			return
		}
		edit(t, o, m)
		out := o.AppendTo(nil)
		want, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out) || !reflect.DeepEqual(decodeNumber(t, out), decodeNumber(t, want)) {
			t.Fatalf("%q:\nspliced  %s\nre-coded %s", b, out, want)
		}
	})
}

// TestWalk: Walk visits every object at any depth once, the values of a
// name given twice and the objects of an array within an array included,
// and what is changed in them is written back (Arr's array within an array
// too: before, it was read again on every call and never written back).
func TestWalk(t *testing.T) {
	raw := `{"a":{"b":[{"c":1},{"d":{"e":{}}},[{"f":2}],3,"s"]},"g":null,"a":{"h":[[{"taskId":"x"}]]}}`
	o, _ := ReadObject([]byte(raw))
	n := 0
	seen := map[string]bool{}
	o.Walk(func(obj *Object) {
		n++
		for _, k := range obj.Names() {
			seen[k] = true
		}
		if _, ok := obj.Str("taskId"); ok {
			obj.SetStr("taskId", "y")
		}
	})
	if n != 9 {
		t.Fatalf("walked %d objects, want 9", n)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "taskId"} {
		if !seen[k] {
			t.Errorf("%s not seen", k)
		}
	}
	want := strings.Replace(raw, `"x"`, `"y"`, 1)
	if got := o.AppendTo(nil); !sameJSONText(got, want) {
		t.Fatalf("wrote %s, want %s", got, want)
	}
	// An array within an array, read with Arr, is written back.
	o, _ = ReadObject([]byte(`{"l":[["a","b"]]}`))
	l, _ := o.Arr("l")
	in, _ := l.Arr(0)
	in.SetStr(1, "c")
	if again, _ := l.Arr(0); again != in {
		t.Fatal("Arr read the array again")
	}
	if got := string(o.AppendTo(nil)); got != `{"l":[["a","c"]]}` {
		t.Fatalf("wrote %s", got)
	}
}

// sameJSONText compares a document with a text whose objects may give a
// name twice: byte for byte once spaces are gone.
func sameJSONText(a []byte, b string) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, []byte(b)) == nil && x.String() == y.String()
}

// TestAppendRaw: elements added to an array are written after the others,
// those left out are not.
func TestAppendRaw(t *testing.T) {
	o, _ := ReadObject([]byte(`{"tasks":[{"a":1}, {"b":2}],"n":1}`))
	l, _ := o.Arr("tasks")
	l.Drop(0)
	l.AppendRaw([]byte(`{"c":3}`))
	l.AppendRaw([]byte(`"d"`))
	if got := string(o.AppendTo(nil)); got != `{"tasks":[{"b":2},{"c":3},"d"],"n":1}` {
		t.Fatalf("wrote %s", got)
	}
	if _, ok := l.Obj(2); ok {
		t.Fatal("an added element reads as an object")
	}
}

// TestStrOf: StrOf reads every spelling as Str does; a plain spelling of
// one of known is that constant.
func TestStrOf(t *testing.T) {
	known := []string{"tasks/get", "GetTask", "2.0", `a\u0062`, `x\\y`, "id\xff"}
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{`{"m":"tasks/get"}`, "tasks/get", true},
		{`{"m":"tasks\/get"}`, "tasks/get", true},
		{`{"m":"tasks\u002fget"}`, "tasks/get", true},
		{`{"m":"Tasks/get"}`, "Tasks/get", true},
		{`{"m":"tasks/get "}`, "tasks/get ", true},
		{`{"m":""}`, "", true},
		{`{"m":7}`, "", false},
		{`{"m":null}`, "", false},
		{`{"x":"GetTask"}`, "", false},
		{"{\"m\":\"\xff\"}", "\ufffd", true},
		// known ids that do not decode to themselves: read as Str reads them
		{`{"m":"a\u0062"}`, "ab", true},
		{`{"m":"x\\y"}`, `x\y`, true},
		{"{\"m\":\"id\xff\"}", "id\ufffd", true},
	} {
		o, err := ReadObject([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		got, ok := o.StrOf("m", known)
		s, sok := o.Str("m")
		if got != tc.want || ok != tc.ok || got != s || ok != sok {
			t.Errorf("%s: StrOf %q %v, Str %q %v, want %q %v", tc.raw, got, ok, s, sok, tc.want, tc.ok)
		}
	}
}

// FuzzKeep: Keep leaves out what Names, each name not kept given to Del,
// leaves out (the bytes written and the refusal alike), on every object
// Check accepts: a request's envelope, whose names Parse checked.
func FuzzKeep(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"t"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"t"},"extra":1,"more":[1,{"a":2}]}`,
		`{"jsonr\u0070c":"2.0","i\u0064":7,"x\u0079":1}`,
		`{ "method" : "m" , "z":null }`, `{}`, `{"params":null}`, `{"ID":1}`,
	} {
		f.Add([]byte(s))
	}
	keep := []string{"jsonrpc", "id", "method", "params"}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadObject(b)
		if err != nil || a.Check(nil) != nil {
			return
		}
		k, _ := ReadObject(b)
		for _, n := range a.Names() {
			if !slices.Contains(keep, n) {
				a.Del(n)
			}
		}
		k.Keep(keep...)
		if got, want := k.AppendTo(nil), a.AppendTo(nil); !bytes.Equal(got, want) || errText(k.Err()) != errText(a.Err()) {
			t.Fatalf("%q: Keep wrote %q (%v), Names and Del %q (%v)", b, got, k.Err(), want, a.Err())
		}
	})
}
