package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// redisProc is a redis-server the test started on a free loopback port,
// without persistence: a restart comes back empty.
type redisProc struct {
	t    testing.TB
	bin  string
	addr string
	p    *process
}

// startRedis starts Debian's redis-server (scripts/peers.sh installs it);
// missing, it skips the test, or fails it under WARDEN_REQUIRE_PEERS=1.
func startRedis(t testing.TB) *redisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("WARDEN_REQUIRE_PEERS") == "1" {
			t.Fatalf("redis-server is missing (%v): run scripts/peers.sh", err)
		}
		t.Skip("redis-server is not installed (run scripts/peers.sh, or make test)")
	}
	r := &redisProc{t: t, bin: bin, addr: freeAddr(t)}
	r.start()
	return r
}

func (r *redisProc) start() {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.p = start(r.t, "redis-server", r.addr, nil, r.bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
}

// kill ends Redis at once (SIGKILL), as a crash would.
func (r *redisProc) kill() { r.p.kill() }

func (r *redisProc) url() string { return "redis://" + r.addr + "/0" }

// list returns the task IDs of c's tasks/list, sorted, or the error code.
func (c mcpClient) list() ([]string, reply) {
	c.t.Helper()
	r := c.call("tasks/list", nil, nil)
	var ids []string
	tasks, _ := r.Result["tasks"].([]any)
	for _, x := range tasks {
		m, _ := x.(map[string]any)
		id, _ := m["taskId"].(string)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, r
}

func sorted(xs ...string) []string { xs = slices.Clone(xs); slices.Sort(xs); return xs }

// TestMCPReplicasOnRedis: three replicas of the MCP sidecar with one handle
// key and one Redis in front of the fixture server, requests spread round
// robin: the task table is one. tasks/list through any replica shows the
// owner's tasks created through another and no one else's; the steer bound
// holds over the replicas together; Redis killed, what needs the shared
// state is refused as undecidable (never allowed) and /readyz says so;
// Redis restarted empty, service resumes, ownership rebuilt from the
// handles. It logs the latency a tasks/get pays for Redis.
func TestMCPReplicasOnRedis(t *testing.T) {
	rd := startRedis(t)
	upstream := startFixtureMCP(t, "-list")
	dir := t.TempDir()
	key := filepath.Join(dir, "handle.key")
	cfg := filepath.Join(dir, "warden.yaml")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-replicas"), 0o600); err != nil {
		t.Fatal(err)
	}
	const bound = 3
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("mcp:\n  max_steer_queue: %d\nstate:\n  timeout: 200ms\n", bound)), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	var replicas []string
	for i := range 3 {
		args := []string{"--mcp-handle-key-file", key, "--config", cfg, "--state", rd.url()}
		if i == 0 {
			args = append(args, "--admin-listen", admin)
		}
		w, _ := startMCPWarden(t, upstream, args...)
		replicas = append(replicas, w)
	}
	next := 0
	rr := func(principal string) mcpClient { // round robin over the replicas
		c := mcpClient{t, replicas[next%len(replicas)], principal}
		next++
		return c
	}
	on := func(i int, principal string) mcpClient { return mcpClient{t, replicas[i], principal} }

	a1 := rr("alice").create(2, 8000) // working, no safe point for 8 s
	a2 := rr("alice").create(2, 8000)
	b1 := rr("bob").create(2, 8000)

	t.Run("list through every replica", func(t *testing.T) {
		for i := range replicas {
			if got, r := rr("alice").list(); !slices.Equal(got, sorted(a1, a2)) {
				t.Errorf("alice's list (request %d): %v %+v, want %v", i, got, r.Error, sorted(a1, a2))
			}
			if got, r := rr("bob").list(); !slices.Equal(got, []string{b1}) {
				t.Errorf("bob's list (request %d): %v %+v, want [%s]", i, got, r.Error, b1)
			}
			if got, r := rr("carol").list(); len(got) != 0 || r.Error != nil {
				t.Errorf("carol's list (request %d): %v %+v, want none", i, got, r.Error)
			}
		}
	})

	t.Run("another principal", func(t *testing.T) {
		for range replicas {
			for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/steer"} {
				r := rr("bob").call(m, map[string]any{"taskId": a1, "message": "hijack"}, nil)
				if r.code() != -32602 || r.Error.Message != "Task not found" {
					t.Errorf("bob's %s on alice's task: HTTP %d %+v, want -32602 Task not found", m, r.HTTP, r.Error)
				}
			}
		}
	})

	t.Run("steer bound over the replicas", func(t *testing.T) {
		for i := range bound + 2 {
			r := rr("alice").call("tasks/steer", map[string]any{"taskId": a1, "message": fmt.Sprint("m", i)}, nil)
			if want := 0; i >= bound {
				if r.code() != -32602 {
					t.Errorf("steer %d (replica %d): %+v, want -32602 (bound %d over all replicas)", i, (next-1)%3, r.Error, bound)
				}
			} else if r.code() != want {
				t.Errorf("steer %d (replica %d): %+v, want accepted", i, (next-1)%3, r.Error)
			}
		}
		if n := count(upstreamRequests(t, upstream), "tasks/steer by alice"); n != bound {
			t.Errorf("the server received %d steers, want %d", n, bound)
		}
	})

	t.Run("latency", func(t *testing.T) {
		// Side by side, requests interleaved so that the machine's load
		// falls on every target alike; one request at a time.
		plain, _ := startMCPWarden(t, upstream, "--mcp-handle-key-file", key, "--config", cfg)
		targets := []latencyTarget{
			{name: "direct", base: upstream, id: rawTaskID(t, upstream)},
			{name: "warden", base: plain, id: a2},
			{name: "warden+redis", base: replicas[1], id: a2},
		}
		const n = 500
		tasksGetLatency(t, targets, n)
		for _, x := range targets {
			t.Logf("tasks/get %-13s p50 %4d µs  p90 %5d µs  p99 %5d µs  (%d calls)", x.name, x.pct(50).Microseconds(), x.pct(90).Microseconds(), x.pct(99).Microseconds(), n)
		}
		t.Logf("added by Redis (warden+redis - warden): p50 %+d µs, p90 %+d µs", (targets[2].pct(50) - targets[1].pct(50)).Microseconds(), (targets[2].pct(90) - targets[1].pct(90)).Microseconds())
	})

	// A task created while Redis is down cannot be recorded: its answer is
	// Warden's could-not-decide error (the old code kept it on the replica
	// that made it and logged), and the task is nobody's.
	rd.kill()
	t.Run("redis down", func(t *testing.T) {
		for i := range replicas {
			for _, m := range []string{"tasks/get", "tasks/steer", "tasks/pause", "tasks/cancel"} {
				r := on(i, "alice").call(m, map[string]any{"taskId": a2, "message": "x"}, nil)
				if r.HTTP != http.StatusServiceUnavailable || r.code() != -32603 {
					t.Errorf("replica %d, %s with Redis down: HTTP %d %+v %v, want 503 -32603", i, m, r.HTTP, r.Error, r.Result)
				}
			}
		}
		r := on(0, "alice").call("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"steps": 2, "step_ms": 8000}}, nil)
		if r.code() != -32603 || !strings.Contains(r.Error.Message, "could not decide") {
			t.Errorf("a task created with Redis down: %+v %+v, want -32603", r.Result, r.Error)
		}
		for _, i := range []int{1, 2} {
			for _, p := range []string{"alice", "bob"} {
				got, r := on(i, p).list()
				if r.code() != -32603 || !strings.Contains(r.Error.Message, "could not decide") || len(got) != 0 {
					t.Errorf("replica %d, %s's list with a task it cannot attribute: %v %+v, want -32603", i, p, got, r.Error)
				}
			}
		}
		if body, code := httpGet(t, "http://"+admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "state "+rd.url()) {
			t.Errorf("/readyz with Redis down: %d %q", code, body)
		}
		if n := count(upstreamRequests(t, upstream), "tasks/pause by alice"); n != 0 {
			t.Errorf("a pause reached the server undecided")
		}
	})

	rd.start() // empty
	t.Run("redis restarted empty", func(t *testing.T) {
		waitReady(t, "http://"+admin+"/readyz")
		// Ownership comes from the handles, status from the server.
		for i := range replicas {
			if r := on(i, "alice").call("tasks/get", map[string]any{"taskId": a1}, nil); r.Error != nil || r.Result["status"] != "working" {
				t.Errorf("replica %d, alice's get after the restart: %+v %+v", i, r.Result, r.Error)
			}
			if r := on(i, "bob").call("tasks/get", map[string]any{"taskId": a1}, nil); r.code() != -32602 {
				t.Errorf("replica %d, bob's get after the restart: %+v", i, r.Error)
			}
		}
		// The task made while Redis was down was never recorded: nobody's.
		for i := range replicas {
			if got, r := on(i, "alice").list(); !slices.Equal(got, sorted(a1, a2)) {
				t.Errorf("replica %d, alice's list after the restart: %v %+v, want %v", i, got, r.Error, sorted(a1, a2))
			}
		}
		if got, _ := on(2, "bob").list(); !slices.Equal(got, []string{b1}) {
			t.Errorf("bob's list after the restart: %v", got)
		}
	})

	for _, id := range []string{a1, a2} {
		rr("alice").call("tasks/cancel", map[string]any{"taskId": id}, nil)
	}
	rr("bob").call("tasks/cancel", map[string]any{"taskId": b1}, nil)
}

