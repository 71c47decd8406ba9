package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSessions(t *testing.T) {
	addr, _ := redisServer(t)
	r := newStore(t, addr)
	ctx := context.Background()
	end := time.Now().Add(time.Minute)

	if data, v, changed, err := r.Load(ctx, "s1", ""); err != nil || changed || v != "" || data != nil {
		t.Fatalf("unknown session: %q %q %v %v", data, v, changed, err)
	}
	v1, _, ok, _, err := r.Commit(ctx, "s1", "", []byte("one\x00\xff"), end, "", 0)
	if err != nil || !ok || v1 == "" {
		t.Fatalf("first commit: %q %v %v", v1, ok, err)
	}
	if v, cur, ok, _, err := r.Commit(ctx, "s1", "", []byte("other"), end, "", 0); err != nil || ok || v != v1 || string(cur) != "one\x00\xff" {
		t.Fatalf("a second create must conflict and return the winner's state: %q %q %v %v", v, cur, ok, err)
	}
	if data, v, changed, err := r.Load(ctx, "s1", ""); err != nil || !changed || v != v1 || string(data) != "one\x00\xff" {
		t.Fatalf("load from nothing: %q %q %v %v", data, v, changed, err)
	}
	if data, v, changed, err := r.Load(ctx, "s1", v1); err != nil || changed || v != v1 || data != nil {
		t.Fatalf("load when current: %q %q %v %v", data, v, changed, err)
	}
	v2, _, ok, _, err := r.Commit(ctx, "s1", v1, []byte("two"), end, "", 0)
	if err != nil || !ok || v2 == v1 {
		t.Fatalf("second commit: %q %v %v", v2, ok, err)
	}
	if v, cur, ok, _, _ := r.Commit(ctx, "s1", v1, []byte("stale"), end, "", 0); ok || v != v2 || string(cur) != "two" {
		t.Fatalf("a commit on a stale version must conflict: %q %q %v", v, cur, ok)
	}
	if v, cur, ok, _, _ := r.Commit(ctx, "gone", "x", []byte("late"), end, "", 0); ok || v != "" || cur != nil {
		t.Fatalf("a commit on an entry Redis lost must conflict with none: %q %q %v", v, cur, ok)
	}
	if data, v, changed, _ := r.Load(ctx, "s1", v1); !changed || v != v2 || string(data) != "two" {
		t.Fatalf("load when stale: %q %q %v", data, v, changed)
	}
	ttl := r.client.PTTL(ctx, r.sessionKey("s1")).Val()
	if want := time.Minute + DefaultTTL; ttl <= want-5*time.Second || ttl > want {
		t.Fatalf("expiry %v, want about the session's end plus %v", ttl, DefaultTTL)
	}
}

