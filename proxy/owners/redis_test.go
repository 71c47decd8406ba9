package owners

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/redistest"
	"github.com/agentwarden/warden/proxy/state"
)

// TestShareInRedis: the share bounds a principal's entries in the store
// replicas share as it does in each replica's table (a flood of creates
// and of claims, through two replicas, leaves alice her share in Redis and
// bob his entries), with the same victims: her own least recently used.
// Before the store kept every entry until state.ttl: alice held 101.
func TestShareInRedis(t *testing.T) {
	addr, _, _ := redistest.Start(t)
	const size, share = 16, 4
	for _, tc := range []struct {
		name  string
		claim bool // alice's second flood proves handles on the other replica
	}{
		{name: "create"},
		{name: "create, then claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, a, b := replicas(t, addr, "share:"+tc.name+":", size, share, nil)
			ctx := context.Background()
			for _, id := range []string{"b1", "b2"} {
				if o, err := a.Learn(ctx, "bob", Fact{Key: task(id), Created: true}); err != nil || o[0] != "bob" {
					t.Fatalf("bob creates %s: %v %v", id, o, err)
				}
			}
			// alice names bob's b1 in a claim of her own: it stays his.
			if _, _, ok, err := b.Claim(ctx, task("b1"), "alice"); ok || err != nil {
				t.Fatalf("alice claims bob's b1: %v %v", ok, err)
			}
			for i := range 101 {
				if o, err := a.Learn(ctx, "alice", Fact{Key: task(fmt.Sprint("a", i)), Created: true}); err != nil || o[0] != "alice" {
					t.Fatalf("alice creates a%d: %v %v", i, o, err)
				}
			}
			if tc.claim {
				for i := range 50 { // handles of entries the store dropped
					if _, _, ok, err := b.Claim(ctx, task(fmt.Sprint("a", i)), "alice"); !ok || err != nil {
						t.Fatalf("alice claims a%d: %v %v", i, ok, err)
					}
				}
			}
			names := []string{"b1", "b2"}
			for i := range 101 {
				names = append(names, fmt.Sprint("a", i))
			}
			got, err := store.Owners(ctx, "", names)
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != "bob" || got[1] != "bob" {
				t.Errorf("bob's entries in the store after alice's flood: %q, want bob bob", got[:2])
			}
			var held []string
			for i, o := range got[2:] {
				if o == "alice" {
					held = append(held, names[2+i])
				} else if o != "" {
					t.Errorf("a%d owned by %q", i, o)
				}
			}
			want := "[a97 a98 a99 a100]"
			if tc.claim {
				want = "[a46 a47 a48 a49]"
			}
			if fmt.Sprint(held) != want {
				t.Errorf("alice's entries in the store: %v, want %s (her share, the most recent)", held, want)
			}
		})
	}
}

// TestShareUseInRedis: an entry its owner keeps using (a lookup that
// finds it, on the replica that holds it or on another) stays when the
// owner's share is trimmed, in Redis and in the table alike: one rule,
// least recently used (created, proven or looked up). Before, Redis
// ordered an owner's entries by creation and proof only while the table
// counted lookups too, so the entry in use (t0) was dropped from Redis
// and kept in the table, and the other replica read it as nobody's.
// Only the owner's use counts (TestUseIsTheOwners in memory): bob, who
// knows alice's oldest id, reading it again and again does not keep it, so
// t0 goes first. Before, the lookup script made any known entry its
// owner's most recently used (ZADD XX whoever read it), and Redis dropped
// t1, the entry alice was using.
func TestShareUseInRedis(t *testing.T) {
	addr, _, _ := redistest.Start(t)
	const size, share = 16, 4
	for _, tc := range []struct {
		name   string
		other  bool   // looked up on the replica that did not create it
		reader string // whose lookups of t0
		kept   string // of t0 and t1, the one alice's share keeps
	}{
		{name: "looked up where it was created", reader: "alice", kept: "t0"},
		{name: "looked up on another replica", other: true, reader: "alice", kept: "t0"},
		{name: "read by another where it was created", reader: "bob", kept: "t1"},
		{name: "read by another on another replica", other: true, reader: "bob", kept: "t1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, a, b := replicas(t, addr, "use:"+tc.name+":", size, share, nil)
			ctx := context.Background()
			for i := range share {
				if _, err := a.Learn(ctx, "alice", Fact{Key: task(fmt.Sprint("t", i)), Created: true}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(usedFor) // a lookup a replica answers itself marks the store at most once per usedFor
			lookup := a
			if tc.other {
				lookup = b
			}
			for range 3 {
				if o, err := lookup.Owners(ctx, tc.reader, task("t0")); err != nil || o[0] != "alice" {
					t.Fatalf("alice's t0 read by %s: %v %v", tc.reader, o, err)
				}
			}
			if _, err := a.Learn(ctx, "alice", Fact{Key: task("t4"), Created: true}); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"t0": "", "t1": ""}
			want[tc.kept] = "alice"
			got, err := store.Owners(ctx, "", []string{"t0", "t1"})
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != want["t0"] || got[1] != want["t1"] {
				t.Errorf("in Redis t0 (read by %s) %q, t1 %q: want %q", tc.reader, got[0], got[1], want)
			}
			if tc.other {
				return // a's table saw no use of t0: it may drop it, Redis holds it
			}
			o0, _, _, _ := a.Peek(task("t0"))
			o1, _, _, _ := a.Peek(task("t1"))
			if o0 != want["t0"] || o1 != want["t1"] {
				t.Errorf("in the table t0 (read by %s) %q, t1 %q: want %q", tc.reader, o0, o1, want)
			}
		})
	}
}

// replicas are two tables of size entries, share each principal's, in
// front of one Redis store (keys under prefix), telling w (nil: none) of
// the entries a share drops.
// testStoreTimeout is the stores' operation timeout in these tests, which
// are not about it: the default 200 ms, the first operation's connection
// included, ran out under -race on a loaded machine (TestSteerStaleMark:
// "record the owner of t: redis ...: record task: context deadline
// exceeded", 1 in 10 runs under GOMAXPROCS=1).
const testStoreTimeout = 10 * time.Second

func replicas(t *testing.T, addr, prefix string, size, share int, w *Watch) (store *state.Redis, a, b *Table) {
	t.Helper()
	store, err := state.New(state.Config{URL: "redis://" + addr, Prefix: prefix, Timeout: testStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	a, _ = New(size, share, store, w)
	b, _ = New(size, share, store, w)
	return store, a, b
}
