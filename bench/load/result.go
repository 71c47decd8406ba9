package load

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds, in nanoseconds: 100 ns to 60 s at three significant
// digits.
const (
	lowest  = 100
	highest = int64(60 * time.Second)
	digits  = 3
)

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(lowest, highest, digits) }

// Result is what one run (or several merged runs) measured: the latency of
// every answered message after the warm-up, how late the generator sent
// (open loop only), the counts, and the measured window throughput is
// computed over.
type Result struct {
	mu      sync.Mutex
	latency *hdrhistogram.Histogram
	lag     *hdrhistogram.Histogram
	ok      int64
	errors  int64
	dropped int64
	window  time.Duration
	first   string
}

// NewResult returns an empty result.
func NewResult() *Result {
	return &Result{latency: newHistogram(), lag: newHistogram()}
}

// record adds one measured message: its latency and, in an open loop, how
// long after its scheduled time it was sent.
func (r *Result) record(latency, lag time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lag >= 0 {
		_ = r.lag.RecordValue(clamp(lag))
	}
	if err != nil {
		r.errors++
		if r.first == "" {
			r.first = err.Error()
		}
		return
	}
	r.ok++
	_ = r.latency.RecordValue(clamp(latency))
}

// drop counts a message the generator did not send because too many were in
// flight (the target is overloaded).
func (r *Result) drop() {
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
}

func clamp(d time.Duration) int64 {
	switch v := int64(d); {
	case v < lowest:
		return lowest
	case v > highest:
		return highest
	default:
		return v
	}
}

// Merge adds o to r: histograms and counts add, and so do the windows (the
// runs are sequential), so the throughput of the merge is the overall one.
func (r *Result) Merge(o *Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency.Merge(o.latency)
	r.lag.Merge(o.lag)
	r.ok += o.ok
	r.errors += o.errors
	r.dropped += o.dropped
	r.window += o.window
	if r.first == "" {
		r.first = o.first
	}
}

// Point is one percentile of a latency distribution, in microseconds.
type Point struct {
	Percentile float64 `json:"percentile"`
	Micros     float64 `json:"us"`
}

// curve lists the percentiles the chart draws.
var curve = []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100}

// Summary is a result reduced to the figures the report uses; latencies are
// in microseconds.
type Summary struct {
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	Dropped    int64   `json:"dropped"`
	Throughput float64 `json:"throughput_per_s"`
	Mean       float64 `json:"mean_us"`
	P50        float64 `json:"p50_us"`
	P90        float64 `json:"p90_us"`
	P99        float64 `json:"p99_us"`
	P999       float64 `json:"p999_us"`
	Max        float64 `json:"max_us"`
	// LagP99 is how late the generator sent, at the 99th percentile (open
	// loop): a large value means the generator, not the target, fell behind.
	LagP99     float64 `json:"generator_lag_p99_us"`
	FirstError string  `json:"first_error,omitempty"`
	Curve      []Point `json:"percentiles,omitempty"`
}

// Summary reduces the result.
func (r *Result) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	us := func(v int64) float64 { return float64(v) / 1e3 }
	s := Summary{Count: r.ok, Errors: r.errors, Dropped: r.dropped, FirstError: r.first}
	if r.window > 0 {
		s.Throughput = float64(r.ok) / r.window.Seconds()
	}
	if r.latency.TotalCount() > 0 {
		s.Mean = r.latency.Mean() / 1e3
		s.P50 = us(r.latency.ValueAtQuantile(50))
		s.P90 = us(r.latency.ValueAtQuantile(90))
		s.P99 = us(r.latency.ValueAtQuantile(99))
		s.P999 = us(r.latency.ValueAtQuantile(99.9))
		s.Max = us(r.latency.Max())
		for _, p := range curve {
			s.Curve = append(s.Curve, Point{Percentile: p, Micros: us(r.latency.ValueAtQuantile(p))})
		}
	}
	if r.lag.TotalCount() > 0 {
		s.LagP99 = us(r.lag.ValueAtQuantile(99))
	}
	return s
}