// TestSessionCommitRace: many writers commit on one version; exactly one
// wins.
func TestSessionCommitRace(t *testing.T) {
	addr, _ := redisServer(t)
	r := newStore(t, addr)
	ctx := context.Background()
	v0, _, _, _, err := r.Commit(ctx, "s", "", []byte("0"), time.Now(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 16 {
		wg.Go(func() {
			_, _, ok, _, err := r.Commit(ctx, "s", v0, []byte("x"), time.Now(), "", 0)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d writers won one version", wins)
	}
}

func TestSessionsDown(t *testing.T) {
	addr, stop := redisServer(t)
	r := newStore(t, addr)
	stop()
	began := time.Now()
	if _, _, _, err := r.Load(context.Background(), "s", ""); err == nil {
		t.Fatal("load from a stopped Redis succeeded")
	}
	if _, _, _, _, err := r.Commit(context.Background(), "s", "", nil, time.Now(), "", 0); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("commit to a stopped Redis: %v", err)
	}
	if took := time.Since(began); took > 4*DefaultTimeout {
		t.Fatalf("failing took %v, more than the timeouts", took)
	}
}

// TestSessionsSlow: a Redis that stops answering fails each operation
// within about the timeout, and a commit that timed out is not half done.
func TestSessionsSlow(t *testing.T) {
	addr, _, proc := redisProcess(t)
	r := newStore(t, addr)
	ctx := context.Background()
	v, _, _, _, err := r.Commit(ctx, "s", "", []byte("a"), time.Now().Add(time.Minute), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer proc.Signal(syscall.SIGCONT)
	for name, op := range map[string]func() error{
		"load":   func() error { _, _, _, err := r.Load(ctx, "s", ""); return err },
		"commit": func() error { _, _, _, _, err := r.Commit(ctx, "s", "x", []byte("b"), time.Now(), "", 0); return err },
	} {
		began := time.Now()
		err := op()
		if took := time.Since(began); err == nil || took < DefaultTimeout/2 || took > 3*DefaultTimeout {
			t.Fatalf("%s on a stopped Redis: %v after %v, want an error after about %v", name, err, took, DefaultTimeout)
		}
	}
	_ = proc.Signal(syscall.SIGCONT)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, got, _, err := r.Load(ctx, "s", "")
		if err == nil {
			if got != v || string(data) != "a" {
				t.Fatalf("after the stop the session is %q %q, want the last commit %q", got, data, v)
			}
			return
		}
	}
	t.Fatal("Redis did not answer after SIGCONT")
}

// TestSessionTurns: a replica's second compare-and-set lost in a row gives
// it the next turn: the other replica's commits on the current version are
// deferred (answered with their own version, nothing written) until its
// commit, its version check, or the turn's lapse. A first loss alone defers
// nobody. Before turns, the deferred commits were written.
func TestSessionTurns(t *testing.T) {
	addr, _ := redisServer(t)
	a := newStore(t, addr)
	b, err := New(Config{URL: a.cfg.URL, Prefix: a.cfg.Prefix}) // another replica: its own turn token
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	end := time.Now().Add(time.Minute)
	stores := map[string]*Redis{"a": a, "b": b}

	// Each step is a replica's commit on the version it holds ("stale":
	// the one before the current), its version check, or a wait.
	type step struct {
		op, who string
		want    string // committed, lost, deferred
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"first loss defers nobody", []step{
			{"stale", "b", "lost"}, {"commit", "a", "committed"}, {"commit", "a", "committed"},
		}},
		{"second loss takes the turn", []step{
			{"stale", "b", "lost"}, {"stale", "b", "lost"},
			{"commit", "a", "deferred"}, {"commit", "a", "deferred"},
			{"commit", "b", "committed"}, {"commit", "a", "committed"},
		}},
		{"a loss of the other keeps the turn", []step{
			{"stale", "b", "lost"}, {"stale", "b", "lost"},
			{"stale", "a", "lost"}, {"stale", "a", "lost"}, {"commit", "a", "deferred"},
			{"commit", "b", "committed"}, {"commit", "a", "committed"},
		}},
		{"a version check ends the turn", []step{
			{"stale", "b", "lost"}, {"stale", "b", "lost"}, {"commit", "a", "deferred"},
			{"load", "b", ""}, {"commit", "a", "committed"},
		}},
		{"the turn lapses", []step{
			{"stale", "b", "lost"}, {"stale", "b", "lost"}, {"commit", "a", "deferred"},
			{"lapse", "", ""}, {"commit", "a", "committed"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.name
			cur, _, _, _, err := a.Commit(ctx, id, "", []byte("0"), end, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			prev := "before"
			for i, s := range tc.steps {
				r := stores[s.who]
				have := cur
				switch s.op {
				case "lapse":
					time.Sleep(turnTTL + 10*time.Millisecond)
					continue
				case "load":
					if _, _, _, err := r.Load(ctx, id, cur); err != nil {
						t.Fatal(err)
					}
					continue
				case "stale":
					have = prev
				}
				v, data, ok, _, err := r.Commit(ctx, id, have, []byte(strconv.Itoa(i)), end, "", 0)
				got := "lost"
				switch {
				case err != nil:
					t.Fatalf("step %d: %v", i, err)
				case ok:
					got, prev, cur = "committed", cur, v
				case v == have && data == nil:
					got = "deferred"
				case v != cur:
					t.Fatalf("step %d: lost to version %q, want the current %q", i, v, cur)
				}
				if got != s.want {
					t.Fatalf("step %d (%s by %s): %s, want %s", i, s.op, s.who, got, s.want)
				}
			}
		})
	}
}

// TestSessionShares: with a share, a committed session is charged to its
// initiator: past the share the initiator's least recently committed
// session is dropped, never another initiator's (not even one that reuses
// an id the first once held), never the one committed; the initiator's set
// lives as long as its longest-lived session. Without a share the entry is
// what it was before shares (fields v and d only, no set).
func TestSessionShares(t *testing.T) {
	addr, _ := redisServer(t)
	r := newStore(t, addr)
	raw := redis.NewClient(&redis.Options{Addr: addr})
	defer raw.Close()
	ctx := context.Background()
	soon, late := time.Now().Add(time.Minute), time.Now().Add(time.Hour)
	commit := func(id, have, initiator string, end time.Time) string {
		t.Helper()
		v, _, ok, _, err := r.Commit(ctx, id, have, []byte(id), end, initiator, 2)
		if err != nil || !ok {
			t.Fatalf("commit %s: %v %v", id, ok, err)
		}
		return v
	}
	held := func(ids ...string) string {
		t.Helper()
		var out []string
		for _, id := range ids {
			if _, v, _, err := r.Load(ctx, id, ""); err != nil {
				t.Fatal(err)
			} else if v != "" {
				out = append(out, id)
			}
		}
		return strings.Join(out, " ")
	}

	if _, _, _, _, err := r.Commit(ctx, "plain", "", []byte("p"), soon, "alice", 0); err != nil {
		t.Fatal(err)
	}
	if f, err := raw.HKeys(ctx, r.sessionKey("plain")).Result(); err != nil || strings.Join(f, " ") != "v d" {
		t.Errorf("without a share the entry's fields are %q %v, want v d", f, err)
	}
	if n, _ := raw.Exists(ctx, r.initiatorKey("alice")).Result(); n != 0 {
		t.Error("without a share an initiator's set was written")
	}

	// x was alice's, expired, and bob started a session under its id.
	commit("x", "", "alice", soon)
	raw.Del(ctx, r.sessionKey("x"))
	commit("x", "", "bob", soon)
	a1 := commit("a1", "", "alice", late)
	commit("a2", "", "alice", soon)
	commit("a1", a1, "alice", late) // a1 is now alice's most recently committed
	commit("a3", "", "alice", soon)
	if got := held("x", "a1", "a2", "a3"); got != "x a1 a3" {
		t.Errorf("after alice's fourth session over a share of 2: %q held, want x (bob's) a1 a3", got)
	}
	if o, _ := raw.HGet(ctx, r.sessionKey("x"), "o").Result(); o != "bob" {
		t.Errorf("x names %q, want bob", o)
	}
	set, _ := raw.PTTL(ctx, r.initiatorKey("alice")).Result()
	a1ttl, _ := raw.PTTL(ctx, r.sessionKey("a1")).Result()
	if set < a1ttl-time.Second {
		t.Errorf("alice's set lives %v, her a1 %v: the set must outlive her sessions", set, a1ttl)
	}
}

// TestTrimCounts: the scripts answer how many entries a share trimmed, for
// warden_share_drops_total without a round trip of its own: alice's 5
// tasks created, 5 claimed and 5 sessions committed under a share of 2
// drop 3 of each; bob, within his share, drops none. Before, nothing said
// so (Create, Claim and Commit answered no count).
func TestTrimCounts(t *testing.T) {
	addr, _ := redisServer(t)
	r := newStore(t, addr)
	ctx := context.Background()
	const share = 2
	for _, tc := range []struct {
		name string
		op   func(who string, i int) (int, error)
	}{
		{"create", func(who string, i int) (int, error) {
			_, n, err := r.Create(ctx, fmt.Sprint("c", who, i), who, "working", share)
			return n, err
		}},
		{"claim", func(who string, i int) (int, error) {
			_, _, n, err := r.Claim(ctx, fmt.Sprint("h", who, i), who, share)
			return n, err
		}},
		{"commit", func(who string, i int) (int, error) {
			_, _, ok, n, err := r.Commit(ctx, fmt.Sprint("s", who, i), "", []byte("x"), time.Now().Add(time.Minute), who, share)
			if err == nil && !ok {
				err = fmt.Errorf("not committed")
			}
			return n, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for who, flood := range map[string]int{"alice" + tc.name: 5, "bob" + tc.name: share} {
				dropped := 0
				for i := range flood {
					n, err := tc.op(who, i)
					if err != nil {
						t.Fatal(err)
					}
					dropped += n
				}
				if want := flood - share; dropped != want {
					t.Errorf("%s: %d trimmed, want %d", who, dropped, want)
				}
			}
		})
	}
}
