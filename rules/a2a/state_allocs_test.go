//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package a2a

import (
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// TestStateOfAllocs: a known state is read without a copy (Str makes one).
func TestStateOfAllocs(t *testing.T) {
	o, err := jsonrpc.ReadObject([]byte(`{"state":"TASK_STATE_WORKING","timestamp":"2026-01-01T00:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = StateOf(o) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
