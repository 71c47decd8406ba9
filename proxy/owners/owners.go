// Package owners is Warden's one table of who owns an MCP task, an A2A task,
// an A2A context or (under ext_authz) an MCP session, with the status Warden last knew and the steer queue of
// an MCP task: a bounded table in memory in front of the store replicas
// share (proxy/state keeps it in Redis). Every method takes the request's
// context and returns an error when the store cannot be read or written:
// the caller then cannot tell whose an id is and fails closed.
//
// The rule it keeps, in Learn: an owner is known from an answer to that
// owner's own request (a Created fact, learned for the requester the
// decision names), from a handle the owner proved or an id first presented
// (Claim), or from the shared store; otherwise an id is nobody's. An owner
// never changes.
//
// Every other bounded table of what principals hold (the MCP sidecar's
// client-side tasks and learned tools, MACP's policy bindings) is a Cache:
// the same rule of shares, so that no principal's flood evicts another's
// entries.
package owners

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Store is the table Warden replicas share: entries under Key.Name. An
// error means the store could not be reached.
type Store interface {
	// Claim records that owner owns id (a verified handle proves it)
	// unless another does already, and returns its status ("" when
	// unknown) and its owner afterwards. The entry is owner's most
	// recently used; one holding more than share (> 0) loses its least
	// recently used, never another owner's: dropped is how many.
	Claim(ctx context.Context, id, owner string, share int) (status, claimed string, dropped int, err error)
	// Create records an entry the upstream created for owner unless
	// another owns it already (set if absent, atomically across replicas),
	// and returns its owner afterwards; share bounds owner's entries as
	// in Claim (dropped: how many it lost).
	Create(ctx context.Context, id, owner, status string, share int) (created string, dropped int, err error)
	// Observe records a status the upstream reported for a known entry; a
	// change restarts its steer count.
	Observe(ctx context.Context, id, status string) error
	// ObserveAll is Observe for several entries (statuses[i] of ids[i]) at
	// once.
	ObserveAll(ctx context.Context, ids, statuses []string) error
	// Steer reserves a place in the task's steer queue unless max (> 0) are
	// taken, atomically across replicas; queued is the count before. A mark
	// (the task's lastUpdatedAt now) other than the one the count began at
	// restarts the count: the server passed a step and took the queue.
	Steer(ctx context.Context, id string, max int, mark string) (reserved bool, queued int, err error)
	// Unsteer gives a reserved place back.
	Unsteer(ctx context.Context, id string) error
	// Owners returns each entry's owner, "" when unknown, read for by
	// (the principal whose request reads them, "" none): each known one
	// by owns becomes by's most recently used; another's does not move
	// (a principal knowing another's id cannot keep it fresh).
	Owners(ctx context.Context, by string, ids []string) ([]string, error)
}

// Kind is what an id names.
type Kind uint8

const (
	MCPTask Kind = iota
	A2ATask
	A2AContext
	// MCPSession is an MCP session id (Mcp-Session-Id) ext_authz binds to
	// the first principal that presents it: it has an owner only.
	MCPSession
)

// Key names one entry: an upstream id of one kind.
type Key struct {
	Kind Kind
	ID   string
}

// Name is the entry's name in the table and the shared store: MCP tasks
// under their upstream ids, A2A tasks and contexts and MCP sessions under
// prefixes of their own.
func (k Key) Name() string { return k.Kind.prefix() + k.ID }

// prefix is the kind's names' prefix ("" for MCP tasks).
func (k Kind) prefix() string {
	switch k {
	case A2ATask:
		return "a2a:t:"
	case A2AContext:
		return "a2a:c:"
	case MCPSession:
		return "mcp:s:"
	}
	return ""
}

// slot is the key the table holds k's entry under: two keys share one
// exactly when they share a Name, which is not built for it (an MCP id that
// reads as another kind's name is that key).
func (k Key) slot() Key {
	if k.Kind.prefix() != "" {
		return k
	}
	for _, kind := range []Kind{A2ATask, A2AContext, MCPSession} {
		if id, ok := strings.CutPrefix(k.ID, kind.prefix()); ok {
			return Key{Kind: kind, ID: id}
		}
	}
	return Key{Kind: MCPTask, ID: k.ID}
}

// Fact is what an answer says about one id.
type Fact struct {
	Key Key
	// Created is set when the answer says its request made the entry (or
	// named it as made by that request): it is recorded as the
	// requester's unless another owns it, or this replica knew it and
	// forgot whose it was (then it stays nobody's until its owner's handle
	// proves it again).
	Created bool
	// Recall is set with Created for an id that was the requester's
	// before this answer (the context of a task the requester owned): a
	// forgotten entry is the requester's again.
	Recall bool
	// Status is the status the answer reports, "" none; it is recorded
	// for a known entry only.
	Status string
}

