package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	mcprules "github.com/agentwarden/warden/rules/mcp"
)

// sharedTasks is a proxy.TaskStore in memory (owners and statuses; no steer
// bound), with a switch that makes every operation fail.
type sharedTasks struct {
	mu     sync.Mutex
	owner  map[string]string
	status map[string]string
	down   bool
}

var errStoreDown = errors.New("store down")

func (s *sharedTasks) fail() error {
	if s.down {
		return errStoreDown
	}
	return nil
}

func (s *sharedTasks) Claim(_ context.Context, id, owner string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(); err != nil {
		return "", "", err
	}
	if s.owner[id] == "" {
		s.owner[id] = owner
	}
	return s.status[id], s.owner[id], nil
}

func (s *sharedTasks) Create(_ context.Context, id, owner, status string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(); err != nil {
		return "", err
	}
	if s.owner[id] == "" {
		s.owner[id] = owner
	}
	if status != "" && s.owner[id] == owner {
		s.status[id] = status
	}
	return s.owner[id], nil
}

func (s *sharedTasks) Observe(_ context.Context, id, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(); err != nil {
		return err
	}
	if _, ok := s.owner[id]; ok {
		s.status[id] = status
	}
	return nil
}

func (s *sharedTasks) ObserveAll(ctx context.Context, ids, statuses []string) error {
	for i, id := range ids {
		if err := s.Observe(ctx, id, statuses[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *sharedTasks) Steer(context.Context, string, int, string) (bool, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return true, 0, s.fail()
}

func (s *sharedTasks) Unsteer(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail()
}

func (s *sharedTasks) Owners(_ context.Context, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(); err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = s.owner[id]
	}
	return out, nil
}

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
// attribute makes it answer that it could not decide.
func TestSharedTasksList(t *testing.T) {
	store := &sharedTasks{owner: map[string]string{}, status: map[string]string{}}
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

	store.mu.Lock()
	store.down = true
	store.mu.Unlock()
	c := r[0].upstreamID(t, alice, r[0].createTask(t, alice)) // recorded on r[0] only
	rep := list(r[1], alice)
	if m := rep.last(t); rep.errCode(t) != mcprules.ErrInternal || rep.errMessage(t) != unavailable || m["result"] != nil {
		t.Fatalf("list with the store down and a task unknown here: %s", rep.body)
	}
	// r[0] knows every owner on the page: its answer is exact.
	if got := ids(r[0], alice, list(r[0], alice).result(t)); len(got) != 2 || !slices.Contains(got, c) {
		t.Fatalf("alice's list through the replica that knows her tasks: %v", got)
	}
	// Task methods need the store: refused as undecidable.
	h := r[0].createTask(t, alice)
	rep = r[1].post(t, alice, rpc(8, "tasks/get", map[string]any{"taskId": h}), nil)
	if rep.status != http.StatusServiceUnavailable || rep.errCode(t) != mcprules.ErrInternal {
		t.Fatalf("tasks/get with the store down: HTTP %d %s", rep.status, rep.body)
	}
	if n := len(r[0].up.received("tasks/get")); n != 0 {
		t.Fatalf("the upstream saw %d tasks/get decided without the store", n)
	}
}
