package owners

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentwarden/warden/internal/redistest"
)

// TestSteerStaleMark: a steer whose lastUpdatedAt was read before the
// server's step and reaches the count after a steer that read the step's
// (two replicas, or one whose store answers late) is counted since the
// step, not taken for a newer step: before, each stale mark restarted the
// count and the next fresh one restarted it again, so steers sent at once
// around a step queued max per flip (the bound multiplied by the requests
// in flight). Through two replicas on one Redis, and in one replica's table.
func TestSteerStaleMark(t *testing.T) {
	addr, _, _ := redistest.Start(t)
	const max = 3
	const before, after = "2026-11-29T04:00:00.100Z", "2026-11-29T04:00:00.2+00:00" // the step's, in another spelling
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			var a, b *Table
			if shared {
				_, a, b = replicas(t, addr, "steer-stale:", 8, 0, nil)
			} else {
				a, _ = New(8, 0, nil, nil)
				b = a
			}
			ctx := context.Background()
			k := task("t")
			if o, err := a.Learn(ctx, "alice", Fact{Key: k, Created: true, Status: "working"}); err != nil || o[0] != "alice" {
				t.Fatalf("alice creates t: %v %v", o, err)
			}
			// The server took its step: the count begins at its mark.
			if ok, _, err := b.Steer(ctx, k, max, after); err != nil || !ok {
				t.Fatalf("first steer after the step: %v %v", ok, err)
			}
			// In order: a stale mark between fresh ones.
			for i, mark := range []string{before, after, before, after} {
				ok, _, err := []*Table{a, b}[i%2].Steer(ctx, k, max, mark)
				if err != nil {
					t.Fatal(err)
				}
				if want := i < 2; ok != want {
					t.Errorf("steer %d (mark %s) after the step: reserved %v, want %v (%d since the step)", i+2, mark, ok, want, max)
				}
			}
			// At once: 32 steers through both replicas, half stale.
			k = task("u")
			if _, err := a.Learn(ctx, "alice", Fact{Key: k, Created: true, Status: "working"}); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := a.Steer(ctx, k, max, after); err != nil || !ok {
				t.Fatalf("first steer of u: %v %v", ok, err)
			}
			var won atomic.Int32
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Go(func() {
					mark := after
					if i%2 == 1 {
						mark = before
					}
					ok, _, err := []*Table{a, b}[i%2].Steer(ctx, k, max, mark)
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			if n := won.Load() + 1; n != max {
				t.Errorf("%d steers reserved since the step through two replicas at once, want %d", n, max)
			}
		})
	}
}

// TestClaimRaceReplicas: alice and bob prove handles of one new id at once
// through two replicas (a table's claim is its owner's before the store
// answers): exactly one is the owner, and both replicas then name that one
// to every reader. Fails if the store's claim overwrote an owner (HSET for
// HSETNX) or a replica kept its tentative owner over the store's.
func TestClaimRaceReplicas(t *testing.T) {
	addr, _, _ := redistest.Start(t)
	_, a, b := replicas(t, addr, "claim-race:", 64, 0, nil)
	ctx := context.Background()
	for round := range 20 {
		k := task(fmt.Sprint("r", round))
		var ok [2]bool
		var wg sync.WaitGroup
		for i, p := range []string{"alice", "bob"} {
			wg.Go(func() {
				_, _, won, err := []*Table{a, b}[i].Claim(ctx, k, p)
				if err != nil {
					t.Error(err)
				}
				ok[i] = won
			})
		}
		wg.Wait()
		if ok[0] == ok[1] {
			t.Fatalf("round %d: alice's claim %v, bob's %v: want exactly one owner", round, ok[0], ok[1])
		}
		want := map[bool]string{true: "alice", false: "bob"}[ok[0]]
		for j, tb := range []*Table{a, b} {
			for _, by := range []string{"alice", "bob"} {
				if o, err := tb.Owners(ctx, by, k); err != nil || o[0] != want {
					t.Fatalf("round %d: replica %d tells %s the owner is %v %v, want %s", round, j, by, o, err, want)
				}
			}
		}
	}
}
