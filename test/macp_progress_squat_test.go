package test

import (
	"testing"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
	"google.golang.org/protobuf/proto"
)

// TestMACPProgressIDSquat: a session-scoped Progress takes macp-runtime
// 0.13.0's signal path (Runtime::process_signal), which neither reads nor
// writes the session's accepted message ids. Warden recorded its id as the
// sender's, so a participant who predicted another's next message id
// squatted it with a Progress: the runtime accepted the other's message
// under it, Warden refused it DUPLICATE_MESSAGE; and once the session left
// Warden's table (--sessions 1, another session started) and was rebuilt
// from the runtime's history, which holds no Progress, the same message was
// accepted: eviction changed the answer. Each row runs on the runtime alone
// and through every door (the relay, the grpc-go oracle, ext_authz Check
// then forwarded as Envoy would), once with the session kept and once
// evicted before the last message, and every door must answer as the
// runtime does. The last rows hold that nothing opened: a message under an
// id accepted before is still the runtime's duplicate, and a message under
// a Progress's id is decided as new (an outsider's forged completion
// refused).
func TestMACPProgressIDSquat(t *testing.T) {
	runtimeAddr := startRuntime(t, "MACP_MESSAGE_LIMIT_PER_MINUTE=10000000", "MACP_SESSION_START_LIMIT_PER_MINUTE=1000000") // 72 starts
	runtime := dialMACP(t, runtimeAddr)
	type msg struct {
		sender, typ, id string
		payload         proto.Message
	}
	const squat, req = "squat", "req"
	start := msg{"planner", "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker", "other"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}}
	request := func(id string) msg {
		return msg{"planner", "TaskRequest", id, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}}
	}
	accept := func(id string) msg {
		return msg{"worker", "TaskAccept", id, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}}
	}
	progress := func(sender, id string) msg { return msg{sender, "Progress", id, nil} }
	evict := msg{typ: "evict"} // another session starts: this one leaves the table (--sessions 1)
	rows := []struct {
		name  string
		steps []msg  // the last one's answer is the row's
		want  string // "ok" or the MACP error code
	}{
		{"another's message under a Progress's id", []msg{start, request(""), progress("planner", squat), evict, accept(squat)}, "ok"},
		{"the sender's own message under its Progress's id", []msg{start, progress("planner", squat), evict, request(squat)}, "ok"},
		{"a Progress under an accepted message's id", []msg{start, request(req), evict, progress("worker", req)}, "ok"},
		{"a Progress resent", []msg{start, progress("planner", squat), evict, progress("planner", squat)}, "ok"},
		{"an accepted message resent after a Progress under its id", []msg{start, request(req), progress("worker", req), evict, request(req)}, "ok"},
		{"an outsider's completion under a Progress's id", []msg{start, request(""), accept(""), progress("worker", squat), evict,
			{"other", "TaskComplete", squat, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker"}}}, "FORBIDDEN"},
	}
	run := func(t *testing.T, through macpDoor, alone bool) {
		for _, tc := range rows {
			for _, evicted := range []bool{false, true} {
				name := tc.name
				if evicted {
					name += ", evicted"
				}
				t.Run(name, func(t *testing.T) {
					sid := newSession()
					got := ""
					for i, m := range tc.steps {
						if m.typ == "evict" {
							if evicted {
								if a := through(t, envelope(start.sender, newSession(), start.typ, "", start.payload)); a != "ok" {
									t.Fatalf("another session's start: %s", a)
								}
							}
							continue
						}
						id := m.id
						if id != "" {
							id += "-" + sid[:8]
						}
						got = through(t, envelope(m.sender, sid, m.typ, id, m.payload))
						if i < len(tc.steps)-1 && got != "ok" {
							t.Fatalf("%s from %s: %s", m.typ, m.sender, got)
						}
					}
					if got != tc.want {
						t.Errorf("%s, want %s (the runtime's answer)", got, tc.want)
					}
				})
			}
		}
	}
	eachMACPDoor(t, runtimeAddr, runtime, run, "--sessions", "1")
}