// rawTaskID starts a long task directly on the server and returns its ID.
func rawTaskID(t testing.TB, upstream string) string {
	t.Helper()
	return mcpClient{t, upstream, "alice"}.create(2, 8000)
}

// latencyTarget is where tasksGetLatency sends a tasks/get of id, and what
// it measured.
type latencyTarget struct {
	name, base, id string
	lat            []time.Duration
	send           func()
}

// pct returns the p-th percentile of the measured latencies.
func (x *latencyTarget) pct(p int) time.Duration {
	return x.lat[min(len(x.lat)-1, len(x.lat)*p/100)]
}

// tasksGetLatency times n tasks/get on each target, interleaved, one at a
// time, each target on its own kept-alive connection; 20 more first warm up.
func tasksGetLatency(t testing.TB, targets []latencyTarget, n int) {
	t.Helper()
	for k := range targets {
		x := &targets[k]
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"taskId": x.id, "_meta": extMeta}})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		defer client.CloseIdleConnections()
		x.lat = make([]time.Duration, 0, n)
		send := func() {
			req, _ := http.NewRequest(http.MethodPost, x.base+"/mcp", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tasks/get")
			req.Header.Set("Mcp-Name", x.id)
			req.Header.Set("Authorization", "Bearer alice")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			x.lat = append(x.lat, time.Since(t0))
			if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"status":"working"`)) {
				t.Fatalf("tasks/get through %s: HTTP %d %s", x.name, resp.StatusCode, out)
			}
		}
		defer func() { slices.Sort(x.lat) }()
		for range 20 {
			send()
		}
		x.lat = x.lat[:0]
		targets[k].send = send
	}
	for range n {
		for k := range targets {
			targets[k].send()
		}
	}
}

// waitReady polls a /readyz until it answers 200 (bounded).
func waitReady(t *testing.T, url string) {
	t.Helper()
	var body string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var code int
		if body, code = httpGet(t, url); code == http.StatusOK {
			return
		}
	}
	t.Fatalf("%s never ready: %s", url, body)
}
