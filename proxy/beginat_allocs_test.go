//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package proxy

import (
	"context"
	"testing"
)

// TestBeginAtAllocs: a flight with its source is one allocation, its own
// (Begin on WithSource's context: two). The flights are kept, as a door
// keeps its flight past Begin (else the compiler may keep one on the
// stack, the comparison's included).
func TestBeginAtAllocs(t *testing.T) {
	e := plainEnforcer(t)
	src := Source{Client: "192.0.2.7:41234", RequestID: "req-1", Method: "POST", Path: "/mcp"}
	door := e.Door(testProtocols["mcp"], DoorSidecar)
	var kept []*Flight
	if n := testing.AllocsPerRun(100, func() {
		_, f := e.BeginAt(context.Background(), src, door, nil)
		f.End(false)
		kept = append(kept[:0], f)
	}); n > 1 {
		t.Errorf("%v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		_, f := e.Begin(WithSource(context.Background(), src), door, nil)
		f.End(false)
		kept = append(kept[:0], f)
	}); n != 2 {
		t.Errorf("Begin on WithSource: %v allocations, the comparison's 2", n)
	}
}
