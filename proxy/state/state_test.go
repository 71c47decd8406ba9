package state

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/redistest"
)

// redisServer starts Debian's redis-server on a free loopback port, without
// persistence, for the test; it skips the test when redis-server is not
// installed, unless WARDEN_REQUIRE_PEERS=1 (scripts/peers.sh installs it).
func redisServer(t *testing.T) (addr string, stop func()) {
	t.Helper()
	addr, stop, _ = redisProcess(t)
	return addr, stop
}

func redisServerB(b *testing.B) (addr string, stop func()) {
	b.Helper()
	addr, stop, _ = redisProcess(b)
	return addr, stop
}

func redisProcess(t testing.TB) (addr string, stop func(), proc *os.Process) {
	t.Helper()
	return redistest.Start(t)
}

func newStore(t *testing.T, addr string) *Redis {
	t.Helper()
	return newStoreTimeout(t, addr, 0)
}

// newStoreTimeout is newStore with an operation timeout (0: the default).
func newStoreTimeout(t *testing.T, addr string, timeout time.Duration) *Redis {
	t.Helper()
	r, err := New(Config{URL: "redis://" + addr + "/0", Prefix: fmt.Sprintf("t%d:", time.Now().UnixNano()), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"none", Config{}, true},
		{"url", Config{URL: "redis://127.0.0.1:6379/2"}, true},
		{"tls with password", Config{URL: "rediss://u:p@redis.example:6380/0"}, true},
		{"not redis", Config{URL: "http://127.0.0.1:6379"}, false},
		{"negative timeout", Config{URL: "redis://h:1", Timeout: -time.Second}, false},
		{"ttl under a second", Config{URL: "redis://h:1", TTL: time.Millisecond}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
	if got := Redact("redis://user:secret@h:1/0"); got != "redis://h:1/0" {
		t.Errorf("Redact: %s", got)
	}
}

func TestTasks(t *testing.T) {
	addr, _ := redisServer(t)
	r := newStore(t, addr)
	ctx := context.Background()
	if err := r.Ready(); err != nil {
		t.Fatal(err)
	}

	// Unknown tasks: no owner, an observation adds nothing.
	if err := r.Observe(ctx, "t1", "working"); err != nil {
		t.Fatal(err)
	}
	if o, err := r.Owners(ctx, "", []string{"t1"}); err != nil || o[0] != "" {
		t.Fatalf("owner of an unknown task: %q %v", o, err)
	}

	if _, _, err := r.Create(ctx, "t1", "alice", "working", 0); err != nil {
		t.Fatal(err)
	}
	if s, o, _, err := r.Claim(ctx, "t2", "bob", 0); err != nil || s != "" || o != "bob" {
		t.Fatalf("claim of a new task: %q %v", s, err)
	}
	o, err := r.Owners(ctx, "", []string{"t1", "t2", "t3"})
	if err != nil || fmt.Sprint(o) != "[alice bob ]" {
		t.Fatalf("owners: %q %v", o, err)
	}

	// The steer bound, and the count restarting at a status change.
	// A mark (the task's lastUpdatedAt) other than the count's restarts it:
	// the server passed a step and took the queue.
	steps := []struct {
		name     string
		op       func() error
		mark     string
		reserved bool
		before   int
	}{
		{"first", nil, "", true, 0},
		{"second", nil, "", true, 1},
		{"over the bound", nil, "", false, 2},
		{"after an undo", func() error { return r.Unsteer(ctx, "t1") }, "", true, 1},
		{"same status observed", func() error { return r.Observe(ctx, "t1", "working") }, "", false, 2},
		{"a first mark", nil, "m1", true, 0},
		{"the same mark", nil, "m1", true, 1},
		{"the same mark, over the bound", nil, "m1", false, 2},
		{"a new mark", nil, "m2", true, 0},
		{"no mark", nil, "", true, 1},
		{"status changed", func() error { return r.Observe(ctx, "t1", "input_required") }, "", true, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.op != nil {
				if err := s.op(); err != nil {
					t.Fatal(err)
				}
			}
			ok, n, err := r.Steer(ctx, "t1", 2, s.mark)
			if err != nil || ok != s.reserved || n != s.before {
				t.Fatalf("Steer: %v %d %v, want %v %d", ok, n, err, s.reserved, s.before)
			}
		})
	}
	if s, _, _, err := r.Claim(ctx, "t1", "alice", 0); err != nil || s != "input_required" {
		t.Fatalf("status: %q %v", s, err)
	}
	if ok, _, err := r.Steer(ctx, "t1", 0, ""); err != nil || !ok {
		t.Fatalf("unbounded steer: %v %v", ok, err)
	}

	// Several statuses in one round trip: known tasks only, a change
	// restarts the steer count.
	if ok, _, err := r.Steer(ctx, "t1", 0, ""); err != nil || !ok {
		t.Fatalf("steer: %v %v", ok, err)
	}
	if err := r.ObserveAll(ctx, []string{"t1", "t2", "t9"}, []string{"completed", "working", "working"}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"t1": "completed", "t2": "working", "t9": ""} {
		if s, err := r.client.HGet(ctx, r.key(id), "s").Result(); s != want || err != nil && want != "" {
			t.Errorf("status of %s after ObserveAll: %q %v, want %q", id, s, err, want)
		}
	}
	if n, _ := r.client.HGet(ctx, r.key("t1"), "n").Result(); n != "0" {
		t.Errorf("steer count after a status change: %q, want 0", n)
	}
	if err := r.ObserveAll(ctx, []string{"t1"}, nil); err == nil {
		t.Error("ObserveAll with fewer statuses than tasks: no error")
	}
}

// replicaStores returns n stores on one Redis, with the same prefix and
// connections of their own, as n replicas have.
//
// Their operation timeout is generous: the tests using them check what the
// stores decide under contention, and a loaded machine running 60 round
// trips at once under -race can take more than the 200 ms default for one.
func replicaStores(t *testing.T, addr string, n int) []*Redis {
	stores := []*Redis{newStoreTimeout(t, addr, 2*time.Second)}
	for range n - 1 {
		s := *stores[0]
		s.client = newStoreTimeout(t, addr, 2*time.Second).client
		stores = append(stores, &s)
	}
	return stores
}

// TestSteerBoundConcurrent: many clients (as many replicas would) reserve
// at once; exactly max succeed.
func TestSteerBoundConcurrent(t *testing.T) {
	addr, _ := redisServer(t)
	stores := replicaStores(t, addr, 3)
	ctx := context.Background()
	if _, _, err := stores[0].Create(ctx, "t", "alice", "working", 0); err != nil {
		t.Fatal(err)
	}
	const max, tries = 5, 60
	var mu sync.Mutex
	var wg sync.WaitGroup
	won := 0
	for i := range tries {
		wg.Go(func() {
			ok, _, err := stores[i%len(stores)].Steer(ctx, "t", max, "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != max {
		t.Fatalf("%d steers reserved, want %d", won, max)
	}
}

// TestOwnerSetIfAbsent: replicas that record the same task for different
// principals at once (Create) leave one owner, the one every caller is told;
// a handle's claim never replaces it, nor does the loser's status land.
func TestOwnerSetIfAbsent(t *testing.T) {
	addr, _ := redisServer(t)
	stores := replicaStores(t, addr, 3)
	ctx := context.Background()
	for round := range 20 {
		id := fmt.Sprint("race-", round)
		principals := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
		got := make([]string, len(principals))
		var wg sync.WaitGroup
		for i, p := range principals {
			wg.Go(func() {
				o, _, err := stores[i%len(stores)].Create(ctx, id, p, "working", 0)
				if err != nil {
					t.Error(err)
				}
				got[i] = o
			})
		}
		wg.Wait()
		o, err := stores[0].Owners(ctx, "", []string{id})
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if g != o[0] {
				t.Fatalf("round %d: Create for %s answered %q, the store holds %q", round, principals[i], g, o[0])
			}
		}
	}

	r := stores[0]
	if o, _, err := r.Create(ctx, "t", "alice", "working", 0); err != nil || o != "alice" {
		t.Fatalf("Create: %q %v", o, err)
	}
	if o, _, err := r.Create(ctx, "t", "bob", "completed", 0); err != nil || o != "alice" {
		t.Fatalf("Create of alice's task for bob: %q %v, want alice", o, err)
	}
	if s, o, _, err := r.Claim(ctx, "t", "bob", 0); err != nil || o != "alice" || s != "working" {
		t.Fatalf("Claim of alice's task by bob: %q %q %v, want working alice (the loser's status not written)", s, o, err)
	}
	if o, err := r.Owners(ctx, "", []string{"t"}); err != nil || o[0] != "alice" {
		t.Fatalf("owner after bob's create and claim: %q %v, want alice", o, err)
	}
}

func TestExpiry(t *testing.T) {
	addr, _ := redisServer(t)
	r, err := New(Config{URL: "redis://" + addr, TTL: time.Second, Prefix: "exp:"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if _, _, err := r.Create(ctx, "t", "alice", "working", 0); err != nil {
		t.Fatal(err)
	}
	ttl, err := r.client.PTTL(ctx, "exp:mcp:task:t").Result()
	if err != nil || ttl <= 0 || ttl > time.Second {
		t.Fatalf("PTTL %v %v, want within 1s", ttl, err)
	}
	time.Sleep(1200 * time.Millisecond)
	if o, err := r.Owners(ctx, "", []string{"t"}); err != nil || o[0] != "" {
		t.Fatalf("owner after expiry: %q %v", o, err)
	}
}

// TestDownAndRestart: with Redis gone every operation fails within the
// timeout; a Redis restarted empty serves again (scripts reloaded).
func TestDownAndRestart(t *testing.T) {
	addr, stop := redisServer(t)
	r := newStore(t, addr)
	ctx := context.Background()
	if _, _, err := r.Create(ctx, "t", "alice", "working", 0); err != nil {
		t.Fatal(err)
	}
	stop()
	ops := map[string]func() error{
		"ready":       r.Ready,
		"claim":       func() error { _, _, _, err := r.Claim(ctx, "t", "alice", 0); return err },
		"create":      func() error { _, _, err := r.Create(ctx, "u", "alice", "", 0); return err },
		"observe":     func() error { return r.Observe(ctx, "t", "completed") },
		"observe all": func() error { return r.ObserveAll(ctx, []string{"t"}, []string{"completed"}) },
		"steer":       func() error { _, _, err := r.Steer(ctx, "t", 1, ""); return err },
		"unsteer":     func() error { return r.Unsteer(ctx, "t") },
		"owners":      func() error { _, err := r.Owners(ctx, "", []string{"t"}); return err },
	}
	for name, op := range ops {
		t.Run("down/"+name, func(t *testing.T) {
			began := time.Now()
			if err := op(); err == nil {
				t.Fatal("no error with Redis down")
			}
			if took := time.Since(began); took > 2*DefaultTimeout {
				t.Errorf("took %v, want about the timeout at most", took)
			}
		})
	}

	// Restarted, empty, on the same port.
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err = r.Owners(ctx, "", []string{"t"}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if s, _, _, err := r.Claim(ctx, "t", "alice", 0); err != nil || s != "" {
		t.Fatalf("claim after the restart: %q %v (the state is gone, the handle proves the owner)", s, err)
	}
	if o, err := r.Owners(ctx, "", []string{"t"}); err != nil || o[0] != "alice" {
		t.Fatalf("owner after the claim: %q %v", o, err)
	}
}

// TestSlow: a Redis that does not answer (stopped) fails each operation at
// the timeout, and serves again once it answers.
func TestSlow(t *testing.T) {
	addr, _, proc := redisProcess(t)
	r := newStore(t, addr)
	ctx := context.Background()
	// A Redis just started on a busy machine may first answer after the
	// timeout: the test is about a stopped one, so it waits for a live one.
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, _, err = r.Create(ctx, "t", "alice", "working", 0); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer proc.Signal(syscall.SIGCONT)
	began := time.Now()
	_, _, err = r.Steer(ctx, "t", 1, "")
	took := time.Since(began)
	if err == nil || took < DefaultTimeout/2 || took > 3*DefaultTimeout {
		t.Fatalf("steer on a stopped Redis: %v after %v, want an error after about %v", err, took, DefaultTimeout)
	}
	_ = proc.Signal(syscall.SIGCONT)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, _, _, err = r.Claim(ctx, "t", "alice", 0); err == nil {
			return
		}
	}
	t.Fatalf("after the stop: %v", err)
}
