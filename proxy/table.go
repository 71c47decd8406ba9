package proxy

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/agentwarden/warden/rules"
)

// errTableFull means the table holds only live sessions it may not forget.
var errTableFull = errors.New("session table full of live sessions")

// entry is one session's slot. lock serializes the session's messages; state
// and gone are guarded by it.
type entry struct {
	id    string
	lock  chan struct{}
	state *rules.Session // nil until the session is started or rebuilt
	// version is the shared store's version of state ("": none); fresh is
	// the decision that may use state without reading the store again (its
	// last attempt brought the store's state), checked the one that read it
	// before deciding. All guarded by lock.
	version, fresh, checked string
	gone                    bool // evicted: holders must look the session up again
	done                    bool // on the terminal list; guarded by table.mu
}

func (e *entry) acquire(ctx context.Context) error {
	select {
	case e.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *entry) tryAcquire() bool {
	select {
	case e.lock <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *entry) release() { <-e.lock }

// table is the bounded session table: live sessions in one LRU list and
// terminal or expired ones in another, evicted first.
type table struct {
	mu        sync.Mutex
	capacity  int
	live      *simplelru.LRU[string, *entry]
	done      *simplelru.LRU[string, *entry]
	evictLive bool // live sessions may be forgotten (they can be rebuilt)
}

func newTable(capacity int, evictLive bool) (*table, error) {
	live, err := simplelru.NewLRU[string, *entry](capacity, nil)
	if err != nil {
		return nil, err
	}
	done, err := simplelru.NewLRU[string, *entry](capacity, nil)
	if err != nil {
		return nil, err
	}
	return &table{capacity: capacity, live: live, done: done, evictLive: evictLive}, nil
}

// acquire returns the session's entry, locked. For a session the table does
// not hold, a new empty entry is made when create is set; otherwise acquire
// returns nil, so that messages for unknown sessions cost no slot.
func (t *table) acquire(ctx context.Context, id string, now int64, create bool) (*entry, error) {
	for {
		e, err := t.lookup(id, now, create)
		if err != nil || e == nil {
			return nil, err
		}
		if err := e.acquire(ctx); err != nil {
			return nil, err
		}
		if !e.gone {
			return e, nil
		}
		e.release()
	}
}

func (t *table) lookup(id string, now int64, create bool) (*entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.live.Get(id); ok {
		return e, nil
	}
	if e, ok := t.done.Get(id); ok {
		return e, nil
	}
	if !create {
		return nil, nil
	}
	if t.live.Len()+t.done.Len() >= t.capacity && !t.evictOne(now) {
		return nil, errTableFull
	}
	e := &entry{id: id, lock: make(chan struct{}, 1)}
	t.live.Add(id, e)
	return e, nil
}

// evictScan bounds how many live entries an eviction inspects for expiry.
const evictScan = 16

// evictOne frees one slot: the oldest terminal session, else an expired live
// one among the oldest, else (when allowed) the least recently used live one.
// Entries being decided right now are skipped. Called with t.mu held.
func (t *table) evictOne(now int64) bool {
	if t.evictFrom(t.done, func(*entry) bool { return true }) {
		return true
	}
	expired := func(e *entry) bool { return e.state == nil || e.state.Expired(now) }
	if t.evictFrom(t.live, expired) {
		return true
	}
	return t.evictLive && t.evictFrom(t.live, func(*entry) bool { return true })
}

func (t *table) evictFrom(l *simplelru.LRU[string, *entry], ok func(*entry) bool) bool {
	for i, k := range l.Keys() { // oldest first
		if i == evictScan {
			return false
		}
		e, _ := l.Peek(k)
		if !e.tryAcquire() {
			continue
		}
		if ok(e) {
			e.gone = true
			l.Remove(k)
			e.release()
			return true
		}
		e.release()
	}
	return false
}

// settle records the entry's new state; the caller holds the entry's lock.
func (t *table) settle(e *entry, s *rules.Session, now int64) {
	e.state = s
	if s == nil || !s.Expired(now) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !e.done && !e.gone {
		t.live.Remove(e.id)
		t.done.Add(e.id, e)
		e.done = true
	}
}

// drop forgets an entry that holds no state (a refused SessionStart, a
// failed rebuild); the caller holds the entry's lock.
func (t *table) drop(e *entry) {
	if e.state == nil {
		t.remove(e)
	}
}

// remove takes an entry out of the table; the caller holds its lock.
func (t *table) remove(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !e.gone {
		e.gone = true
		t.live.Remove(e.id)
		t.done.Remove(e.id)
	}
}

// forget removes a session whatever its state, once no decision holds it.
func (t *table) forget(ctx context.Context, id string) {
	t.mu.Lock()
	e, ok := t.live.Peek(id)
	if !ok {
		e, ok = t.done.Peek(id)
	}
	t.mu.Unlock()
	if !ok || e.acquire(ctx) != nil {
		return
	}
	defer e.release()
	t.remove(e)
}

// Len returns the number of sessions held.
func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live.Len() + t.done.Len()
}
