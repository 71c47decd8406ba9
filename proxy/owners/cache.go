package owners

import (
	"container/list"
	"sync"
)

// Cache is a bounded table of what principals hold besides owners (the MCP
// sidecar's client-side tasks and the tools it learned per principal and
// session): at most size entries, of which one principal holds at most its
// share. A principal adding beyond its share loses its own least recently
// used entry, never another principal's, as the owner table's shares keep
// it; only when the whole table is full (every principal within its share)
// does the table's least recently used entry go. A plain LRU would let one
// principal's flood evict every other principal's entries. Every operation
// is O(1) but RemoveIf.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	size  int
	share int       // <= 0: none (the table's LRU alone bounds a principal)
	all   list.List // of *cached[K, V], most recently used first
	items map[K]*list.Element
	by    map[string]*list.List // each principal's entries, most recently used first
	watch *Watch                // told of the entries a share drops
	table string                // the table's name to watch (Table* constants)
}

type cached[K comparable, V any] struct {
	key   K
	val   V
	owner string
	mine  *list.Element // in Cache.by[owner]
}

// NewCache returns a cache of size entries (at least 1), one principal
// holding at most share of them (0 or size and above: no share of its own);
// w (nil: none) is told of the entries a share drops, as table's.
func NewCache[K comparable, V any](size, share int, w *Watch, table string) *Cache[K, V] {
	size = max(size, 1)
	if share >= size {
		share = 0
	}
	return &Cache[K, V]{size: size, share: share, items: make(map[K]*list.Element), by: make(map[string]*list.List), watch: w, table: table}
}

// Add records v under k as owner's, the most recently used of owner's (k
// added again stays its first owner's).
func (c *Cache[K, V]) Add(owner string, k K, v V) {
	if c.add(owner, k, v) {
		c.watch.Dropped(c.table, StoreMemory, owner, 1)
	}
}

// add is Add; over reports that owner, past its share, lost its own least
// recently used entry.
func (c *Cache[K, V]) add(owner string, k K, v V) (over bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		it := e.Value.(*cached[K, V])
		it.val = v
		c.touchLocked(e)
		return false
	}
	mine := c.by[owner]
	switch {
	case c.share > 0 && mine != nil && mine.Len() >= c.share:
		c.removeLocked(mine.Back().Value.(*list.Element)) // the principal's own oldest
		over = true
	case len(c.items) >= c.size:
		c.removeLocked(c.all.Back())
	}
	if mine = c.by[owner]; mine == nil {
		mine = list.New()
		c.by[owner] = mine
	}
	it := &cached[K, V]{key: k, val: v, owner: owner}
	e := c.all.PushFront(it)
	it.mine = mine.PushFront(e)
	c.items[k] = e
	return over
}

// Get returns the value under k and marks it the most recently used.
func (c *Cache[K, V]) Get(k K) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return v, false
	}
	c.touchLocked(e)
	return e.Value.(*cached[K, V]).val, true
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
	for e := c.all.Front(); e != nil; e = e.Next() {
		it := e.Value.(*cached[K, V])
		f(it.key, it.val)
	}
}

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

func (c *Cache[K, V]) touchLocked(e *list.Element) {
	it := e.Value.(*cached[K, V])
	c.all.MoveToFront(e)
	c.by[it.owner].MoveToFront(it.mine)
}

func (c *Cache[K, V]) removeLocked(e *list.Element) {
	it := e.Value.(*cached[K, V])
	c.all.Remove(e)
	delete(c.items, it.key)
	mine := c.by[it.owner]
	mine.Remove(it.mine)
	if mine.Len() == 0 {
		delete(c.by, it.owner)
	}
}
