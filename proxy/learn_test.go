package proxy

import (
	"context"

	"github.com/agentwarden/warden/proxy/owners"
)

// The owner table as the adapters reach it (Learn, Owners), in the shapes
// the tests read best.

func mcpKey(id string) owners.Key  { return owners.Key{Kind: owners.MCPTask, ID: id} }
func a2aTask(id string) owners.Key { return owners.Key{Kind: owners.A2ATask, ID: id} }

// taskCreated records that the answer to owner's own request created task
// id, as an answer filter does; a store error leaves it unrecorded.
func taskCreated(e *Enforcer, id, owner, status string) {
	_, _ = e.Learn(context.Background(), owners.Fact{Key: mcpKey(id), Owner: owner, Status: status})
}

// taskObserved records a status an answer reported for task id.
func taskObserved(e *Enforcer, id, status string) {
	_, _ = e.Learn(context.Background(), owners.Fact{Key: mcpKey(id), Status: status})
}

// taskOwner returns whose task id is, and whether Warden knows (a store
// that cannot be read: unknown).
func taskOwner(e *Enforcer, id string) (string, bool) {
	o, err := e.Owners(context.Background(), mcpKey(id))
	if err != nil || o[0] == "" {
		return "", false
	}
	return o[0], true
}

func taskOwners(e *Enforcer, ctx context.Context, ids []string) ([]string, error) {
	keys := make([]owners.Key, len(ids))
	for i, id := range ids {
		keys[i] = mcpKey(id)
	}
	return e.Owners(ctx, keys...)
}

func a2aOwners(e *Enforcer, ctx context.Context, ids []string) ([]string, error) {
	keys := make([]owners.Key, len(ids))
	for i, id := range ids {
		keys[i] = a2aTask(id)
	}
	return e.Owners(ctx, keys...)
}

func a2aContextOwner(e *Enforcer, ctx context.Context, id string) (string, error) {
	o, err := e.Owners(ctx, owners.Key{Kind: owners.A2AContext, ID: id})
	if err != nil {
		return "", err
	}
	return o[0], nil
}

func learnOne(e *Enforcer, ctx context.Context, f owners.Fact) (string, error) {
	o, err := e.Learn(ctx, f)
	if err != nil {
		return "", err
	}
	return o[0], nil
}

func a2aTaskSeen(e *Enforcer, ctx context.Context, id, owner, state string) (string, error) {
	return learnOne(e, ctx, owners.Fact{Key: a2aTask(id), Owner: owner, Status: state})
}

func a2aContextSeen(e *Enforcer, ctx context.Context, id, owner string) (string, error) {
	return learnOne(e, ctx, owners.Fact{Key: owners.Key{Kind: owners.A2AContext, ID: id}, Owner: owner})
}

func a2aObserved(e *Enforcer, id, state string) {
	_, _ = e.Learn(context.Background(), owners.Fact{Key: a2aTask(id), Status: state})
}

func a2aObservedAll(e *Enforcer, ids, states []string) {
	facts := make([]owners.Fact, len(ids))
	for i, id := range ids {
		facts[i] = owners.Fact{Key: a2aTask(id), Status: states[i]}
	}
	_, _ = e.Learn(context.Background(), facts...)
}

// steersOf is the steer count this replica holds for task id.
func steersOf(e *Enforcer, id string) int {
	_, _, n, _ := e.owners.Peek(mcpKey(id))
	return n
}
