package tenancy

import (
	"context"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/owners/ownerstest"
	"github.com/agentwarden/warden/proxy/proxytest"
)

var errDown = ownerstest.ErrDown

func engine(t testing.TB) *policies.Engine      { return proxytest.Engine(t) }
func devAuth(t testing.TB) *authn.Authenticator { return proxytest.DevAuth(t) }

// newDecider is the A2A decider on an Enforcer of its own.
func newDecider(t testing.TB) *Decider { return replicas(t, 1, nil)[0] }

// replicas are n deciders on Enforcers sharing the owner store store (nil:
// none).
func replicas(t testing.TB, n int, store proxy.TaskStore) []*Decider {
	t.Helper()
	var ds []*Decider
	for range n {
		opts := proxy.Options{Authenticator: devAuth(t), Policies: engine(t)}
		if store != nil {
			opts.Tasks = store
		}
		e, err := proxy.New(proxy.Config{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, New(e))
	}
	return ds
}

// The owner table as the A2A sidecar reaches it (a decision's Learn,
// Observe, Owners), in the shapes the tests read best; what an answer
// created is learned for owner as a decision of owner's request would.

func a2aTask(id string) owners.Key { return owners.Key{Kind: owners.A2ATask, ID: id} }

// seen records a task and its context as an answer does.
func seen(t testing.TB, x *Decider, taskID, contextID, owner, state string) (to, co string) {
	t.Helper()
	var err error
	if taskID != "" {
		if to, err = a2aTaskSeen(x, context.Background(), taskID, owner, state); err != nil {
			t.Fatal(err)
		}
	}
	if contextID != "" {
		if co, err = a2aContextSeen(x, context.Background(), contextID, owner); err != nil {
			t.Fatal(err)
		}
	}
	return to, co
}

func a2aOwners(x *Decider, ctx context.Context, ids []string) ([]string, error) {
	keys := make([]owners.Key, len(ids))
	for i, id := range ids {
		keys[i] = a2aTask(id)
	}
	return x.e.Owners(ctx, "", keys...)
}

func a2aContextOwner(x *Decider, ctx context.Context, id string) (string, error) {
	o, err := x.e.Owners(ctx, "", owners.Key{Kind: owners.A2AContext, ID: id})
	if err != nil {
		return "", err
	}
	return o[0], nil
}

func learnOne(x *Decider, ctx context.Context, owner string, f owners.Fact) (string, error) {
	f.Status = Canon(f.Key.Kind, f.Status)
	o, err := x.owners.Learn(ctx, owner, f)
	if err != nil {
		return "", err
	}
	return o[0], nil
}

func a2aTaskSeen(x *Decider, ctx context.Context, id, owner, state string) (string, error) {
	return learnOne(x, ctx, owner, owners.Fact{Key: a2aTask(id), Created: true, Status: state})
}

func a2aContextSeen(x *Decider, ctx context.Context, id, owner string) (string, error) {
	return learnOne(x, ctx, owner, owners.Fact{Key: owners.Key{Kind: owners.A2AContext, ID: id}, Created: true})
}

func a2aObserved(x *Decider, id, state string) {
	_, _ = x.Observe(context.Background(), owners.Fact{Key: a2aTask(id), Status: state})
}

func a2aObservedAll(x *Decider, ids, states []string) {
	facts := make([]owners.Fact, len(ids))
	for i, id := range ids {
		facts[i] = owners.Fact{Key: a2aTask(id), Status: states[i]}
	}
	_, _ = x.Observe(context.Background(), facts...)
}
