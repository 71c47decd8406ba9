//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package jsonrpc

import (
	"encoding/json"
	"testing"
)

// TestSetStrAllocs bounds the allocations of reading a message and setting
// three of its ids (an A2A task's id, contextId and a message's taskId):
// the doc, the array read, the replacements and the literals' one buffer
// (4). With a buffer per literal and the replacements grown one by one: 8;
// before that, each literal grown from nothing: 11.
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
	if n > 4 {
		t.Errorf("%v allocations, want at most 4", n)
	}
}

// TestStrOfAllocs: a method name spelled as one of the known is read
// without a copy; Str makes one.
func TestStrOfAllocs(t *testing.T) {
	o, err := ReadObject([]byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get"}`))
	if err != nil {
		t.Fatal(err)
	}
	known := []string{"tools/call", "tasks/get"}
	if n := testing.AllocsPerRun(100, func() { _, _ = o.StrOf("method", known) }); n != 0 {
		t.Errorf("StrOf: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = o.Str("method") }); n != 1 {
		t.Errorf("Str: %v allocations, want 1 (the copy StrOf saves)", n)
	}
}

// TestIsIDAllocs: an id echoed as written is compared without a copy.
func TestIsIDAllocs(t *testing.T) {
	for _, id := range []string{`7`, `"req-1"`} {
		raw, rid := []byte(id), json.RawMessage(id)
		if n := testing.AllocsPerRun(100, func() {
			if !IsID(raw, rid) {
				t.Fatal("not the same id")
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations, want 0", id, n)
		}
	}
}
