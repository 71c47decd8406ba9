package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/macp"
)

// errTableFull means the table holds only live sessions it may not forget.
var errTableFull = errors.New("session table full of live sessions")

// entry is one session's slot. Its lock (acquire, release) serializes the
// session's decisions: it is held while a message is decided, and by a
// state-changing message until the upstream answers it. Record-only messages
// (macp.Outcome.RecordOnly) give the lock back once forwarded and fly: each
// lands with the upstream's answer and commits its id record onto the
// then-committed state. gone is guarded by the lock; held, unlocked, state,
// the flights and more by mu.
type entry struct {
	id    string
	state atomic.Pointer[macp.Session] // committed; nil until started or rebuilt, or when stale
	mu    sync.Mutex
	gone  bool // evicted: holders must look the session up again
	done  bool // on the terminal list; guarded by table.mu
	held  bool // the lock is taken
	// more is what an entry needs only while someone waits for it, while
	// messages fly, or with a shared store: nil otherwise, so that an idle
	// entry costs one pointer for all of it (an entry is 64 bytes).
	more *more

	// newer and older link the entry into its list of the table (live or
	// terminal); guarded by table.mu.
	newer, older *entry
}

// more is the part of an entry made on first use (see entry.extra).
type more struct {
	// unlocked is closed when the lock is given back; nil while nobody
	// waits.
	unlocked chan struct{}
	// ids are the message ids of the session's record-only messages in
	// flight; landed is closed when one lands (nil while nobody waits).
	ids    []string
	landed chan struct{}
	// shared is the entry's place in the shared store, made once (under
	// mu) and guarded by the lock; nil without a store.
	shared *shared
}

// extra returns the entry's more, made on first use; the caller holds mu.
func (e *entry) extra() *more {
	if e.more == nil {
		e.more = &more{}
	}
	return e.more
}

// tidy drops the entry's more once nothing in it is used; the caller holds
// mu.
func (e *entry) tidy() {
	if m := e.more; m != nil && m.unlocked == nil && len(m.ids) == 0 && m.landed == nil && m.shared == nil {
		e.more = nil
	}
}

// flying returns the message ids in flight; the caller holds mu.
func (e *entry) flying() []string {
	if e.more == nil {
		return nil
	}
	return e.more.ids
}

// shared is what an entry knows of the shared store's copy of its session:
// version is the store's version of state ("": none); fresh is the decision
// that may use state without reading the store again (its last attempt
// brought the store's state), checked the one that read it before deciding.
type shared struct {
	version, fresh, checked string
}

// store returns the entry's shared-store record, made on first use; the
// caller holds the lock.
func (e *entry) store() *shared {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.extra()
	if m.shared == nil {
		m.shared = &shared{}
	}
	return m.shared
}

// stored returns the entry's shared-store record, nil when it has none; the
// caller holds the lock.
func (e *entry) stored() *shared {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.more == nil {
		return nil
	}
	return e.more.shared
}

// acquire takes the entry's lock, waiting for it until ctx ends.
func (e *entry) acquire(ctx context.Context) error {
	for {
		e.mu.Lock()
		if !e.held {
			e.held = true
			e.mu.Unlock()
			return nil
		}
		m := e.extra()
		if m.unlocked == nil {
			m.unlocked = make(chan struct{})
		}
		ch := m.unlocked
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tryAcquire takes the entry's lock if it is free.
func (e *entry) tryAcquire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.held {
		return false
	}
	e.held = true
	return true
}

// release gives the entry's lock back and wakes whoever waits for it.
func (e *entry) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.held = false
	if m := e.more; m != nil && m.unlocked != nil {
		close(m.unlocked)
		m.unlocked = nil
		e.tidy()
	}
}

// update replaces the committed state with f of it; commits are serialized
// with the landing of flights.
func (e *entry) update(f func(*macp.Session) *macp.Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.state.Store(f(e.state.Load()))
}

// fly records a record-only message forwarded while the session's lock is
// held; the lock may then be given back.
func (e *entry) fly(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.extra()
	m.ids = append(m.ids, id)
}

