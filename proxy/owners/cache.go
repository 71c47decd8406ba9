package owners

import (
	"sync"
)

// Cache is a bounded table of what principals hold: at most size entries,
// of which one principal holds at most its share. A principal adding
// beyond its share loses its own least recently used entry, never another
// principal's; only when the whole table is full (every principal within
// its share) does the table's least recently used entry go. A plain LRU
// would let one principal's flood evict every other principal's entries.
// It is the one implementation of that rule: the owner table (Table) keeps
// its entries in one, as do the MCP sidecar's client-side tasks and learned
// tools and MACP's policy bindings. Every operation is O(1) but RemoveIf;
// an entry costs one allocation.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	size  int
	share int         // <= 0: none (the table's LRU alone bounds a principal)
	all   chain[K, V] // every entry, most recently used first
	items map[K]*node[K, V]
	by    map[string]*chain[K, V] // each principal's entries, most recently used first
	watch *Watch                  // told of the entries a share drops
	table string                  // the table's name to watch (Table* constants)
	// evicted (nil: none) is told of each entry the cache drops to stay
	// within its size or a share, under the cache's lock (it must not use
	// the cache).
	evicted func(K, V)
}

// node is one entry, linked in the table's chain (link[inAll]) and in its
// principal's (link[inMine]) when it is charged to one.
type node[K comparable, V any] struct {
	key  K
	val  V
	mine *chain[K, V] // its principal's; nil: nobody's (Table's entries before they have an owner)
	link [2]struct{ prev, next *node[K, V] }
}

// The links of a node: in the table's chain, in its principal's.
const (
	inAll  = 0
	inMine = 1
)

// chain is a doubly linked list of nodes through their links of one kind,
// most recently used first.
type chain[K comparable, V any] struct {
	owner       string // the principal whose chain it is (by's)
	front, back *node[K, V]
	n           int
}

func (c *chain[K, V]) pushFront(e *node[K, V], i int) {
	e.link[i].prev, e.link[i].next = nil, c.front
	if c.front != nil {
		c.front.link[i].prev = e
	} else {
		c.back = e
	}
	c.front = e
	c.n++
}

func (c *chain[K, V]) remove(e *node[K, V], i int) {
	l := &e.link[i]
	if l.prev != nil {
		l.prev.link[i].next = l.next
	} else {
		c.front = l.next
	}
	if l.next != nil {
		l.next.link[i].prev = l.prev
	} else {
		c.back = l.prev
	}
	l.prev, l.next = nil, nil
	c.n--
}

func (c *chain[K, V]) moveToFront(e *node[K, V], i int) {
	if c.front != e {
		c.remove(e, i)
		c.pushFront(e, i)
	}
}

// NewCache returns a cache of size entries (at least 1), one principal
// holding at most share of them (0 or size and above: no share of its own);
// w (nil: none) is told of the entries a share drops, as table's.
func NewCache[K comparable, V any](size, share int, w *Watch, table string) *Cache[K, V] {
	size = max(size, 1)
	if share >= size {
		share = 0
	}
	return &Cache[K, V]{size: size, share: share, items: make(map[K]*node[K, V]), by: make(map[string]*chain[K, V]), watch: w, table: table}
}

// Add records v under k as owner's, the most recently used of owner's (k
// added again stays its first owner's).
func (c *Cache[K, V]) Add(owner string, k K, v V) {
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		e.val = v
		c.touchLocked(e, true)
		c.mu.Unlock()
		return
	}
	over := c.addLocked(k, v, owner, true)
	c.mu.Unlock()
	c.dropped(owner, over)
}

// peekOrAdd returns the value under k, read by by (get), or adds mk()
// under k and returns it: the most recently used, charged to owner as Add
// charges it (its share first: a principal at its share makes room from its
// own entries, never from the table's), nobody's until charge when owner is
// "". charged reports that the entry is owner's most recently used already
// (added for owner, or read by its owner, by == owner): charge would change
// nothing.
func (c *Cache[K, V]) peekOrAdd(k K, mk func() V, by, owner string) (v V, charged bool) {
	c.mu.Lock()
	if e, ok := c.items[k]; ok {
		use := c.usedBy(e, by)
		c.touchLocked(e, use)
		c.mu.Unlock()
		return e.val, use && by == owner
	}
	v = mk()
	over := c.addLocked(k, v, owner, owner != "")
	c.mu.Unlock()
	c.dropped(owner, over)
	return v, owner != ""
}

// addLocked adds v under k (not held); over reports that owner, past its
// share, lost its own least recently used entry.
func (c *Cache[K, V]) addLocked(k K, v V, owner string, charge bool) (over bool) {
	var mine *chain[K, V]
	if charge {
		mine = c.by[owner]
	}
	switch {
	case c.share > 0 && mine != nil && mine.n >= c.share:
		c.evictLocked(mine.back) // the principal's own oldest
		over = true
	case len(c.items) >= c.size:
		c.evictLocked(c.all.back)
	}
	e := &node[K, V]{key: k, val: v}
	c.all.pushFront(e, inAll)
	c.items[k] = e
	if charge {
		c.chargeLocked(e, owner)
	}
	return over
}

