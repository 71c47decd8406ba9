package jsonrpc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestOneRule: a name read from an object is read as every reader reads it
// or the message is refused (Err) and the name reads as absent: given twice
// (escaped or not), or folding like another member (ASCII case, the Kelvin
// sign, the long s, after escapes are decoded); in a protocol object (read
// by name) also spelled otherwise alone. An object reached by Walk only is
// loose: a lone other spelling there is simply not the name. Before, a
// protocol object was held to a lone spelling only when the whole message
// was held to a list (Spelling), and a name read by name was refused given
// twice only where the caller asked (Repeats).
func TestOneRule(t *testing.T) {
	for _, tc := range []struct {
		name, member string // member: the object holding "taskId" (at "o")
		strict       string // the refusal read by name; "" passes
		loose        bool   // refused when reached by Walk only
		value        string // what passes reads as taskId
	}{
		{"spelled", `{"taskId":"a","x":1,"x":2}`, "", false, `"a"`},
		{"absent", `{"task":"a"}`, "", false, ""},
		{"twice", `{"taskId":"a","taskId":"b"}`, `member "taskId" appears twice`, true, ""},
		{"escaped twin", `{"taskId":"a","task\u0049d":"b"}`, `member "taskId" appears twice`, true, ""},
		{"escaped alone", `{"task\u0049d":"a"}`, "", false, `"a"`},
		{"case pair", `{"taskId":"a","TaskId":"b"}`, `members "taskId" and "TaskId" differ only in case`, true, ""},
		{"case pair, escaped", `{"taskId":"a","T\u0061skId":"b"}`, `members "taskId" and "TaskId" differ only in case`, true, ""},
		{"case alone", `{"TaskId":"a"}`, `member "TaskId" must be spelled "taskId"`, false, ""},
		{"upper alone", `{"TASKID":"a"}`, `member "TASKID" must be spelled "taskId"`, false, ""},
		{"two others", `{"TaskId":"a","TASKID":"b"}`, `members "taskId" and "TASKID" differ only in case`, true, ""},
		{"kelvin alone", "{\"tas\u212aId\":\"a\"}", "member \"tas\u212aId\" must be spelled \"taskId\"", false, ""},
		{"kelvin escaped", `{"tas\u212aId":"a"}`, "member \"tas\u212aId\" must be spelled \"taskId\"", false, ""},
		{"kelvin pair", "{\"taskId\":\"a\",\"tas\u212aId\":\"b\"}", "members \"taskId\" and \"tas\u212aId\" differ only in case", true, ""},
		{"long s alone", "{\"ta\u017fkId\":\"a\"}", "member \"ta\u017fkId\" must be spelled \"taskId\"", false, ""},
		{"long s pair", `{"taskId":"a","ta\u017fkId":"b"}`, "members \"taskId\" and \"ta\u017fkId\" differ only in case", true, ""},
		{"longer name", `{"taskIds":["a"],"taskId":"a"}`, "", false, `"a"`},
		{"dotless i is no i", "{\"task\u0131d\":\"a\"}", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(`{"o":{"p":` + tc.member + `}}`)
			// Read by name: a protocol object.
			o, err := ReadObject(raw)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := o.Obj("o")
			p, _ := a.Obj("p")
			v, _ := p.Raw("taskId")
			if got := errText(o.Err()); got != tc.strict {
				t.Fatalf("read by name: Err %q, want %q", got, tc.strict)
			}
			if want := tc.value; tc.strict == "" && string(v) != want || tc.strict != "" && v != nil {
				t.Fatalf("read by name: taskId %s, want %s", v, want)
			}
			// Reached by Walk: loose.
			o, _ = ReadObject(raw)
			var walked []byte
			o.Walk(func(w *Object) {
				if w.Source()[0] == '{' && strings.HasPrefix(string(w.Source()), tc.member[:2]) && w.Size() == len(tc.member) {
					walked, _ = w.Raw("taskId")
				}
			})
			if got := o.Err() != nil; got != tc.loose {
				t.Fatalf("walked: Err %v, want refused %v", o.Err(), tc.loose)
			}
			if !tc.loose && tc.strict == "" && string(walked) != tc.value {
				t.Fatalf("walked: taskId %s, want %s", walked, tc.value)
			}
			// Walked first, read by name after: a protocol object still.
			o, _ = ReadObject(raw)
			o.Walk(func(*Object) {})
			a, _ = o.Obj("o")
			p, _ = a.Obj("p")
			p.Hold("taskId")
			if got := errText(o.Err()); got != tc.strict {
				t.Fatalf("walked, then read by name: Err %q, want %q", got, tc.strict)
			}
		})
	}
}

// FuzzHold: whatever an object's names, a name read from it reads as Go's
// encoding/json reads it into a struct field of that name (which matches
// names without case, the last of them winning), or the message is refused.
// Loose (reached by Walk), a lone other spelling may read as absent where
// encoding/json reads it: that object is not the protocol's.
func FuzzHold(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"a"}`, `{"TaskId":"a"}`, `{"taskId":1,"taskId":2}`, `{"task\u0049d":1}`, "{\"tas\u212aId\":1}",
		`{"ta\u017fkId":1,"taskId":2}`, `{"k":1,"K":2}`, `{"id":1,"ID":2,"iD":3}`, `{"s":[1],"\u017f":{}}`, `{}`,
	} {
		f.Add([]byte(s), byte(0))
	}
	names := []string{"taskId", "k", "s", "id"}
	f.Fuzz(func(t *testing.T, raw []byte, which byte) {
		name := names[int(which)%len(names)]
		typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeOf(json.RawMessage{}), Tag: reflect.StructTag(`json:"` + name + `"`)}})
		ref := reflect.New(typ)
		if json.Unmarshal(raw, ref.Interface()) != nil {
			return
		}
		goRead := ref.Elem().Field(0).Bytes()
		for _, loose := range []bool{false, true} {
			o, err := ReadObject(raw)
			if err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			o.loose = loose
			got, _ := o.Raw(name)
			if o.Err() != nil {
				if got != nil {
					t.Fatalf("%q: refused, yet %s read", raw, got)
				}
				continue
			}
			if string(got) != string(goRead) && !(loose && got == nil) {
				t.Fatalf("%q (loose %v): read %s as %s, encoding/json %s", raw, loose, name, got, goRead)
			}
		}
	})
}

// TestCountFold: every spelling a reader folding names reads as name is
// counted, raw (escapes are the caller's), and nothing else.
func TestCountFold(t *testing.T) {
	for _, tc := range []struct {
		b, name string
		want    int
	}{
		{`{"taskId":1,"TASKID":2,"taskid":3}`, "taskId", 3},
		{"{\"tas\u212aId\":1,\"ta\u017fkId\":2,\"TA\u017f\u212aID\":3}", "taskId", 3},
		{"{\"\u212aey\":1,\"\u017fo\":2}", "key", 1},
		{"{\"\u017fo\":2,\"SO\":1}", "so", 2},
		{`{"task\u0049d":1,"tasks":2,"Id":3}`, "taskId", 0},
		{`taskIdtaskIds`, "taskIds", 1},
		{`@taskId[`, "@taskid[", 1},
		{`1a 1A 1b`, "1a", 2},
	} {
		if got := CountFold([]byte(tc.b), tc.name); got != tc.want {
			t.Errorf("CountFold(%s, %q) = %d, want %d", tc.b, tc.name, got, tc.want)
		}
	}
}
