package admission

import (
	"sync"
	"time"
)

// DefaultMaxUnconfirmedStarts is the default cap of NewBlind.
const DefaultMaxUnconfirmedStarts = 1000

// unconfirmedFor bounds how long a start the session table no longer holds
// (evicted) stays counted: its TTL, at most a day, an hour when it names
// none.
const (
	unconfirmedFor     = time.Hour
	unconfirmedForMost = 24 * time.Hour
)

// starts counts, per principal, the sessions started through this replica
// that have not ended. ext_authz commits on allow, without seeing whether the
// runtime took the message: a start it refused (over its own start limit)
// is committed all the same, and so is whatever its initiator alone may send
// on it afterwards, a SuspendSession included, which pauses its TTL. So no
// message confirms a start: it counts until the session ends in the table
// (terminal, or expired by time: a suspended session counts while it stays
// suspended), or, once the table no longer holds it (evicted), until its
// deadline. Unbounded, such starts would fill the session table and evict,
// or refuse, the sessions in use.
type starts struct {
	max int

	mu    sync.Mutex
	by    map[string]*started // principal -> its sessions
	owner map[string]string   // session -> principal
}

// started are one principal's counted sessions.
type started struct {
	deadline map[string]int64 // session -> deadline (Unix ms)
	// scanned is when the sessions were last asked about, full (Unix ms; 0
	// never):
	// within rescan of it, a principal at its cap is refused without asking
	// again, so that a flood of starts past the cap costs one scan of the
	// table per rescan, not one per start.
	scanned int64
}

// rescan is how often a principal at its cap has its sessions asked about.
const rescan = 100 * time.Millisecond

func newStarts(max int) *starts {
	return &starts{max: max, by: map[string]*started{}, owner: map[string]string{}}
}

// endedFunc reports whether the session table holds a session (held) and
// whether it ended there (sessions.Decider.Ended).
type endedFunc func(sid string, now int64) (ended, held bool)

// full reports whether p holds as many started sessions as it may at now,
// after forgetting those that ended and those the table no longer holds past
// their deadline (asked at most once per rescan while p stays full).
func (s *starts) full(p string, now int64, ended endedFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.by[p]
	if set == nil || len(set.deadline) < s.max {
		return false
	}
	if set.scanned != 0 && now >= set.scanned && now-set.scanned < rescan.Milliseconds() {
		return true
	}
	for sid, deadline := range set.deadline {
		if over, held := ended(sid, now); over || !held && deadline < now {
			s.drop(p, sid)
		}
	}
	if set = s.by[p]; set == nil || len(set.deadline) < s.max {
		return false
	}
	set.scanned = now
	return true
}

// started records p's allowed start of session sid, counted until it ends
// (or, once evicted, until deadline).
func (s *starts) started(p, sid string, deadline int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.owner[sid]; ok {
		s.drop(old, sid)
	}
	set := s.by[p]
	if set == nil {
		set = &started{deadline: map[string]int64{}}
		s.by[p] = set
	}
	set.deadline[sid] = deadline
	s.owner[sid] = p
}

// decided forgets the start of session sid, if counted, when a message just
// allowed on it ended it (a Commitment, a CancelSession): its principal may
// start another at once, with no wait for the next scan.
func (s *starts) decided(sid string, now int64, ended endedFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.owner[sid]; ok {
		if over, _ := ended(sid, now); over {
			s.drop(p, sid)
		}
	}
}

// drop forgets one start; s.mu is held.
func (s *starts) drop(p, sid string) {
	delete(s.owner, sid)
	if set := s.by[p]; set != nil {
		delete(set.deadline, sid)
		if len(set.deadline) == 0 {
			delete(s.by, p)
		}
	}
}

// deadline is when a start made at now with ttlMs stops being counted once
// the table no longer holds it.
func deadline(now, ttlMs int64) int64 {
	d := unconfirmedFor.Milliseconds()
	if ttlMs > 0 {
		d = min(ttlMs, unconfirmedForMost.Milliseconds())
	}
	return now + d
}