// charge makes the entry under k (if held) owner's, its most recently
// used; owner past its share loses its own least recently used entry.
func (c *Cache[K, V]) charge(k K, owner string) {
	c.mu.Lock()
	e, ok := c.items[k]
	over := false
	if ok {
		c.all.moveToFront(e, inAll)
		if e.mine != nil && e.mine.owner == owner {
			e.mine.moveToFront(e, inMine)
		} else {
			c.unchargeLocked(e)
			c.chargeLocked(e, owner)
			if mine := e.mine; c.share > 0 && mine.n > c.share {
				c.evictLocked(mine.back)
				over = true
			}
		}
	}
	c.mu.Unlock()
	c.dropped(owner, over)
}

// dropped tells the watch that owner went past its share.
func (c *Cache[K, V]) dropped(owner string, over bool) {
	if over {
		c.watch.Dropped(c.table, StoreMemory, owner, 1)
	}
}

// Get returns the value under k and marks it the most recently used, its
// principal's too (the caches whose keys name their principal are read by
// that principal only).
func (c *Cache[K, V]) Get(k K) (v V, ok bool) {
	return c.get(k, "", true)
}

// GetBy returns the value under k read by by (the principal whose request
// reads it): the most recently used, its principal's only when by is its
// principal (usedBy), the rule the owner table keeps, for the caches whose
// keys do not name their principal (MACP's policy bindings).
func (c *Cache[K, V]) GetBy(k K, by string) (v V, ok bool) {
	return c.get(k, by, false)
}

// get returns the value under k read by by (the principal whose request
// reads it, "" none; mine: the caller knows the reader is its principal):
// it becomes the table's most recently used, and its principal's only when
// by is its principal (usedBy).
func (c *Cache[K, V]) get(k K, by string, mine bool) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return v, false
	}
	c.touchLocked(e, mine || c.usedBy(e, by))
	return e.val, true
}

// usedBy reports whether a read of e by by is its principal's own use,
// which alone makes e its principal's most recently used: another's read
// (someone who knows the id) must not keep e from being its principal's
// next to go when the principal passes its share. The shared store keeps
// the same rule (state.Redis.Owners).
func (c *Cache[K, V]) usedBy(e *node[K, V], by string) bool {
	return by != "" && e.mine != nil && e.mine.owner == by
}

// Contains reports whether k is held, without marking it used.
func (c *Cache[K, V]) Contains(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	return ok
}

// Remove forgets k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.removeLocked(e)
	}
}

// RemoveIf forgets every entry whose key drop names.
func (c *Cache[K, V]) RemoveIf(drop func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if drop(k) {
			c.removeLocked(e)
		}
	}
}

// Each calls f with every entry, most recently used first (f must not
// use the cache).
func (c *Cache[K, V]) Each(f func(K, V)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.all.front; e != nil; e = e.link[inAll].next {
		f(e.key, e.val)
	}
}

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// count is the number of entries charged to owner.
func (c *Cache[K, V]) count(owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mine := c.by[owner]; mine != nil {
		return mine.n
	}
	return 0
}

func (c *Cache[K, V]) touchLocked(e *node[K, V], use bool) {
	c.all.moveToFront(e, inAll)
	if use && e.mine != nil {
		e.mine.moveToFront(e, inMine)
	}
}

func (c *Cache[K, V]) chargeLocked(e *node[K, V], owner string) {
	mine := c.by[owner]
	if mine == nil {
		mine = &chain[K, V]{owner: owner}
		c.by[owner] = mine
	}
	mine.pushFront(e, inMine)
	e.mine = mine
}

func (c *Cache[K, V]) unchargeLocked(e *node[K, V]) {
	mine := e.mine
	if mine == nil {
		return
	}
	mine.remove(e, inMine)
	if mine.n == 0 {
		delete(c.by, mine.owner)
	}
	e.mine = nil
}

func (c *Cache[K, V]) evictLocked(e *node[K, V]) {
	c.removeLocked(e)
	if c.evicted != nil {
		c.evicted(e.key, e.val)
	}
}

func (c *Cache[K, V]) removeLocked(e *node[K, V]) {
	c.all.remove(e, inAll)
	delete(c.items, e.key)
	c.unchargeLocked(e)
}

// OnEvict makes f (nil: none) told of each entry the cache drops to stay
// within its size or a share (not those removed), under the cache's lock:
// f must not use the cache. It is set before the cache is used.
func (c *Cache[K, V]) OnEvict(f func(K, V)) { c.evicted = f }
