package macp

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestEchoQueue: envelopes leave the queue when due (expire) or, from the
// oldest, once no longer awaited (trim); the next end is the oldest
// queued's; an id sent again waits again, its older entry expiring at its
// own end as its timer did (release by id); the room a long run of
// envelopes took is reused, not grown (the queue can grow only while its
// oldest waits, to what echoTimeout's worth of envelopes holds).
func TestEchoQueue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		push    string // an id pushed, due at `at`
		at      int
		first   bool     // push's report
		settle  []string // ids no longer awaited, then trim
		expire  int      // expire at this second (-1: none)
		expired []string
		next    int // the next end's second (-1: none)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order, echoed", []step{
			{push: "a", at: 10, first: true, expire: -1, next: 10},
			{push: "b", at: 11, expire: -1, next: 10},
			{settle: []string{"a"}, expire: -1, next: 11},
			{settle: []string{"b"}, expire: -1, next: -1},
			{push: "c", at: 12, first: true, expire: -1, next: 12},
		}},
		{"echoed out of order", []step{
			{push: "a", at: 10, first: true, expire: -1, next: 10},
			{push: "b", at: 11, expire: -1, next: 10},
			{settle: []string{"b"}, expire: -1, next: 10},  // a still waits
			{expire: 10, expired: []string{"a"}, next: 11}, // b's entry stays until trimmed or due
			{expire: 11, expired: []string{"b"}, next: -1},
		}},
		{"none echoed", []step{
			{push: "a", at: 10, first: true, expire: -1, next: 10},
			{push: "b", at: 10, expire: -1, next: 10},
			{push: "c", at: 12, expire: -1, next: 10},
			{expire: 9, next: 10},
			{expire: 10, expired: []string{"a", "b"}, next: 12},
			{expire: 20, expired: []string{"c"}, next: -1},
			{push: "d", at: 30, first: true, expire: -1, next: 30},
		}},
		{"an id sent again", []step{
			{push: "a", at: 10, first: true, expire: -1, next: 10},
			{push: "a", at: 11, expire: -1, next: 10},
			{expire: 10, expired: []string{"a"}, next: 11},
			{expire: 11, expired: []string{"a"}, next: -1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q echoQueue
			awaited := map[string]bool{}
			for i, s := range tc.steps {
				if s.push != "" {
					awaited[s.push] = true
					if got := q.push(s.push, at(s.at)); got != s.first {
						t.Fatalf("step %d: push reported first %v, want %v", i, got, s.first)
					}
				}
				for _, id := range s.settle {
					delete(awaited, id)
				}
				if s.settle != nil {
					q.trim(func(id string) bool { return awaited[id] })
				}
				if s.expire >= 0 {
					if got := q.expire(at(s.expire), nil); !slices.Equal(got, s.expired) {
						t.Fatalf("step %d: expired %v, want %v", i, got, s.expired)
					}
				}
				due, ok := q.next()
				if want := s.next >= 0; ok != want || ok && !due.Equal(at(s.next)) {
					t.Fatalf("step %d: next %v %v, want second %d", i, due, ok, s.next)
				}
			}
		})
	}
	t.Run("room reused", func(t *testing.T) {
		// Each envelope is echoed after the next was sent: the queue never
		// empties, and the room before its oldest is taken back.
		var q echoQueue
		for i := range 10000 {
			q.push(fmt.Sprint(i), at(1))
			prev := fmt.Sprint(i - 1)
			q.trim(func(id string) bool { return id != prev })
		}
		if c := cap(q.waits); c > 256 {
			t.Errorf("the queue holds room for %d after 10000 envelopes, two at a time, want it reused", c)
		}
		if n := len(q.waits) - q.head; n != 1 {
			t.Errorf("%d queued, want 1", n)
		}
	})
}
