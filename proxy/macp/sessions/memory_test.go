package sessions

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/agentwarden/warden/proxy"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
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
		{"SessionStart", startedTask, 384},
		{"task after 6 messages", liveTask, 560},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := sessionHeap(t, 10_000, tc.grow)
			t.Logf("%.0f B of heap per session", got)
			if got > tc.max {
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

// TestSharedParticipants checks that sessions started with the same
// participant list share one copy of it, and only those: a list that differs
// in one name, in their order or in where one name ends keeps its own.
func TestSharedParticipants(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{}, nil)
	start := func(n int, parts ...string) []string {
		sid := sessionID(n)
		d, err := e.Enforce(context.Background(), req(env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: parts, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000,
		}))))
		if err != nil || !d.Allow {
			t.Fatalf("SessionStart %q: %v %+v", parts, err, d)
		}
		d.Settle(true)
		got := e.table.entries[sid].state.Load().Participants
		if !slices.Equal(got, parts) {
			t.Fatalf("participants %q, want %q", got, parts)
		}
		return got
	}
	same := func(a, b []string) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }
	first := start(1, planner, worker, other)
	tests := []struct {
		name  string
		parts []string
		share bool
	}{
		{"same list", []string{planner, worker, other}, true},
		{"other order", []string{worker, planner, other}, false},
		{"one name fewer", []string{planner, worker}, false},
		{"names split elsewhere", []string{planner + worker[:3], worker[3:], other}, false},
	}
	long := func() []string { // a list too long to keep: never shared
		l := make([]string, 40)
		for i := range l {
			l[i] = fmt.Sprintf("agent://participant-%d", i)
		}
		return l
	}
	a, b := start(2, long()...), start(3, long()...)
	if same(a, b) {
		t.Errorf("a list of %d names is shared: what the table keeps must stay bounded", len(a))
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := same(start(10+i, tc.parts...), first); got != tc.share {
				t.Errorf("shares the first session's list: %v, want %v", got, tc.share)
			}
		})
	}
}
