package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

// memStore is a TaskStore in memory, as Redis keeps it (proxy/state), with a
// switch that makes every operation fail.
type memStore struct {
	mu    sync.Mutex
	tasks map[string]*memTask
	down  bool
	ops   int
}

type memTask struct {
	owner, status, mark string
	steers              int
}

var errDown = errors.New("store down")

func newMemStore() *memStore { return &memStore{tasks: map[string]*memTask{}} }

func (m *memStore) op() error {
	m.ops++
	if m.down {
		return errDown
	}
	return nil
}

func (m *memStore) set(down bool) { m.mu.Lock(); m.down = down; m.mu.Unlock() }

// restart empties the store, as a Redis restarted without persistence.
func (m *memStore) restart() { m.mu.Lock(); m.tasks = map[string]*memTask{}; m.mu.Unlock() }

func (m *memStore) task(id string) *memTask {
	t := m.tasks[id]
	if t == nil {
		t = &memTask{}
		m.tasks[id] = t
	}
	return t
}

func (t *memTask) setStatus(s string) {
	if s != "" && s != t.status {
		t.status, t.steers = s, 0
	}
}

func (m *memStore) Claim(_ context.Context, id, owner string) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return "", "", err
	}
	t := m.task(id)
	if t.owner == "" {
		t.owner = owner
	}
	return t.status, t.owner, nil
}

func (m *memStore) Create(_ context.Context, id, owner, status string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return "", err
	}
	t := m.task(id)
	if t.owner == "" {
		t.owner = owner
	}
	if t.owner == owner {
		t.setStatus(status)
	}
	return t.owner, nil
}

func (m *memStore) Observe(_ context.Context, id, status string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return err
	}
	if t := m.tasks[id]; t != nil {
		t.setStatus(status)
	}
	return nil
}

func (m *memStore) ObserveAll(_ context.Context, ids, statuses []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return err
	}
	for i, id := range ids {
		if t := m.tasks[id]; t != nil {
			t.setStatus(statuses[i])
		}
	}
	return nil
}

func (m *memStore) Steer(_ context.Context, id string, max int, mark string) (bool, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return false, 0, err
	}
	t := m.task(id)
	if mark != "" && mark != t.mark {
		t.mark, t.steers = mark, 0
	}
	n := t.steers
	if max <= 0 || n < max {
		t.steers++
		return true, n, nil
	}
	return false, n, nil
}

func (m *memStore) Unsteer(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return err
	}
	if t := m.tasks[id]; t != nil && t.steers > 0 {
		t.steers--
	}
	return nil
}

func (m *memStore) Owners(_ context.Context, ids []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		if t := m.tasks[id]; t != nil {
			out[i] = t.owner
		}
	}
	return out, nil
}

