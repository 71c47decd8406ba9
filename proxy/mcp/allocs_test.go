//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package mcp

import (
	"testing"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestFromUpstreamFastAllocs bounds the allocations of the fast path on
// the answer to tasks/get: the task id read, the owner look-up's answer,
// the handle sealed and the answer spliced. The spans found, the tasks
// named and their handles stay on the stack (the old code: 8).
func TestFromUpstreamFastAllocs(t *testing.T) {
	s := unitServer(t)
	taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
	x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`)
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"working"}}`)
	if _, keep, done := x.fromUpstreamFast(answer); !keep || !done {
		t.Fatalf("keep %v done %v", keep, done)
	}
	if n := testing.AllocsPerRun(100, func() { x.fromUpstreamFast(answer) }); n > 5 {
		t.Errorf("%v allocations, want at most 5", n)
	}
}
