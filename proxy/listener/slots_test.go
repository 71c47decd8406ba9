package listener

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// TestSlotsDoneOnce: a Take's done gives its count back once, however
// many times and from however many goroutines it is called, and a Take
// costs two allocations at most (its record and its done).
func TestSlotsDoneOnce(t *testing.T) {
	var s Slots
	b := SlotBounds{PerHolder: 2, Total: 3, WatchesPerHolder: 1, Watches: 1}
	done1, _ := s.Take("a", b, true)
	done2, _ := s.Take("a", b, false)
	if _, full := s.Take("a", b, false); full != FullPerHolder {
		t.Fatalf("third take of a: full %v", full)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(done1)
	}
	wg.Wait()
	if _, full := s.Take("b", b, true); full != 0 {
		t.Fatalf("b's watch after a's was given back: full %v", full)
	}
	done2()
	done2()
	if s.total != 1 || s.by["a"] != 0 || s.watches != 1 || s.watchBy["a"] != 0 {
		t.Fatalf("counts %d %v %d %v", s.total, s.by, s.watches, s.watchBy)
	}
	if n := testing.AllocsPerRun(100, func() {
		done, _ := s.Take("c", b, false)
		done()
	}); n > 2 {
		t.Errorf("Take and done allocate %v times", n)
	}
}

// TestHoldReaders: every Reader of a Hold charges it, the first as any
// later one, each reading its own source.
func TestHoldReaders(t *testing.T) {
	s := NewStreams("t", StreamLimits{}.WithDefaults(4))
	h := s.Hold()
	r1, r2 := h.Reader(strings.NewReader("abc")), h.Reader(strings.NewReader("defgh"))
	b1, _ := io.ReadAll(r1)
	b2, _ := io.ReadAll(r2)
	if string(b1) != "abc" || string(b2) != "defgh" || h.n != 8 {
		t.Fatalf("%q %q charged %d", b1, b2, h.n)
	}
	h.Release()
	if s.held != 0 {
		t.Fatalf("held %d after Release", s.held)
	}
}
