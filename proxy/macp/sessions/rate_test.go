package sessions

import (
	"testing"
	"time"

	"github.com/agentwarden/warden/rules"
)

// TestRateWindow: a sender's messages let through in the last minute, as
// the runtime counts them: refused at the limit, free again once the oldest
// is more than a minute old (the runtime drops an instant only past the
// window), per sender, and no bound at 0.
func TestRateWindow(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	rows := []struct {
		name   string
		limit  int
		sends  []time.Duration // instants of a's messages let through
		sender string
		at     time.Duration
		want   rules.Code
	}{
		{"under the limit", 3, []time.Duration{0, time.Second}, "a", 2 * time.Second, ""},
		{"at the limit", 3, []time.Duration{0, time.Second, 2 * time.Second}, "a", 3 * time.Second, rules.CodeRateLimited},
		{"the oldest exactly a minute old still counts", 2, []time.Duration{0, time.Second}, "a", time.Minute, rules.CodeRateLimited},
		{"the oldest past the minute", 2, []time.Duration{0, time.Second}, "a", time.Minute + time.Millisecond, ""},
		{"another sender", 2, []time.Duration{0, time.Second}, "b", 2 * time.Second, ""},
		{"no bound", 0, []time.Duration{0, 0, 0}, "a", 0, ""},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			w := newRateWindow(tc.limit, "test")
			for _, d := range tc.sends {
				w.add("a", t0.Add(d))
			}
			if got := w.full(tc.sender, t0.Add(tc.at)).Code; got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestRateWindowSweep: a sender idle for a minute leaves the window's map at
// the next sweep.
func TestRateWindowSweep(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	w := newRateWindow(10, "test")
	w.add("idle", t0)
	for i := range sweepEvery {
		w.add("busy", t0.Add(2*time.Minute+time.Duration(i)))
	}
	if _, ok := w.events["idle"]; ok || len(w.events) != 1 {
		t.Errorf("senders held %d, idle kept %v", len(w.events), ok)
	}
}
