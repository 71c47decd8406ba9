package sessions

import (
	"testing"
	"unsafe"
)

// TestSessionFootprint bounds the Go heap a tracked session costs (see
// BenchmarkSessionMemory): a session that has only started, and a task
// session that has run a while. make bench's memory scenario reads resident
// memory, about the heap times the collector's headroom, against a target
// of 1,024 bytes per session.
func TestSessionFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 10,000 sessions")
	}
	tests := []struct {
		name string
		grow func(testing.TB, *Decider, string)
		max  float64
	}{
		{"SessionStart", startedTask, 512},
		{"task after 6 messages", liveTask, 680},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sessionHeap(t, 10_000, tc.grow); got > tc.max {
				t.Errorf("%.0f B of heap per session, want at most %.0f", got, tc.max)
			}
		})
	}
}

// TestEntrySize pins a table entry to the 64-byte size class: what only
// waiting, flying or shared entries need lives apart (entry.more).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 64 {
		t.Errorf("an entry is %d bytes, want at most 64", n)
	}
}
