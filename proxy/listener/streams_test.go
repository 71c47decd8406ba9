package listener

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestStreamsTake(t *testing.T) {
	s := NewStreams("mcp", StreamLimits{Max: 3, PerPrincipal: 2, AnswerBytes: 10})
	var dones []func()
	for _, tc := range []struct {
		who    string
		status int // 0: admitted
	}{
		{"alice", 0}, {"alice", 0}, {"alice", http.StatusTooManyRequests},
		{"bob", 0}, {"bob", http.StatusServiceUnavailable}, {"carol", http.StatusServiceUnavailable},
	} {
		done, busy := s.Take(tc.who)
		switch {
		case tc.status == 0 && busy != nil, tc.status != 0 && (busy == nil || busy.Status != tc.status):
			t.Fatalf("%s: %v, want status %d", tc.who, busy, tc.status)
		}
		if done != nil {
			dones = append(dones, done)
		}
	}
	dones[0]()
	dones[0]() // once
	if _, busy := s.Take("carol"); busy != nil {
		t.Fatalf("after one closed: %v", busy)
	}
	if _, busy := s.Take("dave"); busy == nil {
		t.Fatal("a second done gave back a second place")
	}
}

// TestStreamsAnswerBudget: one answer alone always fits (up to
// max_response_bytes, bounded elsewhere); a second that would pass the
// budget fails; a release makes room. A share kept in the caller's
// allocation (HoldIn) counts as one Hold makes. Answers, what the metrics
// read, is the bytes held and the answers refused.
func TestStreamsAnswerBudget(t *testing.T) {
	s := NewStreams("a2a", StreamLimits{Max: 10, PerPrincipal: 10, AnswerBytes: 10})
	read := func(h *Hold, n int) error {
		_, err := io.ReadAll(h.Reader(bytes.NewReader(make([]byte, n))))
		return err
	}
	var kept Hold
	first, second := s.Hold(), s.HoldIn(&kept)
	if err := read(first, 25); err != nil {
		t.Fatalf("an answer alone over the budget: %v", err)
	}
	if err := read(second, 1); !errors.Is(err, ErrAnswerBudget) {
		t.Fatalf("a second answer past the budget: %v", err)
	}
	if got, want := s.Answers(), (AnswerStats{Held: 25, Refused: 1}); got != want {
		t.Errorf("Answers %+v, want %+v", got, want)
	}
	second.Release()
	first.Release()
	if got, want := s.Answers(), (AnswerStats{Held: 0, Refused: 1}); got != want {
		t.Errorf("Answers after the releases %+v, want %+v", got, want)
	}
	if err := read(second, 6); err != nil {
		t.Fatal(err)
	}
	if err := read(first, 4); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	if err := read(first, 1); !errors.Is(err, ErrAnswerBudget) {
		t.Fatalf("past the budget with another holding: %v", err)
	}
	if got, want := s.Answers(), (AnswerStats{Held: 10, Refused: 2}); got != want {
		t.Errorf("Answers at the budget %+v, want %+v", got, want)
	}
}

// TestStreamsAnswerBudgetParts (security.md X1): a part of a share (an
// answer Warden reads itself while the share's answer is made) is charged
// as the share's own bytes: alone, the share and its parts always fit;
// beside another, a part past the budget is refused. Release gives back the
// part's bytes but those Keep moved to the share, which holds them until
// its own Release. A nil share's part charges nothing.
func TestStreamsAnswerBudgetParts(t *testing.T) {
	s := NewStreams("a2a", StreamLimits{Max: 10, PerPrincipal: 10, AnswerBytes: 10})
	read := func(h *Hold, n int) error {
		_, err := io.ReadAll(h.Reader(bytes.NewReader(make([]byte, n))))
		return err
	}
	own := s.Hold()
	if err := read(own, 8); err != nil {
		t.Fatal(err)
	}
	part := own.Part()
	if err := read(part, 20); err != nil {
		t.Fatalf("a part of the one share holding any, past the budget: %v", err)
	}
	part.Keep(3)
	part.Release()
	if got, want := s.Answers().Held, int64(11); got != want {
		t.Errorf("after the part's release: %d held, want %d (8 and the 3 kept)", got, want)
	}
	other := s.Hold()
	if err := read(other, 1); !errors.Is(err, ErrAnswerBudget) {
		t.Fatalf("another answer past the budget: %v", err)
	}
	own.Release()
	if err := read(other, 6); err != nil {
		t.Fatal(err)
	}
	part = s.Hold().Part()
	if err := read(part, 5); !errors.Is(err, ErrAnswerBudget) {
		t.Fatalf("a part past the budget beside another answer: %v", err)
	}
	part.Release()
	if got, want := s.Answers(), (AnswerStats{Held: 6, Refused: 2}); got != want {
		t.Errorf("Answers %+v, want %+v", got, want)
	}
	var none *Hold
	if err := read(none.Part(), 100); err != nil {
		t.Fatal(err)
	}
	none.Part().Keep(1)
	none.Part().Release()
	var unset Hold
	if unset.Part() != nil {
		t.Error("a share holding for no Streams made a part")
	}
}

