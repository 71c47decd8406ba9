package listener

import (
	"sync"
	"sync/atomic"
)

// Full names the bounds a Slots.Take found reached (several may be).
type Full uint8

// The bounds of a Slots.Take.
const (
	FullPerHolder        Full = 1 << iota // the holder's own bound
	FullWatchesPerHolder                  // the holder's standing streams
	FullTotal                             // everyone's together
	FullWatches                           // the standing streams' share
)

// SlotBounds are the bounds of one Slots.Take.
type SlotBounds struct {
	PerHolder, Total, WatchesPerHolder, Watches int
}

// Slots counts what is open (requests, streams, calls), in total and per
// holder, and the standing streams (watches) among them: the one counter
// behind the MCP and A2A sidecars' Streams and the MACP sidecar's relayed
// calls, each of which words its own refusal.
type Slots struct {
	mu      sync.Mutex
	total   int
	by      map[string]int
	watches int
	watchBy map[string]int
}

// Take counts one more of who (a standing stream when watch), or, when a
// bound of b is reached, takes nothing and says which; done gives it back
// (once, whatever the number of calls).
func (s *Slots) Take(who string, b SlotBounds, watch bool) (done func(), full Full) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by[who] >= b.PerHolder {
		full |= FullPerHolder
	}
	if s.total >= b.Total {
		full |= FullTotal
	}
	if watch && s.watchBy[who] >= b.WatchesPerHolder {
		full |= FullWatchesPerHolder
	}
	if watch && s.watches >= b.Watches {
		full |= FullWatches
	}
	if full != 0 {
		return nil, full
	}
	if s.by == nil {
		s.by, s.watchBy = map[string]int{}, map[string]int{}
	}
	s.total++
	s.by[who]++
	if watch {
		s.watches++
		s.watchBy[who]++
	}
	t := &taken{s: s, who: who, watch: watch}
	return t.release, 0
}

// taken is one Take's count, given back once by release.
type taken struct {
	s     *Slots
	who   string
	watch bool
	done  atomic.Bool
}

func (t *taken) release() {
	if t.done.Swap(true) {
		return
	}
	s, who := t.s, t.who
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.by[who]--; s.by[who] == 0 {
		delete(s.by, who)
	}
	if t.watch {
		s.watches--
		if s.watchBy[who]--; s.watchBy[who] == 0 {
			delete(s.watchBy, who)
		}
	}
}