// replicas returns n Enforcers sharing store.
func replicas(t *testing.T, n int, store TaskStore) []*Enforcer {
	t.Helper()
	var es []*Enforcer
	for range n {
		e, err := New(Config{}, Options{Authenticator: devAuth(t), Policies: engine(t), Tasks: store})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

func TestSharedTaskOwners(t *testing.T) {
	store := newMemStore()
	r := replicas(t, 3, store)
	r[0].TaskCreated("t1", alice, mcp.StatusWorking)
	r[1].TaskCreated("t2", bob, "")
	for i, e := range r {
		t.Run(fmt.Sprint("replica ", i), func(t *testing.T) {
			if o, ok := e.TaskOwner("t1"); !ok || o != alice {
				t.Errorf("owner of t1: %q %v", o, ok)
			}
			got, err := e.TaskOwners(context.Background(), []string{"t2", "t-unknown", "t1", ""})
			if err != nil || fmt.Sprint(got) != "[bob  alice ]" {
				t.Errorf("owners: %q %v", got, err)
			}
		})
	}

	// Owners never change, so what a replica learned it answers alone; what
	// it does not know needs the store.
	store.set(true)
	defer store.set(false)
	if o, ok := r[2].TaskOwner("t1"); !ok || o != alice {
		t.Errorf("cached owner with the store down: %q %v", o, ok)
	}
	if _, err := r[2].TaskOwners(context.Background(), []string{"t1", "t3"}); !errors.Is(err, errDown) {
		t.Errorf("owners of an unknown task with the store down: %v, want the store's error", err)
	}
	if o, ok := r[2].TaskOwner("t3"); ok {
		t.Errorf("owner of an unknown task with the store down: %q, want unknown", o)
	}
}

// TestSharedSteerBound: the bound holds over the replicas together, and an
// upstream refusal gives the place back wherever the next steer goes.
func TestSharedSteerBound(t *testing.T) {
	store := newMemStore()
	r := replicas(t, 3, store)
	r[0].TaskCreated("s", alice, mcp.StatusWorking)
	var ds []Decision
	for i := range 4 {
		d := enforceTask(t, r[i%3], steerReq(alice, "s", 3))
		ds = append(ds, d)
		if want := i < 3; d.Allow != want {
			t.Fatalf("steer %d through replica %d: allow %v, want %v (%+v)", i, i%3, d.Allow, want, d)
		}
	}
	if d := ds[3]; d.Code != rules.CodeInvalidParams || d.Reason != rules.ReasonSteerQueueFull {
		t.Fatalf("steer over the bound: %+v", d)
	}
	ds[3].Settle(false)
	ds[1].Settle(false) // the upstream refused it
	if d := enforceTask(t, r[2], steerReq(alice, "s", 3)); !d.Allow {
		t.Fatalf("steer after a give-back: %+v", d)
	}
	if d := enforceTask(t, r[0], steerReq(alice, "s", 3)); d.Allow {
		t.Fatalf("steer over the bound again: %+v", d)
	}
	// A safe point seen by one replica frees the queue for all.
	r[1].TaskObserved("s", mcp.StatusInputRequired)
	if d := enforceTask(t, r[0], steerReq(alice, "s", 3)); !d.Allow {
		t.Fatalf("steer after the status changed: %+v", d)
	}
}

// TestSharedStatus: a terminal status one replica learned decides on
// another without asking the upstream (a terminal status is final).
func TestSharedStatus(t *testing.T) {
	store := newMemStore()
	r := replicas(t, 2, store)
	r[0].TaskCreated("p", alice, mcp.StatusWorking)
	enforceTask(t, r[1], taskReq(mcp.MethodGet, alice, "p", true)).Settle(true) // r[1] knows it as working
	r[0].TaskObserved("p", mcp.StatusCompleted)
	s := &fakeStatus{status: mcp.StatusWorking}
	req := taskReq(mcp.MethodPause, alice, "p", true)
	req.Status = s.read
	if d := enforceTask(t, r[1], req); d.Allow || d.Reason != rules.ReasonTaskState {
		t.Fatalf("pause of a task another replica saw completed: %+v", d)
	}
	if s.n() != 0 {
		t.Error("a terminal status the store knows was read from the upstream")
	}
}

// TestSharedStoreFaults: a store that cannot be reached fails every task
// decision closed; one restarted empty rebuilds from what the handle proves
// and from the upstream's status.
func TestSharedStoreFaults(t *testing.T) {
	store := newMemStore()
	r := replicas(t, 2, store)
	r[0].TaskCreated("f", alice, mcp.StatusWorking)
	store.set(true)
	for _, m := range taskMethods {
		t.Run("down/"+m, func(t *testing.T) {
			req := taskReq(m, alice, "f", true)
			if m == mcp.MethodSteer {
				req = steerReq(alice, "f", 2)
			}
			d, err := r[1].EnforceTask(context.Background(), req)
			if !errors.Is(err, errDown) {
				t.Fatalf("EnforceTask with the store down: %+v %v, want the store's error", d, err)
			}
		})
	}
	// Not the caller's: refused as today, without the store.
	if d := enforceTask(t, r[1], taskReq(mcp.MethodGet, bob, "f", false)); d.Allow || d.Code != rules.CodeTaskNotFound {
		t.Fatalf("bob with the store down: %+v", d)
	}

	store.set(false)
	store.restart()
	s := &fakeStatus{status: mcp.StatusPaused}
	req := taskReq(mcp.MethodResume, alice, "f", true)
	req.Status = s.read
	d := enforceTask(t, r[1], req)
	d.Settle(true)
	if !d.Allow || s.n() != 1 {
		t.Fatalf("resume after the store lost the task: %+v (status read %d times)", d, s.n())
	}
	if o, err := store.Owners(context.Background(), []string{"f"}); err != nil || o[0] != alice {
		t.Fatalf("the handle's owner was not written back: %q %v", o, err)
	}
	if got, _, _ := store.Claim(context.Background(), "f", alice); got != mcp.StatusPaused {
		t.Fatalf("the status read from the upstream was not written back: %q", got)
	}
}

// TestSharedStatusWrittenOnce: the status a decision just read from the
// store is not written back when the upstream's answer repeats it; a new
// one is.
func TestSharedStatusWrittenOnce(t *testing.T) {
	store := newMemStore()
	e := replicas(t, 1, store)[0]
	e.TaskCreated("w", alice, mcp.StatusWorking)
	ops := func() int { store.mu.Lock(); defer store.mu.Unlock(); return store.ops }
	for _, tc := range []struct {
		name, observed string
		writes         int
	}{
		{"same status", mcp.StatusWorking, 0},
		{"new status", mcp.StatusInputRequired, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enforceTask(t, e, taskReq(mcp.MethodGet, alice, "w", true)).Settle(true)
			before := ops()
			e.TaskObserved("w", tc.observed)
			if got := ops() - before; got != tc.writes {
				t.Fatalf("%d store operations, want %d", got, tc.writes)
			}
			if s, _, _ := store.Claim(context.Background(), "w", alice); s != tc.observed {
				t.Fatalf("store status %q, want %q", s, tc.observed)
			}
		})
	}
}
