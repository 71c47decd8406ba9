package owners

import (
	"context"
	"fmt"
	"testing"

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
			store, err := state.New(state.Config{URL: "redis://" + addr, Prefix: "share:" + tc.name + ":"})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			a, _ := New(size, share, store)
			b, _ := New(size, share, store)
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
			got, err := store.Owners(ctx, names)
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
