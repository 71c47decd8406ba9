package admission

import "testing"

// TestStartsDeadline: a start counts until its session ends in the table,
// however long that takes (a suspended session's TTL is paused); one the
// table no longer holds (evicted) counts until its deadline.
func TestStartsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		now         int64
		ended, held bool
		full        bool
	}{
		{"held, open", 1_000, false, true, true},
		{"held, past the deadline (suspended)", 60_000, false, true, true},
		{"held, ended", 1_000, true, true, false},
		{"evicted, before the deadline", 6_000, false, false, true},
		{"evicted, after the deadline", 6_001, false, false, false},
	} {
		s := newStarts(1)
		s.started("p", "a", deadline(1_000, 5_000))
		ended := func(sid string, now int64) (bool, bool) {
			if sid != "a" || now != tc.now {
				t.Fatalf("%s: asked about %s at %d", tc.name, sid, now)
			}
			return tc.ended, tc.held
		}
		if got := s.full("p", tc.now, ended); got != tc.full {
			t.Errorf("%s: full = %v, want %v", tc.name, got, tc.full)
		}
	}
}

// TestStartsRescan: a principal at its cap has its sessions asked about at
// most once per rescan (a flood of starts past the cap costs one scan of the
// table per rescan); one ended by a message allowed on it is forgotten at
// once.
func TestStartsRescan(t *testing.T) {
	s := newStarts(1)
	s.started("p", "a", deadline(1_000, 60_000))
	asked, over := 0, false
	ended := func(string, int64) (bool, bool) { asked++; return over, true }
	for _, tc := range []struct {
		name  string
		now   int64
		over  bool
		full  bool
		asked int
	}{
		{"at the cap", 1_000, false, true, 1},
		{"ended, within the rescan", 1_050, true, true, 1},
		{"ended, past the rescan", 1_100, true, false, 2},
	} {
		over = tc.over
		if got := s.full("p", tc.now, ended); got != tc.full || asked != tc.asked {
			t.Errorf("%s: full %v after %d questions, want %v after %d", tc.name, got, asked, tc.full, tc.asked)
		}
	}
	s.started("p", "b", deadline(1_200, 60_000))
	over = false
	if !s.full("p", 1_200, ended) {
		t.Fatal("not full with b started")
	}
	s.decided("b", 1_210, func(string, int64) (bool, bool) { return true, true })
	if s.full("p", 1_220, ended) {
		t.Error("still full after a message ended b")
	}
}
