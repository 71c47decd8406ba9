// Package load generates the end-to-end benchmark's load: open-loop arrivals
// at a fixed rate, with latency measured from each message's scheduled send
// time (a slow server cannot hold back the arrivals that would have shown its
// queueing: no coordinated omission), and closed-loop saturation with a fixed
// number of workers. Every run is bounded in count and in time, and records
// into HDR histograms.
package load

import (
	"math"
	"time"
)

// Schedule spaces arrivals evenly at a fixed rate, in messages per second.
type Schedule struct {
	Rate float64
}

// At is the offset from the start of the run at which arrival i is due.
func (s Schedule) At(i int) time.Duration {
	if s.Rate <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(i) * float64(time.Second) / s.Rate))
}

// Count is the number of arrivals due in the first d of a run.
func (s Schedule) Count(d time.Duration) int {
	if s.Rate <= 0 || d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()*s.Rate - 1e-9))
}

// Due returns the indexes from next on that are due at offset elapsed, up to
// limit (exclusive): the dispatcher sends them all when it wakes up late.
func (s Schedule) Due(next, limit int, elapsed time.Duration) int {
	n := next
	for n < limit && s.At(n) <= elapsed {
		n++
	}
	return n
}
