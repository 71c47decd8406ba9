package mcp

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners/ownerstest"
	"github.com/agentwarden/warden/rules/mcp"
)

// sharedHarnesses returns n replicas of the sidecar, with the same handle
// key and store, in front of one fake upstream.
func sharedHarnesses(t *testing.T, n int, store proxy.TaskStore) []*harness {
	t.Helper()
	pe, err := sharedPolicies()
	if err != nil {
		t.Fatal(err)
	}
	up := newFakeUpstream()
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	var hs []*harness
	for range n {
		a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: pe, Tasks: store})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: upSrv.URL + "/mcp", Plaintext: true}}, e, testKey, upSrv.Client(), nil)
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(srv)
		t.Cleanup(front.Close)
		hs = append(hs, &harness{up: up, upSrv: upSrv, e: e, srv: srv, front: front})
	}
	return hs
}

// TestSharedTasksList: a task created through one replica is listed through
// another, only to its owner; with the store down, what a replica cannot
// record or attribute makes it answer that it could not decide.
func TestSharedTasksList(t *testing.T) {
	store := ownerstest.New()
	r := sharedHarnesses(t, 2, store)
	a := r[0].upstreamID(t, alice, r[0].createTask(t, alice))
	b := r[0].upstreamID(t, bob, r[0].createTask(t, bob))

	list := func(h *harness, principal string) reply {
		return h.post(t, principal, rpc(7, "tasks/list", map[string]any{}), nil)
	}
	ids := func(h *harness, principal string, res map[string]any) []string {
		var out []string
		for _, handle := range taskIDs(t, res) {
			out = append(out, h.upstreamID(t, principal, handle))
		}
		return out
	}
	if got := ids(r[1], alice, list(r[1], alice).result(t)); !slices.Equal(got, []string{a}) {
		t.Fatalf("alice's list through the other replica: %v, want [%s]", got, a)
	}
	if got := ids(r[1], bob, list(r[1], bob).result(t)); !slices.Equal(got, []string{b}) {
		t.Fatalf("bob's list through the other replica: %v, want [%s]", got, b)
	}

	store.Set(true)
	// A task created with the store down cannot be recorded: the answer
	// naming it is Warden's could-not-decide error, and the task is
	// nobody's (the old code recorded it on r[0] only and logged).
	rep := r[0].post(t, alice, rpc(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}}), nil)
	if rep.errCode(t) != mcp.ErrInternal || rep.errMessage(t) != unavailable {
		t.Fatalf("a task created with the store down: %s", rep.body)
	}
	for _, h := range r {
		rep = list(h, alice)
		if m := rep.last(t); rep.errCode(t) != mcp.ErrInternal || rep.errMessage(t) != unavailable || m["result"] != nil {
			t.Fatalf("list with the store down and a task unknown here: %s", rep.body)
		}
	}
	store.Set(false)
	h := r[0].createTask(t, alice)
	store.Set(true)
	// Task methods need the store: refused as undecidable.
	rep = r[1].post(t, alice, rpc(8, "tasks/get", map[string]any{"taskId": h}), nil)
	if rep.status != http.StatusServiceUnavailable || rep.errCode(t) != mcp.ErrInternal {
		t.Fatalf("tasks/get with the store down: HTTP %d %s", rep.status, rep.body)
	}
	if n := len(r[0].up.received("tasks/get")); n != 0 {
		t.Fatalf("the upstream saw %d tasks/get decided without the store", n)
	}
}