// TestStreamsAnswerBudgetEvents: an event stream gives its share back after
// each event, so a long stream holds no more than about one event of the
// budget, and another answer still fits beside it.
func TestStreamsAnswerBudgetEvents(t *testing.T) {
	s := NewStreams("mcp", StreamLimits{Max: 10, PerPrincipal: 10, AnswerBytes: 10})
	stream, other := s.Hold(), s.Hold()
	handle := stream.Each(func(b []byte) ([]byte, bool) { return b, true })
	r := stream.Reader(bytes.NewReader(make([]byte, 8)))
	for range 5 { // five events of 8 bytes: 40 in all, 8 at a time
		if _, err := io.ReadFull(r, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		handle(nil)
		r = stream.Reader(bytes.NewReader(make([]byte, 8)))
	}
	if _, err := io.ReadAll(other.Reader(bytes.NewReader(make([]byte, 10)))); err != nil {
		t.Fatalf("an answer beside a stream that handled its events: %v", err)
	}
}

// TestStreamsWatches (issue 24 item 20): standing streams hold at most
// their share, per principal and in total, and the rest stays for decided
// requests; an idle one is ended, an event kept starts the count again.
func TestStreamsWatches(t *testing.T) {
	s := NewStreams("mcp", StreamLimits{Max: 6, PerPrincipal: 4, Watches: 3, WatchesPerPrincipal: 2, AnswerBytes: 10, WatchIdle: 300 * time.Millisecond})
	for i, tc := range []struct {
		who    string
		watch  bool
		status int // 0: admitted
	}{
		{"alice", true, 0}, {"alice", true, 0},
		{"alice", true, http.StatusTooManyRequests}, // her standing share
		{"alice", false, 0}, {"alice", false, 0},    // her decided requests still fit
		{"bob", true, 0},
		{"carol", true, http.StatusServiceUnavailable}, // the standing share in all
		{"carol", false, 0},                            // decided: room
	} {
		take := s.Take
		if tc.watch {
			take = s.TakeWatch
		}
		_, busy := take(tc.who)
		if (tc.status == 0) != (busy == nil) || (busy != nil && busy.Status != tc.status) {
			t.Fatalf("step %d (%s, watch %v): %v, want status %d", i, tc.who, tc.watch, busy, tc.status)
		}
	}
	// kept events for twice the bound: not idle; then none for the bound:
	// ended. On synctest's clock: the real timer raced a loaded machine
	// (a stall past the bound fired it, and the retry then closed its
	// channel twice when the next event re-armed it).
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan struct{})
		idle := s.Idle(func() { close(ended) })
		defer idle.Stop()
		pass := idle.Each(func(b []byte) ([]byte, bool) { return b, len(b) > 0 })
		isEnded := func() bool {
			synctest.Wait() // the timer's goroutine, if it fired, has closed ended
			select {
			case <-ended:
				return true
			default:
				return false
			}
		}
		for range 12 {
			time.Sleep(50 * time.Millisecond)
			pass([]byte("x"))
		}
		if isEnded() {
			t.Fatal("a standing stream passing events was ended")
		}
		pass(nil) // dropped: does not count
		time.Sleep(300*time.Millisecond - time.Nanosecond)
		if isEnded() {
			t.Fatal("a standing stream was ended before the idle bound")
		}
		time.Sleep(time.Nanosecond)
		if !isEnded() {
			t.Fatal("an idle standing stream was not ended")
		}
	})
}

// TestStreamsOwn (security.md X3): the share of a read of Warden's own
// takes a place among its principal's requests, refused as Take refuses
// past streams.per_principal; its Release (once, whatever the number of
// calls) gives back the place with the bytes, so that the request it was
// read for then takes its own (no request needs two places).
func TestStreamsOwn(t *testing.T) {
	s := NewStreams("mcp", StreamLimits{Max: 10, PerPrincipal: 1, AnswerBytes: 10})
	h, busy := s.Own("alice")
	if busy != nil {
		t.Fatal(busy)
	}
	if _, busy := s.Own("alice"); busy == nil || busy.Status != http.StatusTooManyRequests {
		t.Fatalf("a second read of alice's beside the first: %v, want 429", busy)
	}
	if _, busy := s.Take("alice"); busy == nil {
		t.Fatal("alice's request took a place beside her read")
	}
	if _, err := io.ReadAll(h.Reader(bytes.NewReader(make([]byte, 4)))); err != nil {
		t.Fatal(err)
	}
	if _, busy := s.Own("bob"); busy != nil {
		t.Fatalf("bob beside alice's read: %v", busy)
	}
	h.Release()
	h.Release()
	if got := s.Answers().Held; got != 0 {
		t.Fatalf("%d bytes held after the release", got)
	}
	done, busy := s.Take("alice")
	if busy != nil {
		t.Fatalf("alice's request after her read: %v", busy)
	}
	if _, busy := s.Take("alice"); busy == nil {
		t.Fatal("a second Release gave back a second place")
	}
	done()
}