// entry is what Warden keeps of one id: a few dozen bytes.
type entry struct {
	mu     sync.Mutex
	owner  string
	status string
	steers int // accepted since the status or the mark last changed
	// mark is the task's lastUpdatedAt when the steer count began.
	mark string
	// synced is when status was last read from or written to the shared
	// store: an observation of the same status soon after is not written
	// again (a tasks/get pays one round trip to the store, not two).
	synced time.Time
	// used is when the shared store last marked the entry its owner's
	// most recently used (created, proven, looked up): a lookup this
	// replica answers marks it there again only usedFor later.
	used time.Time
}

// usedFor is how long a lookup this replica answers from its table does
// not mark the entry used in the shared store: within it, the store's
// order of an owner's entries may lag the table's by that much, and
// after it a lookup costs one round trip more (once per entry per
// usedFor).
const usedFor = time.Second

// syncedFor is how long a status read from the shared store is taken as
// the store's without asking again.
const syncedFor = time.Second

// setStatus changes the status; a change means the task passed a safe
// point, so the steer messages queued before it count as delivered.
func (t *entry) setStatus(s string) {
	if s == "" || s == t.status {
		return
	}
	t.status = s
	t.steers = 0
}

// sync notes that the shared store holds status for the entry.
func (t *entry) sync(status string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == status {
		t.synced = time.Now()
	}
}

// Table is the owner table: bounded in memory, each principal to a share
// of it (a Cache: an entry is charged to its owner once it has one), in
// front of the shared store when there is one; evicted remembers the names
// the cache dropped.
type Table struct {
	cache   *Cache[Key, *entry] // under Key.slot
	evicted *forgotten
	store   Store
	// stored bounds each principal's entries in the store: its share, or
	// the table's size when there is none (no principal holds more of the
	// store than one replica's table can).
	stored int
	watch  *Watch // told of the entries a share drops
}

// New returns a table of size entries in front of store (nil: this
// replica's table only), of which one principal holds at most share (0 or
// size and above: no share of its own; the table's LRU alone bounds it);
// w (nil: none) is told of the entries a share drops, here and in store.
func New(size, share int, store Store, w *Watch) (*Table, error) {
	if size <= 0 {
		return nil, errors.New("the owner table needs a positive size")
	}
	if share >= size {
		share = 0
	}
	t := &Table{store: store, stored: cmp.Or(share, size), watch: w, evicted: newForgotten(size)}
	t.cache = NewCache[Key, *entry](size, share, w, TableOwners)
	t.cache.evicted = func(k Key, _ *entry) { t.evicted.add(k) }
	return t, nil
}

// Shared reports whether the table is kept in a store other replicas
// share: what this replica saw of the traffic is not all of it.
func (t *Table) Shared() bool { return t.store != nil }

// get returns the entry under name (nil: none) for by (the principal whose
// request uses it, "" none); it becomes its owner's most recently used only
// when by is its owner (used: created, proven or looked up by its owner,
// the one rule the shared store keeps too).
func (t *Table) get(k Key, by string) *entry {
	e, _ := t.cache.get(k.slot(), by, false)
	return e
}

// add is get, creating the entry when there is none, charged to owner (the
// principal it will be, so that one at its share makes room from its own
// entries, not the table's; "": nobody's until own charges it), in one
// look-up. charged reports that the entry is owner's most recently used
// already: own(k, owner) would change nothing.
func (t *Table) add(k Key, by, owner string) (e *entry, charged bool) {
	return t.cache.peekOrAdd(k.slot(), newEntry, by, owner)
}

func newEntry() *entry { return &entry{} }

// own counts the entry under k as owner's, its most recently used, owner
// losing its own least recently used entry when it holds more than its
// share (never another principal's). The caller holds no entry's lock.
func (t *Table) own(k Key, owner string) {
	if owner != "" {
		t.cache.charge(k.slot(), owner)
	}
}

// forgot reports whether Warden knew the entry under name and forgot it:
// with no shared store, this replica's table evicted it (among the last
// evictions it remembers) and nobody has proven it theirs since. Whose it
// was is unknown, so it is nobody's to learn from an answer.
func (t *Table) forgot(k Key) bool {
	if t.store != nil || !t.evicted.has(k.slot()) {
		return false
	}
	e := t.get(k, "")
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.owner == ""
}

