// Package gc sets Go's garbage collector for a proxy: a small live heap (a
// few MiB of sessions and caches) and a high allocation rate (every message
// allocates its decoding and its forwarding). With GOGC alone the heap goal
// is twice the live heap, so such a process collects every few MiB it
// allocates, ten times a second or more at a few thousand messages a second,
// and on one core every mark phase takes the core from the requests in
// flight: the latency tail. A floor under the heap goal (MinHeapBytes) lets
// the heap grow to the floor before a collection, with no ballast: the
// GOGC percentage is raised after every collection so that the goal is the
// floor while the live heap is small, and GOGC's own once it is large.
package gc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Config is the collector's part of the configuration.
type Config struct {
	// MinHeapBytes is the floor under the heap goal: no collection starts
	// before the heap reaches it. 0 means DefaultMinHeapBytes; -1 turns
	// the floor off (GOGC alone).
	MinHeapBytes int64 `yaml:"min_heap_bytes" json:"min_heap_bytes"`
	// Percent is GOGC above the floor: how far the heap grows over the
	// live heap before a collection. 0 means the GOGC environment
	// variable's value (100 by default); -1 turns collection off but for
	// the memory limit.
	Percent int `yaml:"percent" json:"percent"`
	// MemoryLimitBytes is the runtime's soft memory limit (GOMEMLIMIT):
	// near it the collector runs whatever the floor. 0 leaves the
	// GOMEMLIMIT environment variable's value (no limit by default).
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes" json:"memory_limit_bytes"`
}

// DefaultMinHeapBytes is the default floor: 64 MiB.
const DefaultMinHeapBytes = 64 << 20

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.MinHeapBytes < -1 {
		errs = append(errs, fmt.Errorf("gc.min_heap_bytes: %d; give a size, 0 for the default or -1 for no floor", c.MinHeapBytes))
	}
	if c.Percent < -1 {
		errs = append(errs, fmt.Errorf("gc.percent: %d; give a percentage, 0 for GOGC's or -1 for off", c.Percent))
	}
	if c.MemoryLimitBytes < 0 {
		errs = append(errs, fmt.Errorf("gc.memory_limit_bytes: %d is negative", c.MemoryLimitBytes))
	}
	if c.MemoryLimitBytes > 0 && c.floor() > c.MemoryLimitBytes {
		errs = append(errs, fmt.Errorf("gc.min_heap_bytes (%d) is above gc.memory_limit_bytes (%d)", c.floor(), c.MemoryLimitBytes))
	}
	return errors.Join(errs...)
}

// floor is the floor in bytes, 0 for none.
func (c Config) floor() int64 {
	switch c.MinHeapBytes {
	case 0:
		return DefaultMinHeapBytes
	case -1:
		return 0
	}
	return c.MinHeapBytes
}

// Describe says in a line what cfg does to the collector (warden check).
func Describe(cfg Config) string {
	s := "no floor under the heap goal"
	if f := cfg.floor(); f > 0 {
		s = fmt.Sprintf("no collection before the heap reaches %d MiB", f>>20)
	}
	switch cfg.Percent {
	case 0:
		s += "; GOGC from the environment above it"
	case -1:
		s += "; collection off but for the memory limit"
	default:
		s += fmt.Sprintf("; GOGC %d above it", cfg.Percent)
	}
	if cfg.MemoryLimitBytes > 0 {
		s += fmt.Sprintf("; memory limit %d MiB", cfg.MemoryLimitBytes>>20)
	}
	return s
}

// Tuner applies a Config to the runtime and keeps the floor while it runs.
type Tuner struct {
	floor   int64
	percent int // GOGC above the floor; -1 off
	limit   int64
	samples []metrics.Sample
	tuned   atomic.Int64 // the GOGC percentage last set

	mu      sync.Mutex // orders tune after a collection with the end of Run
	stopped bool
}

// New prepares a Tuner; it changes nothing until Run.
func New(cfg Config) (*Tuner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Tuner{floor: cfg.floor(), percent: cfg.Percent, limit: cfg.MemoryLimitBytes}
	t.samples = []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	return t, nil
}

// Run sets the memory limit and the GOGC percentage, and after every
// collection sets the percentage again for the live heap it left, until
// ctx ends; then it puts back what it found.
func (t *Tuner) Run(ctx context.Context) error {
	t.mu.Lock()
	prevPercent := debug.SetGCPercent(100) // GOGC's value unless changed
	if t.percent == 0 {
		t.percent = prevPercent
	}
	debug.SetGCPercent(t.percent)
	t.tuned.Store(int64(t.percent))
	prevLimit := debug.SetMemoryLimit(-1)
	if t.limit > 0 {
		debug.SetMemoryLimit(t.limit)
	}
	if t.floor > 0 && t.percent >= 0 {
		t.tune()
		afterEachGC(func() bool {
			t.mu.Lock()
			defer t.mu.Unlock()
			if !t.stopped {
				t.tune()
			}
			return !t.stopped
		})
	}
	t.mu.Unlock()
	<-ctx.Done()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(prevPercent)
	debug.SetMemoryLimit(prevLimit)
	return nil
}

// Percent returns the GOGC percentage the Tuner set last (its own when the
// floor is off): for metrics and tests.
func (t *Tuner) Percent() int64 { return t.tuned.Load() }

// tune sets the percentage for the live heap the last collection left;
// t.mu is held.
func (t *Tuner) tune() {
	metrics.Read(t.samples)
	var live, roots uint64
	if s := t.samples[0].Value; s.Kind() == metrics.KindUint64 {
		live = s.Uint64()
	}
	for _, s := range t.samples[1:] {
		if s.Value.Kind() == metrics.KindUint64 {
			roots += s.Value.Uint64()
		}
	}
	p := PercentFor(t.floor, t.percent, live, roots)
	if int64(p) != t.tuned.Load() {
		debug.SetGCPercent(p)
		t.tuned.Store(int64(p))
	}
}

// heapMinimum is the runtime's smallest heap goal at GOGC=100 (4 MiB); it
// scales with GOGC.
const heapMinimum = 4 << 20

// PercentFor is the GOGC percentage that puts the heap goal at floor for a
// live heap of live bytes (roots: the stacks and globals the runtime counts
// in the goal), never below percent. The runtime's goal is the larger of
// live + (live+roots)·GOGC/100 and 4 MiB·GOGC/100, so the percentage is at
// most the one that puts the second at the floor.
func PercentFor(floor int64, percent int, live, roots uint64) int {
	if floor <= 0 || percent < 0 || uint64(floor) <= live {
		return percent
	}
	most := floor * 100 / heapMinimum
	p := most
	if base := live + roots; base > 0 {
		p = min(most, int64((uint64(floor)-live)*100/base))
	}
	p = max(p, int64(percent))
	return int(min(p, math.MaxInt32))
}

// sentinel is garbage whose finalizer tells that a collection ran; it holds
// a pointer so that it is never a tiny allocation (whose finalizers may
// never run).
type sentinel struct {
	_ *int
	_ [8]byte
}

// afterEachGC calls f after every collection while f returns true.
func afterEachGC(f func() bool) {
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		if f() {
			afterEachGC(f)
		}
	})
}
