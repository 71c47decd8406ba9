package tasks

import (
	"context"
	"strings"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/mcp"
)

// The owner table as the adapters reach it (a decision's Learn, Observe,
// Owners), in the shapes the tests read best; what an answer created is
// learned for owner as a decision of owner's request would.

func mcpKey(id string) owners.Key { return owners.Key{Kind: owners.MCPTask, ID: id} }

// taskCreated records that the answer to owner's own request created task
// id, as an answer filter does; a store error leaves it unrecorded.
func taskCreated(e *Decider, id, owner, status string) {
	_, _ = e.owners.Learn(context.Background(), owner, owners.Fact{Key: mcpKey(id), Created: true, Status: status})
}

// taskObserved records a status an answer reported for task id.
func taskObserved(e *Decider, id, status string) {
	_, _ = e.Observe(context.Background(), owners.Fact{Key: mcpKey(id), Status: status})
}

// taskOwner returns whose task id is, and whether Warden knows (a store
// that cannot be read: unknown).
func taskOwner(e *Decider, id string) (string, bool) {
	o, err := e.e.Owners(context.Background(), "", mcpKey(id))
	if err != nil || o[0] == "" {
		return "", false
	}
	return o[0], true
}

func taskOwners(e *Decider, ctx context.Context, ids []string) ([]string, error) {
	keys := make([]owners.Key, len(ids))
	for i, id := range ids {
		keys[i] = mcpKey(id)
	}
	return e.e.Owners(ctx, "", keys...)
}

// steersOf is the steer count this replica holds for task id.
func steersOf(e *Decider, id string) int {
	_, _, n, _ := e.owners.Peek(mcpKey(id))
	return n
}

// TestDecisionLearn: what an answer created is learned for the principal
// whose request it answers, the decision's, and for nobody else; a message
// no decided request opened creates nothing.
func TestDecisionLearn(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	ctx := context.Background()
	taskCreated(e, "alices", alice, mcp.StatusWorking)
	d := enforceTask(t, e, Request{Principal: authn.Principal{ID: bob, Method: string(authn.MethodDev)}, Call: mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall}})
	defer d.Settle(true)
	got, err := d.Learn(ctx, owners.Fact{Key: mcpKey("alices"), Created: true}, owners.Fact{Key: mcpKey("new"), Created: true, Status: mcp.StatusWorking})
	if err != nil || strings.Join(got, ",") != alice+","+bob {
		t.Fatalf("bob's answer: owners %q %v, want alice's stays alice's and the new one bob's", got, err)
	}
	if got, err := e.Observe(ctx, owners.Fact{Key: mcpKey("stray"), Created: true}); err != nil || got[0] != "" {
		t.Fatalf("a stray message's task: %q %v, want nobody's", got, err)
	}
	var macp proxy.Decision
	if _, err := macp.Learn(ctx, owners.Fact{Key: mcpKey("x"), Created: true}); err == nil {
		t.Fatal("a decision without an owner table learned")
	}
}
