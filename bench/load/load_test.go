package load

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		i     int
		at    time.Duration
		d     time.Duration
		count int
	}{
		{"1000/s", 1000, 3, 3 * time.Millisecond, time.Second, 1000},
		{"200/s", 200, 1, 5 * time.Millisecond, 2500 * time.Millisecond, 500},
		{"fractional interval", 3, 1, 333333333, time.Second, 3},
		{"partial last interval counts", 10, 0, 0, 1050 * time.Millisecond, 11},
		{"zero rate", 0, 5, 0, time.Second, 0},
		{"zero duration", 100, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Schedule{Rate: tc.rate}
			if got := s.At(tc.i); got != tc.at {
				t.Errorf("At(%d) = %v, want %v", tc.i, got, tc.at)
			}
			if got := s.Count(tc.d); got != tc.count {
				t.Errorf("Count(%v) = %d, want %d", tc.d, got, tc.count)
			}
		})
	}
}

func TestScheduleDue(t *testing.T) {
	s := Schedule{Rate: 1000}
	tests := []struct {
		name              string
		next, limit, want int
		elapsed           time.Duration
	}{
		{"on time", 0, 100, 1, 0},
		{"late: everything due goes", 0, 100, 6, 5 * time.Millisecond},
		{"limit", 0, 4, 4, 5 * time.Millisecond},
		{"nothing due yet", 7, 100, 7, 6500 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Due(tc.next, tc.limit, tc.elapsed); got != tc.want {
				t.Errorf("Due(%d, %d, %v) = %d, want %d", tc.next, tc.limit, tc.elapsed, got, tc.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name          string
		latencies     []time.Duration
		errs          int
		window        time.Duration
		p50, p99, max float64 // µs, to three significant digits
		throughput    float64
	}{
		{"empty", nil, 0, time.Second, 0, 0, 0, 0},
		{"one to a hundred ms", func() []time.Duration {
			var l []time.Duration
			for i := 1; i <= 100; i++ {
				l = append(l, time.Duration(i)*time.Millisecond)
			}
			return l
		}(), 0, 10 * time.Second, 50000, 99000, 100000, 10},
		{"errors are counted, not timed", []time.Duration{time.Millisecond, time.Millisecond}, 3, time.Second, 1000, 1000, 1000, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResult()
			for _, l := range tc.latencies {
				r.record(l, 0, nil)
			}
			for range tc.errs {
				r.record(time.Nanosecond, 0, errors.New("refused"))
			}
			r.window = tc.window
			s := r.Summary()
			near := func(got, want float64) bool { return got == want || (got > want*0.999 && got < want*1.001) }
			if !near(s.P50, tc.p50) || !near(s.P99, tc.p99) || !near(s.Max, tc.max) || !near(s.Throughput, tc.throughput) {
				t.Errorf("p50 %v p99 %v max %v throughput %v, want %v %v %v %v", s.P50, s.P99, s.Max, s.Throughput, tc.p50, tc.p99, tc.max, tc.throughput)
			}
			if s.Errors != int64(tc.errs) || s.Count != int64(len(tc.latencies)) {
				t.Errorf("count %d errors %d", s.Count, s.Errors)
			}
			if tc.errs > 0 && s.FirstError != "refused" {
				t.Errorf("first error %q", s.FirstError)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	a, b := NewResult(), NewResult()
	a.record(time.Millisecond, 0, nil)
	a.window = time.Second
	b.record(3*time.Millisecond, 0, nil)
	b.record(0, 0, errors.New("x"))
	b.window = time.Second
	a.Merge(b)
	s := a.Summary()
	if s.Count != 2 || s.Errors != 1 || s.Throughput != 1 || s.Max < 2990 {
		t.Fatalf("merged %+v", s)
	}
}

func TestOpenSendsEveryArrivalAtItsTime(t *testing.T) {
	var sent atomic.Int64
	o := Open{Rate: 500, Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond}
	res := o.Run(context.Background(), func(ctx context.Context, i int) error {
		sent.Add(1)
		if i%10 == 0 {
			return errors.New("refused")
		}
		return nil
	})
	s := res.Summary()
	if got := sent.Load(); got != int64(o.Count()) || o.Count() != 125 {
		t.Fatalf("sent %d, Count %d, want 125", got, o.Count())
	}
	if s.Count+s.Errors != 100 || s.Errors != 10 {
		t.Fatalf("measured %d ok + %d errors, want 90 + 10", s.Count, s.Errors)
	}
}

// TestOpenIsNotCoordinated checks that a stalled answer does not hold back
// the arrivals behind it, and that their latency counts from their
// scheduled time.
func TestOpenIsNotCoordinated(t *testing.T) {
	o := Open{Rate: 1000, Duration: 100 * time.Millisecond}
	stall := make(chan struct{})
	res := o.Run(context.Background(), func(ctx context.Context, i int) error {
		if i == 0 {
			<-stall // the first message hangs for 50 ms
			return nil
		}
		if i == 50 {
			close(stall)
		}
		return nil
	})
	s := res.Summary()
	if s.Count != 100 {
		t.Fatalf("answered %d, want 100", s.Count)
	}
	if s.Max < 45_000 {
		t.Fatalf("max %v µs: the stalled message's latency was lost", s.Max)
	}
	if s.P90 > 35_000 {
		t.Fatalf("p90 %v µs: arrivals waited for the stalled one", s.P90)
	}
}

func TestClosedIsBounded(t *testing.T) {
	tests := []struct {
		name     string
		max      int
		duration time.Duration
		wantMax  int64
	}{
		{"by count", 50, 10 * time.Second, 50},
		{"by time", 1 << 30, 100 * time.Millisecond, 1 << 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			start := time.Now()
			res := Closed{Workers: 4, Max: tc.max, Duration: tc.duration}.Run(context.Background(), func(ctx context.Context, i int) error {
				calls.Add(1)
				time.Sleep(time.Millisecond)
				return nil
			})
			if calls.Load() > tc.wantMax || time.Since(start) > tc.duration+time.Second {
				t.Fatalf("%d calls in %v", calls.Load(), time.Since(start))
			}
			if s := res.Summary(); s.Count == 0 || s.Throughput <= 0 {
				t.Fatalf("nothing measured: %+v", s)
			}
		})
	}
}

// TestScheduleJitter: a jittered schedule keeps the rate and the count,
// keeps each arrival in its own period and in order, is the same for the
// same Jitter, and is not evenly spaced: its arrivals fall at every phase of
// a period (a tick), where evenly spaced ones keep one.
func TestScheduleJitter(t *testing.T) {
	even, jit := Schedule{Rate: 500}, Schedule{Rate: 500, Jitter: 12345}
	period := time.Second / 500
	if even.Count(time.Second) != jit.Count(time.Second) {
		t.Fatalf("count %d, want %d", jit.Count(time.Second), even.Count(time.Second))
	}
	const tick = 4 * time.Millisecond // the kernel's tick at 250 Hz
	phases := map[time.Duration]bool{}
	evenPhases := map[time.Duration]bool{}
	for i := range 1000 {
		at := jit.At(i)
		if at < even.At(i) || at > even.At(i)+period {
			t.Fatalf("arrival %d at %v, outside its period [%v, %v]", i, at, even.At(i), even.At(i)+period)
		}
		if i > 0 && at < jit.At(i-1) {
			t.Fatalf("arrival %d at %v before arrival %d at %v", i, at, i-1, jit.At(i-1))
		}
		if at != (Schedule{Rate: 500, Jitter: 12345}).At(i) {
			t.Fatalf("arrival %d differs for the same Jitter", i)
		}
		phases[at%tick/(tick/8)] = true
		evenPhases[even.At(i)%tick/(tick/8)] = true
	}
	if len(phases) != 8 || len(evenPhases) != 2 {
		t.Errorf("arrivals fall in %d of 8 eighths of a tick (evenly spaced: %d), want 8 (2)", len(phases), len(evenPhases))
	}
}
