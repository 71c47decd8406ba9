package test

import (
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPRebuildAfterResume: a session suspended past its original deadline,
// resumed (the TTL banked) and then sent a message, is rebuilt by a Warden
// that never saw it from the real runtime's history, its SessionSuspend and
// SessionResume entries included: the message after the original deadline
// is not a divergence, and the session is not refused until it expires.
func TestMACPRebuildAfterResume(t *testing.T) {
	direct := startRuntime(t)
	first, proc := startWardenProcess(t, direct, "--auth", "dev", "--insecure-dev-auth")
	c := dialMACP(t, first)
	sid := newSession()
	c.mustAccept(envelope("planner", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 2_000}))
	control := func(who, op string) {
		t.Helper()
		ctx, cancel := as(who)
		defer cancel()
		var resp macpv1.SuspendSessionResponse
		if err := c.conn.Invoke(ctx, macpService+op, &macpv1.SuspendSessionRequest{SessionId: sid, Reason: "test"}, &resp); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	control("planner", "SuspendSession")
	time.Sleep(2500 * time.Millisecond) // past the original deadline, suspended
	control("planner", "ResumeSession")
	c.mustAccept(envelope("planner", sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}))
	proc.stop()

	second := dialMACP(t, startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth"))
	ack, err := second.sendOn(macpService+"Send", envelope("worker", sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
	if err != nil || !ack.GetOk() {
		t.Errorf("TaskAccept through a Warden rebuilding the resumed session: %v %s %s", err, ack.GetError().GetCode(), ack.GetError().GetMessage())
	}
}
