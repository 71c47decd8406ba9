package test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestA2APushRevoked (issue 24 round 2): a push config alice set with a
// token the operator then removes (reloaded on SIGHUP) is no longer
// delivered to: the real server's push to the relay when her task completes
// is answered 410 Gone and her webhook gets nothing about the task, while
// bob's config, set with a token still configured, is delivered. Before,
// the relay delivered every push to the URL the revoked token set.
func TestA2APushRevoked(t *testing.T) {
	for _, s := range a2aServers() {
		t.Run(s.name, func(t *testing.T) {
			base := s.start(t)
			hook := newHookRecorder(t)
			tokens := filepath.Join(t.TempDir(), "tokens.json")
			writeTokens(t, tokens, map[string]string{aliceToken: "alice", bobToken: "bob"})
			warden, proc := startA2AWardenTokens(t, base, tokens,
				"--a2a-webhook-allow", strings.TrimPrefix(strings.TrimSuffix(hook.url, "/hook"), "http://"))
			e := &a2aAttackEnv{url: warden + "/jsonrpc"}
			// Each starts a task the server completes by itself in 5 s,
			// and sets a push config for it.
			setPush := func(token string) a2aTask {
				task, a := e.send(t, token, "wait 5", nil, true)
				if task.ID == "" {
					t.Fatalf("task not created: %s", a)
				}
				if a := e.call(t, token, "CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": hook.url, "token": "tok-relay"}); a.Error != nil {
					t.Fatalf("config refused: %s", a)
				}
				return task
			}
			about := func(id string) func(hookCall) bool {
				return func(c hookCall) bool { return pushedTaskID(c.body) == id }
			}
			kept := setPush(bobToken)
			revoked := setPush(aliceToken)
			// The operator removes alice's token. An event of her task
			// from before (the server's working update) may have been
			// delivered while her token was still configured; what
			// happens after may not.
			removed := time.Now()
			writeTokens(t, tokens, map[string]string{bobToken: "bob"})
			proc.reload(t)
			if a := e.call(t, aliceToken, "GetTask", map[string]any{"id": revoked.ID}); a.Error == nil {
				t.Fatalf("the removed token still authenticates after the reload: %s", a)
			}
			timed := func(c hookCall) bool { _, ok := pushedAt(c.body); return about(kept.ID)(c) && ok }
			if _, ok := hook.waitFor(15*time.Second, timed); !ok { // (a status's time read, else the check below reads none)
				t.Fatalf("bob's config, his token still configured, was not delivered a status update")
			}
			afterRemoval := func(c hookCall) bool {
				at, ok := pushedAt(c.body)
				return about(revoked.ID)(c) && (!ok || !at.Before(removed))
			}
			if c, ok := hook.waitFor(3*time.Second, afterRemoval); ok {
				t.Fatalf("the config set with the removed token was delivered to: %s", c.body)
			}
			logs := proc.output()
			if !strings.Contains(logs, "push_config_revoked") {
				t.Errorf("no log line names why the push was refused; logs:\n%s", logs)
			}
		})
	}
}

// pushedAt is the status timestamp of a pushed task or status update (ok:
// it names one).
func pushedAt(body string) (time.Time, bool) {
	type status struct {
		Timestamp time.Time `json:"timestamp"`
	}
	var n struct {
		Task struct {
			Status status `json:"status"`
		} `json:"task"`
		StatusUpdate struct {
			Status status `json:"status"`
		} `json:"statusUpdate"`
	}
	_ = json.Unmarshal([]byte(body), &n)
	for _, s := range []status{n.StatusUpdate.Status, n.Task.Status} {
		if !s.Timestamp.IsZero() {
			return s.Timestamp, true
		}
	}
	return time.Time{}, false
}
