package extauthz

import (
	"sync"
	"time"
)

// DefaultMaxUnconfirmedStarts is the default of Config.MaxUnconfirmedStarts.
const DefaultMaxUnconfirmedStarts = 1000

// unconfirmedFor bounds how long a start stays unconfirmed: its TTL, at most
// a day, an hour when it names none.
const (
	unconfirmedFor     = time.Hour
	unconfirmedForMost = 24 * time.Hour
)

// starts counts, per principal, the sessions started through this replica
// that no later message has used yet. ext_authz commits a start on allow,
// without seeing whether the runtime took it (it may refuse one over its own
// start limit): unbounded, such starts would fill the session table and
// evict, or refuse, the sessions in use. A start is confirmed by the first
// message allowed on its session after it, and forgotten at its deadline.
type starts struct {
	max int

	mu    sync.Mutex
	by    map[string]map[string]int64 // principal -> session -> deadline (Unix ms)
	owner map[string]string           // session -> principal
}

func newStarts(max int) *starts {
	return &starts{max: max, by: map[string]map[string]int64{}, owner: map[string]string{}}
}

// full reports whether p holds as many unconfirmed starts as it may at now,
// after forgetting those past their deadline.
func (s *starts) full(p string, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.by[p]
	if len(set) < s.max {
		return false
	}
	for sid, deadline := range set {
		if deadline < now {
			s.drop(p, sid)
		}
	}
	return len(s.by[p]) >= s.max
}

// started records p's allowed start of session sid, unconfirmed until
// deadline.
func (s *starts) started(p, sid string, deadline int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.owner[sid]; ok {
		s.drop(old, sid)
	}
	set := s.by[p]
	if set == nil {
		set = map[string]int64{}
		s.by[p] = set
	}
	set[sid] = deadline
	s.owner[sid] = p
}

// used confirms the start of session sid, if it is unconfirmed.
func (s *starts) used(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.owner[sid]; ok {
		s.drop(p, sid)
	}
}

// drop forgets one start; s.mu is held.
func (s *starts) drop(p, sid string) {
	delete(s.owner, sid)
	if set := s.by[p]; set != nil {
		delete(set, sid)
		if len(set) == 0 {
			delete(s.by, p)
		}
	}
}

// deadline is when a start made at now with ttlMs stops being counted.
func deadline(now, ttlMs int64) int64 {
	d := unconfirmedFor.Milliseconds()
	if ttlMs > 0 {
		d = min(ttlMs, unconfirmedForMost.Milliseconds())
	}
	return now + d
}
