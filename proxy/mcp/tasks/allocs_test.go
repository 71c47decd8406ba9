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

// TestEnforceAllocs bounds the allocations of deciding a request: a
// tools/call keeps the request on the stack (a closure over it, made for
// every call for the steers that need it, moved it to the heap: 4); a
// request naming no tool, prompt or resource (tasks/list) makes no
// input.mcp of its own (2 before: an empty one for every request).
func TestEnforceAllocs(t *testing.T) {
	x := newDecider(t, proxy.Config{})
	for _, tc := range []struct {
		call mcp.Call
		max  float64
	}{
		{mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall, Tool: "slow"}, 2},
		{mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodList}, 1},
	} {
		r := Request{Principal: authn.Principal{ID: bob, Method: "dev"}, Call: tc.call}
		if n := testing.AllocsPerRun(100, func() {
			d, err := x.Enforce(context.Background(), r)
			if err != nil || !d.Allow {
				t.Fatalf("%s: %+v %v", tc.call.Method, d, err)
			}
			d.Settle(true)
		}); n > tc.max {
			t.Errorf("%s: %v allocations, want at most %v", tc.call.Method, n, tc.max)
		}
	}
}