// Learn records what an answer to requester's request says (facts) and
// returns the owner of each fact's id afterwards, "" when it is nobody's.
// It is the one place where Warden learns who owns what from answers: an
// entry becomes requester's only through a Created fact of an answer to
// requester's own request, and only when nobody owned it; a message no
// request of a principal opened (requester "") creates nothing; statuses
// are recorded for known entries only. The shared store is written for a new or changed entry (statuses in
// one round trip) and read for an id this replica does not know. An error
// means the store could not be written or read: whose the ids are cannot
// be told, and nothing of the answer may pass.
func (t *Table) Learn(ctx context.Context, requester string, facts ...Fact) ([]string, error) {
	var few [4]Fact // the statuses of an answer's few ids, on the stack
	observed := few[:0]
	for _, f := range facts {
		if f.Created && requester != "" {
			if err := t.create(ctx, f, requester); err != nil {
				return nil, err
			}
		} else if f.Status != "" {
			observed = append(observed, f)
		}
	}
	if err := t.observe(ctx, observed); err != nil {
		return nil, err
	}
	keys := make([]Key, len(facts))
	for i, f := range facts {
		keys[i] = f.Key
	}
	return t.Owners(ctx, requester, keys...)
}

// create records f's entry as owner's unless another owns it or this
// replica forgot it (Learn).
func (t *Table) create(ctx context.Context, f Fact, owner string) error {
	if !f.Recall && t.forgot(f.Key) {
		return nil
	}
	creator := owner // the entry's owner unless the shared store knows another
	if t.store != nil {
		creator = ""
	}
	e, charged := t.add(f.Key, owner, creator)
	e.mu.Lock()
	if e.owner != "" && e.owner != owner {
		e.mu.Unlock()
		return nil
	}
	if t.store == nil {
		e.owner = owner
		e.setStatus(f.Status)
		e.mu.Unlock()
		if !charged { // creator is owner: added or read as owner's, it is theirs already
			t.own(f.Key, owner)
		}
		return nil
	}
	fresh := e.owner == owner && (f.Status == "" || f.Status == e.status) && time.Since(e.synced) < syncedFor
	e.mu.Unlock()
	if fresh {
		return nil
	}
	name := f.Key.Name()
	o, dropped, err := t.store.Create(ctx, name, owner, f.Status, t.stored)
	if err != nil {
		return fmt.Errorf("record the owner of %s: %w", name, err)
	}
	t.watch.Dropped(TableOwners, StoreRedis, owner, dropped)
	e.mu.Lock()
	e.owner = o // the store's: the first recorded
	if o == owner {
		e.setStatus(f.Status)
		e.synced, e.used = time.Now(), time.Now()
	}
	e.mu.Unlock()
	t.own(f.Key, o)
	return nil
}

// observe records the statuses of facts, for known entries: here, and in
// the shared store in one round trip, leaving out what this replica synced
// within syncedFor. An entry this replica does not hold is written to the
// store, which adds nothing for an id it does not know either.
func (t *Table) observe(ctx context.Context, facts []Fact) error {
	var names, statuses []string
	var entries []*entry
	for _, f := range facts {
		e := t.get(f.Key, "")
		if e != nil {
			e.mu.Lock()
			fresh := t.store != nil && e.status == f.Status && time.Since(e.synced) < syncedFor
			e.setStatus(f.Status)
			e.mu.Unlock()
			if fresh {
				continue
			}
		}
		if t.store == nil {
			continue
		}
		names, statuses, entries = append(names, f.Key.Name()), append(statuses, f.Status), append(entries, e)
	}
	if t.store == nil || len(names) == 0 {
		return nil
	}
	if err := t.store.ObserveAll(ctx, names, statuses); err != nil {
		return fmt.Errorf("record the status of %d entries: %w", len(names), err)
	}
	for i, e := range entries {
		if e != nil {
			e.sync(statuses[i])
		}
	}
	return nil
}

// Owners returns the owner of each id, "" when unknown, read for by (the
// principal whose request reads them, "" none: an upstream's push, a
// refusal's reason): what this replica knows, the rest from the shared
// store in one round trip (and cached: owners never change). An entry by
// owns becomes by's most recently used, here and in the store; another's
// does not move (get). An error means the store could not be read.
func (t *Table) Owners(ctx context.Context, by string, keys ...Key) ([]string, error) {
	out := make([]string, len(keys))
	var miss []int
	for i, k := range keys {
		stale := false
		if e := t.get(k, by); e != nil {
			e.mu.Lock()
			out[i] = e.owner
			stale = out[i] != "" && out[i] == by && time.Since(e.used) >= usedFor
			e.mu.Unlock()
		}
		if (out[i] == "" || stale) && k.ID != "" && t.store != nil {
			miss = append(miss, i)
		}
	}
	if t.store == nil || len(miss) == 0 {
		return out, nil
	}
	ask := make([]string, len(miss))
	for j, i := range miss {
		ask[j] = keys[i].Name()
	}
	got, err := t.store.Owners(ctx, by, ask)
	if err != nil {
		return nil, fmt.Errorf("read the owners of %d entries: %w", len(ask), err)
	}
	now := time.Now()
	for j, i := range miss {
		if o := got[j]; o != "" {
			out[i] = o
			e, _ := t.add(keys[i], by, o)
			e.mu.Lock()
			e.owner = o
			if o == by {
				e.used = now // the store marked it used
			}
			e.mu.Unlock()
			t.own(keys[i], o)
		}
	}
	return out, nil
}

