package test

import (
	"strconv"
	"testing"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPRateLimits: macp-runtime 0.13.0 refuses a sender's message over
// its per-sender rate limits RATE_LIMITED (macp-auth's SecurityLayer, a 60 s
// sliding window per authenticated sender, counted after the mode's coarse
// authorization and before the session's rules, so every message it
// receives counts, duplicates and refused ones alike):
// MACP_MESSAGE_LIMIT_PER_MINUTE (600 by default) for every message but a
// SessionStart, MACP_SESSION_START_LIMIT_PER_MINUTE (60) for SessionStarts.
// ext_authz commits what it allows: a worker that filled its own window
// (duplicates of one TaskRequest in a session of its own) had its TaskAccept
// in another session allowed and committed while the runtime refused it, so
// another worker's accept, which the runtime takes, was refused. The
// runtime here runs with small limits (the defaults' behaviour at a size a
// test sends); each row's senders are its own, so no row fills another's
// window. Each row on the runtime alone and through every door.
func TestMACPRateLimits(t *testing.T) {
	const messages, starts = 6, 3
	runtimeAddr := startRuntime(t, "MACP_MESSAGE_LIMIT_PER_MINUTE="+strconv.Itoa(messages), "MACP_SESSION_START_LIMIT_PER_MINUTE="+strconv.Itoa(starts))
	runtime := dialMACP(t, runtimeAddr)
	rows := []struct {
		name string
		// run sends the row's messages through a door, senders named after
		// tag, and returns the last one's answer.
		run  func(t *testing.T, through macpDoor, tag string) string
		want string
	}{
		{"a message within the window", func(t *testing.T, through macpDoor, tag string) string {
			fill(t, through, tag, messages-1)
			return acceptIn(t, through, tag, "worker")
		}, "ok"},
		{"a message over the window", func(t *testing.T, through macpDoor, tag string) string {
			fill(t, through, tag, messages)
			return acceptIn(t, through, tag, "worker")
		}, "RATE_LIMITED"},
		{"another worker's accept after the refused one", func(t *testing.T, through macpDoor, tag string) string {
			fill(t, through, tag, messages)
			sid := acceptIn(t, through, tag, "")
			through(t, envelope("worker-"+tag, sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker-" + tag}))
			return through(t, envelope("other-"+tag, sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "other-" + tag}))
		}, "ok"},
		{"a start within the window", func(t *testing.T, through macpDoor, tag string) string {
			for range starts - 1 {
				startTask(t, through, tag)
			}
			return through(t, startOf(tag, newSession()))
		}, "ok"},
		{"a start over the window", func(t *testing.T, through macpDoor, tag string) string {
			for range starts {
				startTask(t, through, tag)
			}
			return through(t, startOf(tag, newSession()))
		}, "RATE_LIMITED"},
		{"the session of a refused start", func(t *testing.T, through macpDoor, tag string) string {
			for range starts {
				startTask(t, through, tag)
			}
			sid := newSession()
			through(t, startOf(tag, sid))
			return through(t, envelope("planner-"+tag, sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1"}))
		}, "SESSION_NOT_FOUND"},
	}
	limits := []string{"--macp-message-limit-per-minute", strconv.Itoa(messages), "--macp-session-start-limit-per-minute", strconv.Itoa(starts)}
	eachMACPDoor(t, runtimeAddr, runtime, func(t *testing.T, through macpDoor, _ bool) {
		for _, tc := range rows {
			t.Run(tc.name, func(t *testing.T) {
				if got := tc.run(t, through, newSession()[:8]); got != tc.want {
					t.Errorf("%s, want %s", got, tc.want)
				}
			})
		}
	}, limits...)
}

// startOf is planner-<tag>'s SessionStart of a task session sid with
// worker-<tag> and other-<tag>.
func startOf(tag, sid string) *macpv1.Envelope {
	return envelope("planner-"+tag, sid, "SessionStart", "", &macpv1.SessionStartPayload{
		Participants: []string{"planner-" + tag, "worker-" + tag, "other-" + tag}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
}

// startTask starts a task session as planner-<tag> and returns its id.
func startTask(t *testing.T, through macpDoor, tag string) string {
	t.Helper()
	sid := newSession()
	if got := through(t, startOf(tag, sid)); got != "ok" {
		t.Fatalf("honest SessionStart: %s", got)
	}
	return sid
}

// fill has worker-<tag> send n messages the runtime receives: a session of
// its own (its SessionStart counts in the other window), its TaskRequest and
// n-1 duplicates of it, each forwarded and counted.
func fill(t *testing.T, through macpDoor, tag string, n int) {
	t.Helper()
	sid := newSession()
	start := envelope("worker-"+tag, sid, "SessionStart", "", &macpv1.SessionStartPayload{
		Participants: []string{"worker-" + tag, "planner-" + tag}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
	if got := through(t, start); got != "ok" {
		t.Fatalf("honest SessionStart: %s", got)
	}
	req := envelope("worker-"+tag, sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1"})
	for i := range n {
		if got := through(t, req); got != "ok" {
			t.Fatalf("honest TaskRequest %d: %s", i, got)
		}
	}
}

// acceptIn starts a task session as planner-<tag>, requests a task of it
// and, when who is set, has who-<tag> accept it: it returns the accept's
// answer, or the session's id when who is empty.
func acceptIn(t *testing.T, through macpDoor, tag, who string) string {
	t.Helper()
	sid := startTask(t, through, tag)
	if got := through(t, envelope("planner-"+tag, sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1"})); got != "ok" {
		t.Fatalf("honest TaskRequest: %s", got)
	}
	if who == "" {
		return sid
	}
	return through(t, envelope(who+"-"+tag, sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: who + "-" + tag}))
}
