package tasks

import (
	"context"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/mcp"
)

// TestLearnForgotten: with no shared store, an MCP task the table
// evicted is not learned for whoever an answer names next (the MCP adapter
// then hands it to nobody), and its owner's handle proves it again.
func TestLearnForgotten(t *testing.T) {
	e := newDecider(t, proxy.Config{Sessions: 2})
	taskCreated(e, "a", "alice", mcp.StatusWorking)
	taskCreated(e, "b", "carol", mcp.StatusWorking)
	taskCreated(e, "c", "carol", mcp.StatusWorking) // "a" evicted
	taskCreated(e, "a", "bob", mcp.StatusWorking)
	if o, ok := taskOwner(e, "a"); ok {
		t.Fatalf("alice's evicted task learned for %q", o)
	}
	alice := authn.Principal{ID: "alice", Method: string(authn.MethodDev)}
	if d, err := e.Enforce(context.Background(), Request{Principal: alice, Call: mcp.Call{Method: mcp.MethodGet}, TaskID: "a", Owner: true}); err != nil || !d.Allow {
		t.Fatalf("alice's handle after the eviction: %+v %v", d, err)
	}
	if o, ok := taskOwner(e, "a"); !ok || o != "alice" {
		t.Fatalf("owner after alice's handle: %q %v", o, ok)
	}
}
