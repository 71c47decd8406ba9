package owners

import (
	"container/list"
	"sync"
)

// shares keeps each principal's entries of the table in a list of its own,
// most recently used first, so that no principal holds more than max of
// them: one that creates entries beyond its share loses its own least
// recently used, never another principal's (the table's one LRU alone
// would let one principal's flood evict every other's). Every operation is
// O(1). An entry nobody owns is in no list.
type shares struct {
	mu  sync.Mutex
	max int // <= 0: no share
	by  map[string]*list.List
}

func newShares(max int) *shares {
	return &shares{max: max, by: make(map[string]*list.List)}
}

// charge counts e (under key) as owner's, most recently used, and returns
// the key and entry of owner's least recently used one when owner now
// holds more than its share: the caller evicts it from the table.
func (s *shares) charge(key Key, e *entry, owner string) (over Key, victim *entry) {
	if s.max <= 0 || owner == "" {
		return Key{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.share != nil && e.charged == owner {
		s.by[owner].MoveToFront(e.share)
		return Key{}, nil
	}
	s.dropLocked(e)
	l := s.by[owner]
	if l == nil {
		l = list.New()
		s.by[owner] = l
	}
	e.share, e.charged, e.slot = l.PushFront(e), owner, key
	if l.Len() <= s.max {
		return Key{}, nil
	}
	oldest := l.Back()
	v := oldest.Value.(*entry)
	over = v.slot
	s.dropLocked(v)
	return over, v
}

// touch marks e the most recently used of its owner's.
func (s *shares) touch(e *entry) {
	if s.max <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.share != nil {
		s.by[e.charged].MoveToFront(e.share)
	}
}

// drop forgets e (the table evicted it).
func (s *shares) drop(e *entry) {
	if s.max <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(e)
}

func (s *shares) dropLocked(e *entry) {
	if e.share == nil {
		return
	}
	l := s.by[e.charged]
	l.Remove(e.share)
	if l.Len() == 0 {
		delete(s.by, e.charged)
	}
	e.share, e.charged = nil, ""
}

// count returns how many entries owner holds.
func (s *shares) count(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.by[owner]; l != nil {
		return l.Len()
	}
	return 0
}
