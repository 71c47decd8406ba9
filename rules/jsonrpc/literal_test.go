package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestSetStrLiterals: each string SetStr sets stays what it was set to
// however many follow, long or escaped ones included.
func TestSetStrLiterals(t *testing.T) {
	o, err := ReadObject([]byte(`{"a":"x","list":["p","q","r"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for i := range 60 {
		v := fmt.Sprintf("v%d-%s", i, strings.Repeat("\"é\\\n", i%7*i))
		k := fmt.Sprint("k", i)
		o.SetStr(k, v)
		want[k] = v
	}
	o.SetStr("a", "y")
	want["a"] = "y"
	list, _ := o.Arr("list")
	list.SetStr(1, "Q\u2028")
	want["list"] = []any{"p", "Q\u2028", "r"}
	var got map[string]any
	if err := json.Unmarshal(o.AppendTo(nil), &got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// TestSetStrAllocs bounds the allocations of reading a message and setting
// three of its ids (an A2A task's id, contextId and a message's taskId):
// the doc, the array read, the replacements (grown twice) and one per
// literal (8). The old SetStr grew each literal from nothing: 11.
func TestSetStrAllocs(t *testing.T) {
	raw := []byte(`{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"},"history":[{"taskId":"task-1"}]}`)
	n := testing.AllocsPerRun(100, func() {
		o, _ := ReadObject(raw)
		o.SetStr("id", "wt.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		o.SetStr("contextId", "wt.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB")
		history, _ := o.Arr("history")
		msg, _ := history.Obj(0)
		msg.SetStr("taskId", "wt.CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC")
	})
	if n > 8 {
		t.Errorf("%v allocations, want at most 8", n)
	}
}
