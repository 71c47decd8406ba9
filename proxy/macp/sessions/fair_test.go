package sessions

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/redistest"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/state"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// redisStores are n stores of one real redis-server under one prefix, as
// n ext_authz replicas see it.
func redisStores(tb testing.TB, n int) []*state.Redis {
	tb.Helper()
	addr, _, _ := redistest.Start(tb)
	prefix := fmt.Sprintf("t%d:", time.Now().UnixNano())
	out := make([]*state.Redis, n)
	for i := range out {
		r, err := state.New(state.Config{URL: "redis://" + addr, Prefix: prefix, Timeout: 10 * time.Second}) // not the 200 ms default, which -race on a loaded machine can outlast; not what this test is about
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = r.Close() })
		out[i] = r
	}
	return out
}

// redisReplica is a replica deciding on store, on the real clock (Redis
// expires what the store writes by it).
func redisReplica(tb testing.TB, store Store) *Decider {
	tb.Helper()
	e, err := build(proxy.Config{}, proxy.Options{Authenticator: devAuth(tb), Policies: engine(tb), Now: time.Now}, Options{Store: store})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// far is a replica's store behind a slow link (another zone, or a replica
// on an overloaded machine): each commit reaches the store delay after the
// replica decided it.
type far struct {
	Store
	delay time.Duration
}

func (f far) Commit(ctx context.Context, id, have string, data []byte, expireAt time.Time, initiator string, share int) (string, []byte, bool, int, error) {
	time.Sleep(f.delay)
	return f.Store.Commit(ctx, id, have, data, expireAt, initiator, share)
}

// TestSharedSessionFairTurns: replica A decides a hot session's TaskUpdates
// back to back (4 in flight), while replica B, whose commits reach Redis 2 ms
// after it decided them, sends its own updates of the session one by one.
// Every update of both is allowed: B, whose compare-and-set A's next commit
// beats every time, gets its turn after a loss instead of retrying until the
// contention budget runs out and refusing a valid message (before the
// replicas took turns, every one of B's updates failed with
// ErrSessionContention after 500 ms).
func TestSharedSessionFairTurns(t *testing.T) {
	stores := redisStores(t, 2)
	a := redisReplica(t, stores[0])
	b := redisReplica(t, far{stores[1], 2 * time.Millisecond})
	sid := sessionID(60)
	decideAll(t, []*Decider{a, b}, taskTranscript(t, sid)[:3])
	update := mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var n, refusedA atomic.Int64
	var errA atomic.Value
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := n.Add(1)
				d, err := a.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "a-"+strconv.FormatInt(i, 10), update)))
				if err != nil {
					errA.Store(err)
					continue
				}
				d.Settle(d.Allow)
				if !d.Allow {
					refusedA.Add(1)
				}
			}
		})
	}
	const updates = 10
	for i := range updates {
		began := time.Now()
		d, err := b.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "b-"+strconv.Itoa(i), update)))
		if err != nil {
			t.Errorf("B's update %d, after %v (A decided %d): %v", i, time.Since(began), n.Load(), err)
			continue
		}
		d.Settle(d.Allow)
		if !d.Allow {
			t.Errorf("B's update %d refused: %s", i, d.Code)
		}
	}
	stop()
	wg.Wait()
	if err, _ := errA.Load().(error); err != nil || refusedA.Load() > 0 {
		t.Errorf("A: %d refused, last error %v", refusedA.Load(), err)
	}
	t.Logf("A decided %d updates while B decided %d", n.Load(), updates)
}

// BenchmarkSharedHotSession: allowed TaskUpdates of one session, 8 in flight,
// through one replica or alternating between two (ext_authz on Redis, a
// local redis-server); each session takes 256 updates, then the next starts.
func BenchmarkSharedHotSession(b *testing.B) {
	update := mustMarshal(b, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
	for _, replicas := range []int{1, 2} {
		b.Run(strconv.Itoa(replicas)+"-replicas", func(b *testing.B) {
			stores := redisStores(b, replicas)
			rs := make([]*Decider, replicas)
			for i, s := range stores {
				rs[i] = redisReplica(b, s)
			}
			const perSession, inFlight = 256, 8
			b.ReportAllocs()
			for done, k := 0, 0; done < b.N; k++ {
				b.StopTimer()
				sid := sessionID(1000 + k)
				decideAll(b, rs, taskTranscript(b, sid)[:3])
				b.StartTimer()
				count := min(perSession, b.N-done)
				var next atomic.Int64
				var wg sync.WaitGroup
				for range inFlight {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(count); i = next.Add(1) - 1 {
							d, err := rs[i%int64(replicas)].Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u-"+strconv.FormatInt(i, 10), update)))
							if err != nil || !d.Allow {
								b.Error(err, d.Code)
								return
							}
							d.Settle(d.Allow)
						}
					})
				}
				wg.Wait()
				done += count
			}
		})
	}
}
