//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package tasks

import (
	"context"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/mcp"
)

// TestEnforceAllocs bounds the allocations of deciding a tools/call: the
// request stays on the stack (a closure over it, made for every call for
// the steers that need it, moved it to the heap: 4).
func TestEnforceAllocs(t *testing.T) {
	x := newDecider(t, proxy.Config{})
	r := Request{Principal: authn.Principal{ID: bob, Method: "dev"}, Call: mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall, Tool: "slow"}}
	if n := testing.AllocsPerRun(100, func() {
		d, err := x.Enforce(context.Background(), r)
		if err != nil || !d.Allow {
			t.Fatalf("%+v %v", d, err)
		}
		d.Settle(true)
	}); n > 2 {
		t.Errorf("%v allocations, want at most 2", n)
	}
}