// land ends the flight of message id; commit, when not nil (the upstream
// accepted it), computes the new committed state from the current one.
func (e *entry) land(id string, commit func(*macp.Session) *macp.Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.more
	if m == nil || len(m.ids) == 0 {
		return
	}
	if i := slices.Index(m.ids, id); i >= 0 {
		m.ids = slices.Delete(m.ids, i, i+1)
	}
	if commit != nil {
		e.state.Store(commit(e.state.Load()))
	}
	if m.landed != nil {
		close(m.landed)
		m.landed = nil
	}
	if len(m.ids) == 0 {
		m.ids = nil
		e.tidy()
	}
}

// idle reports whether no flight is under way.
func (e *entry) idle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.flying()) == 0
}

// wait blocks until fewer than depth flights are under way and none carries
// message id ("" for none): the caller holds the lock, so no flight starts
// meanwhile. depth 1 waits until every flight has landed.
func (e *entry) wait(ctx context.Context, id string, depth int) error {
	for {
		e.mu.Lock()
		ids := e.flying()
		if len(ids) == 0 || len(ids) < depth && (id == "" || !slices.Contains(ids, id)) {
			e.mu.Unlock()
			return nil
		}
		m := e.more
		if m.landed == nil {
			m.landed = make(chan struct{})
		}
		ch := m.landed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// table is the bounded session table: live sessions in one LRU list and
// terminal or expired ones in another, evicted first. The lists run through
// the entries themselves, so that a tracked session costs its entry and one
// map slot.
type table struct {
	mu        sync.Mutex
	capacity  int
	entries   map[string]*entry
	live      useList
	done      useList
	evictLive bool // live sessions may be forgotten (they can be rebuilt, or loaded from the shared store)
	// bindings are the non-default governance policies sessions were
	// committed with, as many as the table holds sessions, kept past their
	// entries for the rebuild (binding); each initiator's to its share, so
	// that an agent starting sessions without end evicts its own bindings,
	// never another's (a session whose binding is gone is decided on a
	// policy Warden cannot know: bound_policy_unknown).
	bindings *owners.Cache[string, *macp.Governance]
	// names are the participant lists new sessions share.
	names names
}

// useList is a list of entries, most recently used first.
type useList struct {
	newest, oldest *entry
	n              int
}

// push adds e as the most recently used.
func (l *useList) push(e *entry) {
	e.newer, e.older = nil, l.newest
	if l.newest != nil {
		l.newest.newer = e
	} else {
		l.oldest = e
	}
	l.newest = e
	l.n++
}

// remove takes e out of the list.
func (l *useList) remove(e *entry) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		l.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		l.oldest = e.newer
	}
	e.newer, e.older = nil, nil
	l.n--
}

// touch marks e as the most recently used.
func (l *useList) touch(e *entry) {
	if l.newest != e {
		l.remove(e)
		l.push(e)
	}
}

func newTable(capacity, share int, evictLive bool, w *owners.Watch) (*table, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("session table of %d entries: must be positive", capacity)
	}
	bindings := owners.NewCache[string, *macp.Governance](capacity, share, w, owners.TableBindings)
	return &table{capacity: capacity, entries: make(map[string]*entry), evictLive: evictLive, bindings: bindings}, nil
}

// list returns the list e is on; the caller holds t.mu.
func (t *table) list(e *entry) *useList {
	if e.done {
		return &t.done
	}
	return &t.live
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
	if e, ok := t.entries[id]; ok {
		t.list(e).touch(e)
		return e, nil
	}
	if !create {
		return nil, nil
	}
	if len(t.entries) >= t.capacity && !t.evictOne(now) {
		return nil, errTableFull
	}
	e := &entry{id: id}
	t.entries[id] = e
	t.live.push(e)
	return e, nil
}

// evictScan bounds how many live entries an eviction inspects for expiry.
const evictScan = 16

// evictOne frees one slot: the oldest terminal session, else an expired live
// one among the oldest, else (when allowed) the least recently used live one.
// Entries being decided right now, or with messages in flight, are skipped.
// Called with t.mu held.
func (t *table) evictOne(now int64) bool {
	if t.evictFrom(&t.done, func(*entry) bool { return true }) {
		return true
	}
	expired := func(e *entry) bool { s := e.state.Load(); return s == nil || s.Expired(now) }
	if t.evictFrom(&t.live, expired) {
		return true
	}
	return t.evictLive && t.evictFrom(&t.live, func(*entry) bool { return true })
}