// Claim records that principal owns the entry (the caller verified a
// handle that proves it; the entry is rebuilt when this replica or the
// store lost it) unless another owns it already, and returns its status
// (in the shared store the one every replica sees) and the steers counted
// here. ok is false when the entry is another's: the handle was given for
// an id that turned out another's (replicas that raced to record it), and
// proves nothing.
func (t *Table) Claim(ctx context.Context, k Key, principal string) (status string, steers int, ok bool, err error) {
	e, charged := t.add(k, principal, principal)
	e.mu.Lock()
	if e.owner == "" {
		e.owner = principal
	}
	ok, status, steers = e.owner == principal, e.status, e.steers
	e.mu.Unlock()
	if ok && !charged {
		t.own(k, principal)
	}
	if !ok || t.store == nil {
		return status, steers, ok, nil
	}
	name := k.Name()
	s, o, dropped, err := t.store.Claim(ctx, name, principal, t.stored)
	if err != nil {
		return "", 0, false, fmt.Errorf("read the shared state of %s: %w", name, err)
	}
	t.watch.Dropped(TableOwners, StoreRedis, principal, dropped)
	if o != principal {
		e.mu.Lock()
		e.owner = o
		e.mu.Unlock()
		t.own(k, o)
		return "", 0, false, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status, e.synced, e.used = s, time.Now(), time.Now()
	return s, e.steers, true, nil
}

// Observe records a status the upstream reported just now for a known
// entry (a decision's own read).
func (t *Table) Observe(ctx context.Context, k Key, status string) error {
	return t.observe(ctx, []Fact{{Key: k, Status: status}})
}

// Steer reserves a place in the task's steer queue unless max (> 0) are
// taken (in the shared store atomically, so the bound holds across
// replicas); a mark (the task's lastUpdatedAt now) later than the one the
// count began at restarts the count (one that is not a timestamp: any
// other). It returns whether it reserved and the places taken before.
func (t *Table) Steer(ctx context.Context, k Key, max int, mark string) (reserved bool, before int, err error) {
	mark = stepMark(mark)
	if t.store != nil {
		name := k.Name()
		ok, n, err := t.store.Steer(ctx, name, max, mark)
		if err != nil {
			return false, 0, fmt.Errorf("reserve a steer of %s: %w", name, err)
		}
		return ok, n, nil
	}
	e, _ := t.add(k, "", "")
	e.mu.Lock()
	defer e.mu.Unlock()
	if later(mark, e.mark) {
		e.mark, e.steers = mark, 0 // the server passed a step: the queue was taken
	}
	before = e.steers
	if max <= 0 || e.steers < max {
		e.steers++
		return true, before, nil
	}
	return false, before, nil
}

// stepMark is the mark of a task's lastUpdatedAt: an RFC 3339 timestamp as
// its Unix time in microseconds (decimal), so that marks compare by time
// whatever their spelling; anything else as it is.
func stepMark(updated string) string {
	at, err := time.Parse(time.RFC3339Nano, updated)
	if err != nil {
		return updated
	}
	return strconv.FormatInt(at.UnixMicro(), 10)
}

// later reports whether mark (stepMark's) names a step after held's, the
// mark the steer count began at: a later time when both are times, else
// any other mark ("" none). A mark read before the step the count began
// at, by a request that reached the count after one that read the step's
// (two replicas, or one whose read was slow), is counted since that step:
// taking it for a new step restarted the count at every such flip, and
// steers sent at once around a step queued max per flip (security.md T3).
// The shared store's steer script is the same rule (proxy/state).
func later(mark, held string) bool {
	if mark == "" || mark == held {
		return false
	}
	m, err1 := strconv.ParseInt(mark, 10, 64)
	h, err2 := strconv.ParseInt(held, 10, 64)
	return err1 != nil || err2 != nil || m > h
}

// Unsteer gives back a place Steer reserved.
func (t *Table) Unsteer(ctx context.Context, k Key) error {
	if t.store != nil {
		name := k.Name()
		if err := t.store.Unsteer(ctx, name); err != nil {
			return fmt.Errorf("give back a steer of %s: %w", name, err)
		}
		return nil
	}
	if e := t.get(k, ""); e != nil {
		e.mu.Lock()
		if e.steers > 0 {
			e.steers--
		}
		e.mu.Unlock()
	}
	return nil
}

// Peek returns what this replica holds of an entry, without the store.
func (t *Table) Peek(k Key) (owner, status string, steers int, ok bool) {
	e := t.get(k, "")
	if e == nil {
		return "", "", 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.owner, e.status, e.steers, true
}
