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
// With Jitter (not 0) each arrival moves later by a pseudo-random part of
// its period, drawn from Jitter and its index: the same rate and count, no
// longer in step with anything periodic on the machine, such as the
// kernel's tick (see Open.Jitter).
type Schedule struct {
	Rate   float64
	Jitter uint64
}

// At is the offset from the start of the run at which arrival i is due;
// it never decreases with i.
func (s Schedule) At(i int) time.Duration {
	if s.Rate <= 0 {
		return 0
	}
	at := float64(i)
	if s.Jitter != 0 {
		// [0, 1) from the top 53 bits: arrival i stays in its own period
		at += float64(splitmix(s.Jitter+uint64(i))>>11) / (1 << 53)
	}
	return time.Duration(math.Round(at * float64(time.Second) / s.Rate))
}

// splitmix is SplitMix64's output function: a well-spread hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
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
