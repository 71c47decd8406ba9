package test

import (
	"testing"

	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPProgressIDSquat: a session-scoped Progress takes macp-runtime
// 0.13.0's signal path, which records no message id, and Warden records
// its id as the sender's (rules/macp duplicate: an id another sender used
// is refused). So a participant who predicts another's next message id
// squats it with a Progress: the runtime then accepts the other's message
// under it, Warden refuses it DUPLICATE_MESSAGE; and once the session
// leaves Warden's table (--sessions 1, another session started) and is
// rebuilt from the runtime's history, which holds no Progress, the same
// message is accepted: eviction changes the answer. A false deny, never an
// allow; ids the SDKs draw at random cannot be predicted. Left (security.md,
// seventeenth pass): the fix is in the id record (an id from a Progress
// refusing only its own sender's reuse), which the shared-state codec
// carries. Skipped until then; it fails on main at "through Warden".
func TestMACPProgressIDSquat(t *testing.T) {
	t.Skip("left: a Progress's id refuses another sender's message under it (security.md, seventeenth pass)")
	runtimeAddr := startRuntime(t)
	runtime := dialMACP(t, runtimeAddr)
	warden := dialMACP(t, startWarden(t, runtimeAddr, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1"))
	for _, c := range []struct {
		name  string
		c     macpClient
		evict bool
	}{{"runtime alone", runtime, false}, {"through Warden", warden, false}, {"through Warden, evicted", warden, true}} {
		t.Run(c.name, func(t *testing.T) {
			sid := newSession()
			msgs := taskMessages(sid)
			c.c.mustAccept(msgs[0])
			c.c.mustAccept(msgs[1])
			id := "squat-" + sid[:8]
			c.c.mustAccept(envelope("planner", sid, "Progress", id, nil))
			if c.evict {
				c.c.mustAccept(taskMessages(newSession())[0])
			}
			if a := c.c.send(envelope("worker", sid, "TaskAccept", id, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"})); !a.GetOk() {
				t.Errorf("the worker's TaskAccept under the planner's Progress id: %s %s (the runtime accepts it)", a.GetError().GetCode(), a.GetError().GetMessage())
			}
		})
	}
}
