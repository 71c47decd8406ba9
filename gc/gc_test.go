package gc

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		floor       int64
		percent     int
		live, roots uint64
		want        int
	}{
		{"no collection yet", 64 * mib, 100, 0, 0, 1600},
		{"tiny live heap: the runtime's minimum heap at the floor", 64 * mib, 100, 1 * mib, 0, 1600},
		{"small live heap: its goal at the floor", 64 * mib, 100, 16 * mib, 0, 300},
		{"roots count in the goal", 64 * mib, 100, 16 * mib, 16 * mib, 150},
		{"live heap past half the floor: GOGC's own", 64 * mib, 100, 40 * mib, 0, 100},
		{"live heap over the floor", 64 * mib, 100, 80 * mib, 0, 100},
		{"a higher GOGC wins", 64 * mib, 400, 16 * mib, 0, 400},
		{"no floor", 0, 100, 1 * mib, 0, 100},
		{"collection off", 64 * mib, -1, 1 * mib, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PercentFor(tc.floor, tc.percent, tc.live, tc.roots); got != tc.want {
				t.Errorf("PercentFor(%d, %d, %d, %d) = %d, want %d", tc.floor, tc.percent, tc.live, tc.roots, got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{}, true},
		{"no floor, GOGC off, a limit", Config{MinHeapBytes: -1, Percent: -1, MemoryLimitBytes: 1 << 30}, true},
		{"negative floor", Config{MinHeapBytes: -2}, false},
		{"negative percent", Config{Percent: -5}, false},
		{"negative limit", Config{MemoryLimitBytes: -1}, false},
		{"limit below the default floor", Config{MemoryLimitBytes: 32 << 20}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// collections allocates n bytes of garbage in 4 KiB pieces and returns how
// many collections ran meanwhile.
func collections(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var keep []byte
	for range n / 4096 {
		keep = make([]byte, 4096)
	}
	runtime.KeepAlive(keep)
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

// heapGoal is the runtime's current heap goal.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTunerFloor runs the Tuner with a 256 MiB floor and without one: with
// the floor, the heap goal after a collection is the floor and allocating
// 96 MiB collects at most a few times; without, the goal stays near the
// runtime's few MiB and the same allocation collects more often. Run puts
// GOGC back when it ends. The goal is read, not timed: how many collections
// a loaded machine fits in 96 MiB varies (5 to 24 without the floor were
// seen), so the count is only compared one way.
func TestTunerFloor(t *testing.T) {
	const (
		alloc = 96 << 20
		floor = 256 << 20
	)
	run := func(cfg Config) (goal uint64, n uint32) {
		tu, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tu.Run(ctx) }()
		deadline := time.Now().Add(5 * time.Second)
		for tu.Percent() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		runtime.GC()
		// The Tuner sets GOGC after the collection, on the finalizer's
		// goroutine: wait for the goal to settle (up to 5 s).
		goal = heapGoal()
		for cfg.MinHeapBytes > 0 && goal < floor*9/10 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			goal = heapGoal()
		}
		n = collections(alloc)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return goal, n
	}
	before := debug.SetGCPercent(100)
	debug.SetGCPercent(before)
	withGoal, with := run(Config{MinHeapBytes: floor, Percent: 100})
	withoutGoal, without := run(Config{MinHeapBytes: -1, Percent: 100})
	t.Logf("heap goal %d MiB with a %d MiB floor, %d MiB without; collections while allocating %d MiB: %d with, %d without",
		withGoal>>20, floor>>20, withoutGoal>>20, alloc>>20, with, without)
	if withGoal < floor*9/10 {
		t.Errorf("heap goal with a %d MiB floor: %d MiB, want the floor", floor>>20, withGoal>>20)
	}
	if withoutGoal >= 64<<20 {
		t.Errorf("heap goal without a floor: %d MiB, want the runtime's few MiB", withoutGoal>>20)
	}
	if with > 3 || without <= with {
		t.Errorf("collections: %d with the floor, %d without; want at most 3 with, and more without", with, without)
	}
	if got := debug.SetGCPercent(before); got != before {
		t.Errorf("GOGC after Run: %d, want %d", got, before)
	}
}
