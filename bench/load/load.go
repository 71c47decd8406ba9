package load

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Func sends the i-th message of a run and returns once it is answered; an
// error is a failed message (transport error or refusal).
type Func func(ctx context.Context, i int) error

// Open is an open-loop run: arrivals at a fixed rate, each sent on its own
// goroutine whatever the state of the earlier ones, latency measured from its
// scheduled time.
type Open struct {
	// Rate is the arrival rate, in messages per second.
	Rate float64
	// Warmup is sent at the same rate before the measured part and not
	// recorded.
	Warmup time.Duration
	// Duration is the measured part.
	Duration time.Duration
	// Timeout bounds each message (default 5 s).
	Timeout time.Duration
	// MaxInFlight bounds the messages in flight; an arrival beyond it is
	// dropped and counted (default 10,000).
	MaxInFlight int
	// Jitter, when not 0, moves each arrival by a pseudo-random part of its
	// period (Schedule.Jitter). Evenly spaced arrivals, sent precisely,
	// keep a fixed phase to the kernel's 250 Hz tick (500/s is one arrival
	// every 2 ms, half a tick), and a CPU profile samples a thread only when
	// a tick finds it running: a hop whose work for each arrival ends
	// between two ticks is almost never sampled (17 samples for 0.16 cores
	// over 28 s in the 2026-11-27 bench). CPU profiles run with it.
	Jitter uint64
}

// Count is the number of messages the run sends, warm-up included.
func (o Open) Count() int {
	s := Schedule{Rate: o.Rate}
	return s.Count(o.Warmup) + s.Count(o.Duration)
}

// Run sends o.Count() messages with do and waits for the last answer (or its
// timeout).
func (o Open) Run(ctx context.Context, do Func) *Result {
	timeout := orDefault(o.Timeout, 5*time.Second)
	maxInFlight := int64(o.MaxInFlight)
	if maxInFlight <= 0 {
		maxInFlight = 10_000
	}
	sched := Schedule{Rate: o.Rate, Jitter: o.Jitter}
	warm := sched.Count(o.Warmup)
	n := o.Count()
	res := NewResult()
	ctx, cancel := context.WithTimeout(ctx, o.Warmup+o.Duration+timeout+time.Second)
	defer cancel()

	var wg sync.WaitGroup
	var inFlight atomic.Int64
	var lastDone atomic.Int64
	runtime.LockOSThread() // the dispatcher sleeps on its own thread, precisely
	defer runtime.UnlockOSThread()
	setTimerSlack()
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; {
		if wait := sched.At(i) - time.Since(start); wait > 0 {
			sleep(wait)
			continue
		}
		for due := sched.Due(i, n, time.Since(start)); i < due; i++ {
			if i < warm && inFlight.Load() >= maxInFlight {
				continue
			}
			if inFlight.Load() >= maxInFlight {
				res.drop()
				continue
			}
			inFlight.Add(1)
			wg.Add(1)
			go func(i int, scheduled time.Time) {
				defer wg.Done()
				defer inFlight.Add(-1)
				sent := time.Now()
				mctx, mcancel := context.WithTimeout(ctx, timeout)
				err := do(mctx, i)
				mcancel()
				done := time.Now()
				if i >= warm {
					res.record(done.Sub(scheduled), sent.Sub(scheduled), err)
					storeMax(&lastDone, done.Sub(start))
				}
			}(i, start.Add(sched.At(i)))
		}
	}
	wg.Wait()
	// The measured window runs from the first measured arrival to the later of
	// the last scheduled one and the last answer.
	res.window = max(o.Duration, time.Duration(lastDone.Load())-sched.At(warm))
	return res
}

// Closed is a closed-loop run: Workers goroutines each send a message as soon
// as the previous one is answered, for throughput at saturation.
type Closed struct {
	// Workers is the number of messages in flight.
	Workers int
	// Max bounds the messages sent, warm-up included.
	Max int
	// Warmup is run first and not recorded.
	Warmup time.Duration
	// Duration is the measured part.
	Duration time.Duration
	// Timeout bounds each message (default 5 s).
	Timeout time.Duration
}

// Run runs the loop until Duration has passed or Max messages were sent.
func (c Closed) Run(ctx context.Context, do Func) *Result {
	timeout := orDefault(c.Timeout, 5*time.Second)
	res := NewResult()
	ctx, cancel := context.WithTimeout(ctx, c.Warmup+c.Duration+timeout+time.Second)
	defer cancel()
	start := time.Now()
	warmEnd, end := start.Add(c.Warmup), start.Add(c.Warmup+c.Duration)
	var next atomic.Int64
	var lastDone atomic.Int64
	var wg sync.WaitGroup
	for range max(c.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				t0 := time.Now()
				if i >= c.Max || !t0.Before(end) {
					return
				}
				mctx, mcancel := context.WithTimeout(ctx, timeout)
				err := do(mctx, i)
				mcancel()
				t1 := time.Now()
				if !t0.Before(warmEnd) && !t1.After(end) {
					res.record(t1.Sub(t0), -1, err)
					storeMax(&lastDone, t1.Sub(warmEnd))
				}
			}
		}()
	}
	wg.Wait()
	res.window = c.Duration
	if last := time.Duration(lastDone.Load()); last > 0 && last < c.Duration {
		res.window = last // Max was reached before the end
	}
	return res
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func storeMax(a *atomic.Int64, d time.Duration) {
	for {
		old := a.Load()
		if int64(d) <= old || a.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}
