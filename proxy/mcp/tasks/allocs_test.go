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

// TestEnforceAllocsNoSubject: deciding a request that names no tool,
// prompt or resource (tasks/list) makes no input.mcp of its own (one
// before: an empty one for every request).
func TestEnforceAllocsNoSubject(t *testing.T) {
	x := newDecider(t, proxy.Config{})
	r := Request{Principal: authn.Principal{ID: bob, Method: "dev"}, Call: mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodList}}
	if n := testing.AllocsPerRun(100, func() {
		d, err := x.Enforce(context.Background(), r)
		if err != nil || !d.Allow {
			t.Fatalf("%+v %v", d, err)
		}
		d.Settle(true)
	}); n > 1 {
		t.Errorf("%v allocations, want at most 1", n)
	}
}
