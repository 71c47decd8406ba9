package jsonrpc

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// readObjectOld is ReadObject as it was before the objects it reads found
// their values' ends on the pass that checks the message (index.go): Valid,
// then each value walked to find its end. FuzzReadObjectOnePass holds
// ReadObject to it.
func readObjectOld(raw []byte) (*Object, error) {
	if !Valid(raw) {
		return nil, ErrNotJSON
	}
	i := SkipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, ErrNotObject
	}
	if len(raw) > math.MaxInt32 {
		return nil, fmt.Errorf("too large")
	}
	d := &doc{raw: raw} // no spans: every value is walked
	d.members, d.elems, d.objects = d.mbuf[:0], d.ebuf[:0], d.obuf[:0]
	return d.object(i, false), nil
}

// layout writes where every member and element of o lies, at every depth,
// as the objects and arrays read from it hold them.
func layout(sb *strings.Builder, o *Object) {
	fmt.Fprintf(sb, "{%d:%d", o.start, o.end)
	for _, m := range o.members {
		fmt.Fprintf(sb, " %d:%d=%d:%d/%v%v%q", m.keyStart, m.keyEnd, m.start, m.end, m.plain, m.under, m.name)
		layoutValue(sb, o.doc, int(m.start))
	}
	sb.WriteString("}")
}

func layoutValue(sb *strings.Builder, d *doc, start int) {
	switch d.raw[start] {
	case '{':
		layout(sb, d.object(start, true))
	case '[':
		a := d.array(start, true)
		fmt.Fprintf(sb, "[%d:%d", a.start, a.end)
		for _, e := range a.elems {
			fmt.Fprintf(sb, " %d:%d", e.start, e.end)
			layoutValue(sb, d, int(e.start))
		}
		sb.WriteString("]")
	}
}

// reading is what a reader of o sees: its layout, then every object
// walked with its "id" set and "token" left out, written back, and the
// refusal met.
func reading(o *Object, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var sb strings.Builder
	layout(&sb, o)
	o.Walk(func(w *Object) {
		w.Hold("id", "kind", "taskId")
		if w.Has("id") {
			w.SetStr("id", "x")
		}
		w.Del("token")
	})
	sb.WriteString("\n")
	sb.Write(o.AppendTo(nil))
	fmt.Fprintf(&sb, "\n%v %v", o.Err(), o.Check([]string{"id", "result"}))
	return sb.String()
}

// FuzzReadObjectOnePass holds ReadObject, whose objects find their values'
// ends on the one pass, to readObjectOld, which walked them: the same
// refusal, the same members and elements where they lie, the same
// rewriting.
func FuzzReadObjectOnePass(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"id":"t1","contextId":"c","status":{"state":"working"},"history":[{"role":"user","parts":[{"kind":"text","text":"a{b}[c]"}],"taskId":"t1"}],"artifacts":[]}}`,
		" {\n \"a\" : [ ] , \"b\" : { } }\t",
		`{"a":[[],[{}],{"b":[1,"x",{"id":2,"token":"s"}]}],"c":{"d":{"e":{}}},"ID":3}`,
		`{"task\u0049d":1,"taskId":2,"\u00e9":[true,false,null,-1.5e3]}`,
		`[1]`, `{"a":}`, `{"a":1`, ``, ` `, `"x"`,
		strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70),
		strings.Repeat(`{"a":[`, 20) + strings.Repeat("]}", 20),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := reading(ReadObject(raw))
		want := reading(readObjectOld(raw))
		if got != want {
			t.Errorf("ReadObject(%q):\n%s\nwalked:\n%s", raw, got, want)
		}
	})
}
