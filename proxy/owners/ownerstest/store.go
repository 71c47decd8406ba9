// Package ownerstest is an owners.Store in memory for tests.
package ownerstest

import (
	"context"
	"errors"
	"sync"
)

// Store is an owners.Store in memory, as Redis keeps it (proxy/state),
// with a switch that makes every operation fail and a count of operations.
type Store struct {
	mu    sync.Mutex
	tasks map[string]*task
	down  bool
	ops   int
}

type task struct {
	owner, status, mark string
	steers              int
}

// ErrDown is what every operation returns while the store is down.
var ErrDown = errors.New("store down")

// New returns an empty store.
func New() *Store { return &Store{tasks: map[string]*task{}} }

func (m *Store) op() error {
	m.ops++
	if m.down {
		return ErrDown
	}
	return nil
}

// Set takes the store down (every operation fails) or up again.
func (m *Store) Set(down bool) { m.mu.Lock(); m.down = down; m.mu.Unlock() }

// Ops is the number of operations asked of the store.
func (m *Store) Ops() int { m.mu.Lock(); defer m.mu.Unlock(); return m.ops }

// Has reports whether the store holds an entry under id.
func (m *Store) Has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.tasks[id]
	return ok
}

// Restart empties the store, as a Redis restarted without persistence.
func (m *Store) Restart() { m.mu.Lock(); m.tasks = map[string]*task{}; m.mu.Unlock() }

func (m *Store) task(id string) *task {
	t := m.tasks[id]
	if t == nil {
		t = &task{}
		m.tasks[id] = t
	}
	return t
}

func (t *task) setStatus(s string) {
	if s != "" && s != t.status {
		t.status, t.steers = s, 0
	}
}

func (m *Store) Claim(_ context.Context, id, owner string, _ int) (string, string, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return "", "", 0, err
	}
	t := m.task(id)
	if t.owner == "" {
		t.owner = owner
	}
	return t.status, t.owner, 0, nil
}

func (m *Store) Create(_ context.Context, id, owner, status string, _ int) (string, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.op(); err != nil {
		return "", 0, err
	}
	t := m.task(id)
	if t.owner == "" {
		t.owner = owner
	}
	if t.owner == owner {
		t.setStatus(status)
	}
	return t.owner, 0, nil
}

func (m *Store) Observe(_ context.Context, id, status string) error {
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

func (m *Store) ObserveAll(_ context.Context, ids, statuses []string) error {
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

func (m *Store) Steer(_ context.Context, id string, max int, mark string) (bool, int, error) {
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

func (m *Store) Unsteer(_ context.Context, id string) error {
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

func (m *Store) Owners(_ context.Context, _ string, ids []string) ([]string, error) {
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
