package sessions

import (
	"slices"
	"testing"
)

// TestTableOrder checks the table's eviction order: terminal sessions
// first, then the least recently used live one (when live ones may go), a
// lookup making a session the most recently used.
func TestTableOrder(t *testing.T) {
	tb, err := newTable(3, 0, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	add := func(id string) *entry {
		t.Helper()
		e, err := tb.lookup(id, 0, true)
		if err != nil || e == nil {
			t.Fatalf("add %s: %v", id, err)
		}
		return e
	}
	held := func() []string {
		var ids []string
		for id := range tb.entries {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	a, _, _ := add("a"), add("b"), add("c")
	add("a") // a is now the most recently used: b is the least
	add("d")
	if got := held(); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Fatalf("after d: %q, want the least recently used (b) evicted", got)
	}
	tb.mu.Lock()
	tb.live.remove(a)
	tb.done.push(a)
	a.done = true
	tb.mu.Unlock()
	add("e")
	if got := held(); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("after e: %q, want the terminal session (a) evicted first", got)
	}
	if tb.len() != 3 || tb.live.n+tb.done.n != 3 {
		t.Fatalf("len %d, lists %d + %d", tb.len(), tb.live.n, tb.done.n)
	}
	if _, err := newTable(0, 0, false, nil); err == nil {
		t.Error("a table of 0 entries was made")
	}
}

// BenchmarkTableEvict adds a session to a full table of 100,000 live ones
// that may be evicted: each op evicts the least recently used.
func BenchmarkTableEvict(b *testing.B) {
	const n = 100_000
	tb, ids := benchTable(b, n)
	b.ReportAllocs()
	i := n
	for b.Loop() {
		if _, err := tb.lookup(ids[i%len(ids)], 0, true); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// benchTable returns a table of n live sessions that may be evicted, and
// ids: the n it holds, then n it does not.
func benchTable(b *testing.B, n int) (*table, []string) {
	tb, err := newTable(n, 0, true, nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 2*n)
	for i := range ids {
		ids[i] = sessionID(i)
	}
	for _, id := range ids[:n] {
		if _, err := tb.lookup(id, 0, true); err != nil {
			b.Fatal(err)
		}
	}
	return tb, ids
}

// benchSessions is the table size of the end-to-end handoff run whose
// profile put a cold lookup at 2.3 µs (docs/performance.md, issue 28).
const benchSessions = 30_000

// BenchmarkTableHit looks sessions up in a table of 30,000, in an order
// that makes each one cold (a stride through them).
func BenchmarkTableHit(b *testing.B) {
	tb, ids := benchTable(b, benchSessions)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if e, _ := tb.lookup(ids[i%benchSessions], 0, false); e == nil {
			b.Fatal("miss")
		}
		i += 7919 // a prime: every session in turn, far apart
	}
}

// BenchmarkTableInsertEvict adds a new session to a full table of 30,000:
// each op evicts one.
func BenchmarkTableInsertEvict(b *testing.B) {
	tb, ids := benchTable(b, benchSessions)
	b.ReportAllocs()
	i := benchSessions
	for b.Loop() {
		if _, err := tb.lookup(ids[i%len(ids)], 0, true); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkTableMixed is three cold lookups of held sessions per new
// session in a full table of 30,000 (each new one evicts one).
func BenchmarkTableMixed(b *testing.B) {
	tb, ids := benchTable(b, benchSessions)
	b.ReportAllocs()
	i, next := 0, benchSessions
	for b.Loop() {
		id := ids[next%len(ids)]
		if i%4 != 3 {
			// one of the last 30,000 added: held, unless it is one the
			// table evicted instead of an older one it holds (then a miss)
			id = ids[(next-1-(i*7919)%benchSessions+len(ids))%len(ids)]
		} else {
			next++
		}
		if _, err := tb.lookup(id, 0, i%4 == 3); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
