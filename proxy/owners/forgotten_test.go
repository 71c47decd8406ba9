package owners

import (
	"fmt"
	"testing"
)

// TestForgotten: the last size evicted keys are remembered, a key evicted
// twice until its last copy leaves, older ones not at all.
func TestForgotten(t *testing.T) {
	f := newForgotten(3)
	for _, tc := range []struct {
		add  string
		want string // the keys remembered afterwards, of a..e
	}{
		{"a", "a"},
		{"b", "ab"},
		{"a", "ab"},
		{"c", "abc"}, // ring a b a, then c drops the first a
		{"d", "acd"}, // drops b
		{"e", "cde"}, // drops the second a
	} {
		f.add(Key{ID: tc.add})
		got := ""
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			if f.has(Key{ID: k}) {
				got += k
			}
		}
		if got != tc.want {
			t.Fatalf("after adding %s: remembered %q, want %q", tc.add, got, tc.want)
		}
	}
}

// TestTableRemembersEvictions: the task table's evictions land in its
// memory of forgotten keys.
func TestTableRemembersEvictions(t *testing.T) {
	ts, err := New(2, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		ts.add(Key{ID: fmt.Sprint("k", i)}, "", "")
	}
	for i, want := range []bool{true, true, false, false} {
		if got := ts.evicted.has(Key{ID: fmt.Sprint("k", i)}); got != want {
			t.Errorf("k%d evicted: %v, want %v", i, got, want)
		}
	}
}

// BenchmarkForgotten is what an eviction adds, and what an answer's
// unknown id pays to be checked, with the memory full.
func BenchmarkForgotten(b *testing.B) {
	const n = 1 << 16
	f := newForgotten(n)
	keys := make([]Key, 2*n)
	for i := range keys {
		keys[i] = Key{Kind: A2ATask, ID: fmt.Sprint("task-", i)}
	}
	for _, k := range keys[:n] {
		f.add(k)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		f.add(k)
		_ = f.has(k)
		i++
	}
}
