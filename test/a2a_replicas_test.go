package test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// roundRobin serves on 127.0.0.1 and passes each request to the next of
// bases in turn (SSE flushed as it comes), as a load balancer in front of
// replicas would; it returns its base URL.
func roundRobin(t testing.TB, bases []string) string {
	t.Helper()
	hops := make([]*httputil.ReverseProxy, len(bases))
	for i, b := range bases {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		hops[i] = httputil.NewSingleHostReverseProxy(u)
		hops[i].FlushInterval = -1
	}
	var n atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops[(n.Add(1)-1)%uint64(len(hops))].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestA2AReplicasOnRedis: three replicas of the A2A sidecar with one handle
// key and one Redis in front of the a2a-go v2.3.1 server. A task created
// through one replica is listed through every replica (ListTasks keeps the
// tasks Warden knows to be the caller's); the attack table, its requests
// spread round robin over the replicas, is refused throughout; Redis killed,
// what needs the shared state is refused as undecidable (never allowed),
// another's task is still refused, and /readyz says so; Redis restarted
// empty, service resumes, ownership rebuilt from the handles.
func TestA2AReplicasOnRedis(t *testing.T) {
	rd := startRedis(t)
	base := startA2AGo(t)
	key := filepath.Join(t.TempDir(), "handle.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef-a2a-replicas"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	var replicas []string
	for i := range 3 {
		args := []string{"--a2a-handle-key-file", key, "--state", rd.url(), "--a2a-webhook-allow", "localhost"}
		if i == 0 {
			args = append(args, "--admin-listen", admin)
		}
		replicas = append(replicas, startA2AWarden(t, base, args...))
	}
	on := func(i int) *a2aAttackEnv { return &a2aAttackEnv{url: replicas[i] + "/jsonrpc"} }

	// Each of alice's tasks made through another replica; bob's through
	// the third.
	var alices []a2aTask
	for i := range 2 {
		task, a := on(i).send(t, aliceToken, "alice-task-"+string(rune('a'+i)), nil, false)
		if task.ID == "" {
			t.Fatalf("alice's task through replica %d: %s", i, a)
		}
		alices = append(alices, task)
	}
	if task, a := on(2).send(t, bobToken, "bob-task", nil, false); task.ID == "" {
		t.Fatalf("bob's task: %s", a)
	}
	list := func(i int, token string) *a2aAnswer {
		return on(i).call(t, token, "ListTasks", map[string]any{"includeArtifacts": true})
	}

	t.Run("list through every replica", func(t *testing.T) {
		for i := range replicas {
			a := list(i, aliceToken)
			for _, want := range []string{"echo: alice-task-a", "echo: alice-task-b"} {
				if !contains(a, want) {
					t.Errorf("replica %d: alice's list lacks %q: %s", i, want, a)
				}
			}
			if contains(a, "bob-task") {
				t.Errorf("replica %d: alice's list shows bob's task: %s", i, a)
			}
			if b := list(i, bobToken); !contains(b, "echo: bob-task") || contains(b, "alice-task") {
				t.Errorf("replica %d: bob's list: %s", i, b)
			}
		}
	})

	t.Run("attacks round robin", func(t *testing.T) {
		runA2AAttacks(t, roundRobin(t, replicas)+"/jsonrpc", a2aWardenOutcomes())
	})

	rd.kill()
	t.Run("redis down", func(t *testing.T) {
		for i := range replicas {
			for _, m := range []string{"GetTask", "CancelTask"} {
				a := on(i).call(t, aliceToken, m, map[string]any{"id": alices[0].ID})
				if a.Error == nil || a.Error.Code != -32603 || !strings.Contains(a.raw, "HTTP 503") {
					t.Errorf("replica %d, alice's %s with Redis down: %s, want HTTP 503 -32603", i, m, a)
				}
			}
			if a := on(i).call(t, aliceToken, "SendMessage", map[string]any{"message": a2aMessage("more", map[string]any{"taskId": alices[1].ID})}); a.Error == nil || a.Error.Code != -32603 {
				t.Errorf("replica %d, alice's message to her task with Redis down: %s, want -32603", i, a)
			}
			if a := list(i, aliceToken); a.Error == nil || a.Error.Code != -32603 || !strings.Contains(a.Error.Message, "could not decide") {
				t.Errorf("replica %d, alice's list with Redis down: %s, want -32603", i, a)
			}
			// Another's handle opens for no one: refused as before, without
			// the shared state.
			if a := on(i).call(t, bobToken, "GetTask", map[string]any{"id": alices[0].ID}); a.Error == nil || a.Error.Code != -32001 {
				t.Errorf("replica %d, bob's GetTask of alice's task with Redis down: %s, want -32001", i, a)
			}
		}
		if body, code := httpGet(t, "http://"+admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "state "+rd.url()) {
			t.Errorf("/readyz with Redis down: %d %q", code, body)
		}
	})

	rd.start() // empty
	t.Run("redis restarted empty", func(t *testing.T) {
		waitReady(t, "http://"+admin+"/readyz")
		// Ownership comes from the handles and is written back; owners
		// already learned stay in each replica's cache.
		for i := range replicas {
			if a := on(i).call(t, aliceToken, "GetTask", map[string]any{"id": alices[0].ID}); !contains(a, "alice-task-a") {
				t.Errorf("replica %d, alice's GetTask after the restart: %s", i, a)
			}
			if a := on(i).call(t, bobToken, "GetTask", map[string]any{"id": alices[0].ID}); a.Error == nil || a.Error.Code != -32001 {
				t.Errorf("replica %d, bob's GetTask after the restart: %s, want -32001", i, a)
			}
			if a := list(i, aliceToken); !contains(a, "echo: alice-task-a") || !contains(a, "echo: alice-task-b") {
				t.Errorf("replica %d, alice's list after the restart: %s", i, a)
			}
		}
	})
}