func (t *table) evictFrom(l *useList, ok func(*entry) bool) bool {
	e := l.oldest
	for i := 0; e != nil && i < evictScan; i++ {
		newer := e.newer
		if e.tryAcquire() {
			if ok(e) && e.idle() {
				e.gone = true
				t.unlink(e)
				e.release()
				return true
			}
			e.release()
		}
		e = newer
	}
	return false
}

// unlink takes e out of the table; the caller holds t.mu.
func (t *table) unlink(e *entry) {
	t.list(e).remove(e)
	delete(t.entries, e.id)
}

// settle records the entry's new state; the caller holds the entry's lock.
// A state committed with another governance than the entry held (a start,
// a shared session loaded) records its binding.
func (t *table) settle(e *entry, s *macp.Session, now int64) {
	if s != nil && s.Policy != nil && s.Policy.Known() && s.Policy.ID != macp.DefaultPolicyID {
		if prev := e.state.Load(); prev == nil || prev.Policy != s.Policy {
			t.bindings.Add(s.Initiator, e.id, s.Policy)
		}
	}
	e.update(func(*macp.Session) *macp.Session { return s })
	t.file(e, s, now)
}

// binding returns the governance session id was committed with, nil when
// none is recorded (policy.default needs none), read for reader's message:
// it becomes the initiator's most recently used only when reader is the
// initiator, so that another agent naming the session cannot keep its
// binding from being the initiator's next to go. It outlives the entry: an
// evicted or forgotten session is rebuilt from the runtime, which shows
// which policy the session bound but not its definition.
func (t *table) binding(id, reader string) *macp.Governance {
	g, _ := t.bindings.GetBy(id, reader)
	return g
}

// expire commits what time alone did to the entry's state (flights may land
// meanwhile) and returns the state; the caller holds the entry's lock.
func (t *table) expire(e *entry, now int64) *macp.Session {
	var s *macp.Session
	e.update(func(cur *macp.Session) *macp.Session {
		if cur != nil {
			s = cur.Expire(now)
		}
		return s
	})
	t.file(e, s, now)
	return s
}

// file moves an entry whose state s has expired to the terminal list.
func (t *table) file(e *entry, s *macp.Session, now int64) {
	if s == nil || !s.Expired(now) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !e.done && !e.gone {
		t.live.remove(e)
		t.done.push(e)
		e.done = true
	}
}

// drop forgets an entry that holds no state (a refused SessionStart, a
// failed rebuild) and no flight (a stale entry is rebuilt once they landed);
// the caller holds the entry's lock.
func (t *table) drop(e *entry) {
	if e.state.Load() == nil && e.idle() {
		t.remove(e)
	}
}

// remove takes an entry out of the table; the caller holds its lock.
func (t *table) remove(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !e.gone {
		e.gone = true
		t.unlink(e)
	}
}

// forget removes a session whatever its state, once no decision holds it.
// While flights of the session are under way it marks the state stale
// instead of waiting for them: they may land only through the caller (a
// stream's receive loop), and the next decision waits for them before it
// rebuilds the session, so the rebuild still sees them.
func (t *table) forget(ctx context.Context, id string) {
	t.mu.Lock()
	e, ok := t.entries[id]
	t.mu.Unlock()
	if !ok || e.acquire(ctx) != nil {
		return
	}
	defer e.release()
	if !e.idle() {
		e.update(func(*macp.Session) *macp.Session { return nil })
		return
	}
	t.remove(e)
}

// ended reports whether the table holds session id (held) and, if so,
// whether its committed state has ended: terminal, or expired by time at now.
// A session being started or rebuilt (no state yet) has not ended.
func (t *table) ended(id string, now int64) (ended, held bool) {
	t.mu.Lock()
	e, ok := t.entries[id]
	t.mu.Unlock()
	if !ok {
		return false, false
	}
	s := e.state.Load()
	return s != nil && s.Expired(now), true
}

// Len returns the number of sessions held.
func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
