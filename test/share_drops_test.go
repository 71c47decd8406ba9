package test

import (
	"fmt"
	"strings"
	"testing"
)

// TestShareDropsVisible: the A2A sidecar (bin/warden) on Redis (--state),
// each principal to 4 entries of the owner table. Alice creates 10 tasks
// (each with a context of its own: 20 entries); her oldest are dropped, in
// this replica's table and in Redis. An operator sees it: /metrics counts the drops by table and store
// (warden_share_drops_total), and one warning names alice and the table;
// bob, within his share, is not named. Before, nothing said so: the
// counter did not exist and nothing was logged.
func TestShareDropsVisible(t *testing.T) {
	rd := startRedis(t)
	admin := freeAddr(t)
	url, proc := startA2AWardenProcess(t, startA2AGo(t), "--state", rd.url(), "--sessions-per-principal", "4", "--admin-listen", admin)
	e := &a2aAttackEnv{url: url + "/jsonrpc"}
	if task, a := e.send(t, bobToken, "bob's only task", nil, false); task.ID == "" {
		t.Fatalf("bob's task: %s", a)
	}
	var first a2aTask
	for i := range 10 {
		task, a := e.send(t, aliceToken, fmt.Sprint("alice's task ", i), nil, false)
		if task.ID == "" {
			t.Fatalf("alice's task %d: %s", i, a)
		}
		if i == 0 {
			first = task
		}
	}
	// Her first task's handle still proves it hers (Claim records it
	// again, and drops another of her oldest): dropped is not lost to a
	// holder of handles.
	if a := e.call(t, aliceToken, "GetTask", map[string]any{"id": first.ID}); a.Error != nil {
		t.Fatalf("alice's first task by its handle: %s", a)
	}
	for _, store := range []string{"memory", "redis"} {
		sample := fmt.Sprintf(`warden_share_drops_total{store=%q,table="owners"}`, store)
		if n := metric(t, admin, sample); n < 10 {
			t.Errorf("%s = %d, want at least 10 (alice's 20 entries, 4 kept)", sample, n)
		}
	}
	if n := metric(t, admin, `warden_share_drops_total{store="memory",table="tools"}`); n != 0 {
		t.Errorf("tools drops = %d, want 0", n)
	}
	logs := proc.output()
	warns := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "over its share") {
			warns++
			if !strings.Contains(line, "alice") || !strings.Contains(line, "owners") {
				t.Errorf("the warning names neither alice nor the table: %s", line)
			}
		}
	}
	if warns != 1 {
		t.Errorf("%d warnings of a principal over its share, want 1 (at most once a minute):\n%s", warns, logs)
	}
}
