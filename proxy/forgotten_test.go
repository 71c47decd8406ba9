package proxy

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/rules/mcp"
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
		f.add(tc.add)
		got := ""
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			if f.has(k) {
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
	ts, err := newTasks(2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		ts.get(fmt.Sprint("k", i), true)
	}
	for i, want := range []bool{true, true, false, false} {
		if got := ts.evicted.has(fmt.Sprint("k", i)); got != want {
			t.Errorf("k%d evicted: %v, want %v", i, got, want)
		}
	}
}

// BenchmarkForgotten is what an eviction adds, and what an answer's
// unknown id pays to be checked, with the memory full.
func BenchmarkForgotten(b *testing.B) {
	const n = 1 << 16
	f := newForgotten(n)
	keys := make([]string, 2*n)
	for i := range keys {
		keys[i] = fmt.Sprint("a2a:t:task-", i)
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

// TestTaskCreatedForgotten: with no shared store, an MCP task the table
// evicted is not learned for whoever an answer names next (the MCP adapter
// then hands it to nobody), and its owner's handle proves it again.
func TestTaskCreatedForgotten(t *testing.T) {
	e, _ := newEnforcer(t, Config{Sessions: 2}, nil)
	e.TaskCreated("a", "alice", mcp.StatusWorking)
	e.TaskCreated("b", "carol", mcp.StatusWorking)
	e.TaskCreated("c", "carol", mcp.StatusWorking) // "a" evicted
	e.TaskCreated("a", "bob", mcp.StatusWorking)
	if o, ok := e.TaskOwner("a"); ok {
		t.Fatalf("alice's evicted task learned for %q", o)
	}
	alice := authn.Principal{ID: "alice", Method: string(authn.MethodDev)}
	if d, err := e.EnforceTask(context.Background(), TaskRequest{Principal: alice, Call: mcp.Call{Method: mcp.MethodGet}, TaskID: "a", Owner: true}); err != nil || !d.Allow {
		t.Fatalf("alice's handle after the eviction: %+v %v", d, err)
	}
	if o, ok := e.TaskOwner("a"); !ok || o != "alice" {
		t.Fatalf("owner after alice's handle: %q %v", o, ok)
	}
}
