//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package owners

import (
	"context"
	"testing"
)

// TestLearnAllocs: learning the status an answer reports of a known task
// (an A2A GetTask's, an MCP tasks/get's) allocates the owners' slice only;
// the statuses observed stay on the stack (2 when they were gathered in a
// slice of their own).
func TestLearnAllocs(t *testing.T) {
	ctx := context.Background()
	tb, err := New(16, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Kind: A2ATask, ID: "task-1"}
	if _, err := tb.Learn(ctx, "alice", Fact{Key: k, Created: true}); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if o, err := tb.Learn(ctx, "alice", Fact{Key: k, Status: "TASK_STATE_WORKING"}); err != nil || o[0] != "alice" {
			t.Fatalf("%v %v", o, err)
		}
	})
	if n > 1 {
		t.Errorf("%v allocations, want at most 1", n)
	}
}
