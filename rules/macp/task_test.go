package macp

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

func taskRequest(id, assignee string) *taskv1.TaskRequestPayload {
	return &taskv1.TaskRequestPayload{TaskId: id, Title: "summarize", RequestedAssignee: assignee}
}

func taskAccept(id, assignee string) *taskv1.TaskAcceptPayload {
	return &taskv1.TaskAcceptPayload{TaskId: id, Assignee: assignee}
}

func taskReject(id, assignee string) *taskv1.TaskRejectPayload {
	return &taskv1.TaskRejectPayload{TaskId: id, Assignee: assignee, Reason: "busy"}
}

func taskUpdate(id string) *taskv1.TaskUpdatePayload {
	return &taskv1.TaskUpdatePayload{TaskId: id, Status: "running", Progress: 0.5}
}

func taskComplete(id, assignee, output string) *taskv1.TaskCompletePayload {
	return &taskv1.TaskCompletePayload{TaskId: id, Assignee: assignee, Output: []byte(output), Summary: "done"}
}

func taskFail(id, assignee string) *taskv1.TaskFailPayload {
	return &taskv1.TaskFailPayload{TaskId: id, Assignee: assignee, ErrorCode: "E", Reason: "broke"}
}

func TestTask(t *testing.T) {
	def := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob"}}
	reassign := withPolicy(def, "policy.task.reassign", `{"assignment":{"allow_reassignment_on_reject":true}}`)
	request := msg{from: "lead", typ: "TaskRequest", body: taskRequest("t1", ""), want: accepted(lead...)}
	requestAlice := msg{from: "lead", typ: "TaskRequest", body: taskRequest("t1", "alice"), want: accepted(lead...)}
	aliceAccepts := msg{from: "alice", typ: "TaskAccept", body: taskAccept("t1", ""), want: accepted(rP, rE)}

	runModeCases(t, def, []modeCase{
		{name: "happy path", state: StateResolved, msgs: []msg{
			requestAlice,
			aliceAccepts,
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: accepted(rP, rA)},
			{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "alice", "result"), want: accepted(rP, rA)},
			{from: "lead", typ: TypeCommitment, body: commit("task.completed", true), want: accepted(lead...).withFacts(map[string]any{
				"outcome_positive": true, "action": "task.completed", "report": "completed", "has_output": true})},
		}, final: map[string]any{"task_id": "t1", "active_assignee": "alice", "report": "completed", "rejected": nil, "completion_message_id": "m-3"}},

		// TaskRequest.
		{name: "one TaskRequest per session", msgs: []msg{
			request,
			{from: "lead", typ: "TaskRequest", body: taskRequest("t2", ""), want: bad(rules.ReasonStateConflict, rules.RankMode, lead...)},
			{from: "lead", typ: "TaskRequest", body: taskRequest("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankMode, lead...)},
		}, final: map[string]any{"task_id": "t1"}},
		{name: "task_id required", msgs: []msg{
			{from: "lead", typ: "TaskRequest", body: taskRequest("", ""), want: bad(rules.ReasonMalformedPayload, rules.RankMode, lead...)},
		}},
		{name: "requested_assignee must be a participant", msgs: []msg{
			{from: "lead", typ: "TaskRequest", body: taskRequest("t1", "mallory"), want: bad(rules.ReasonInvalidParticipants, rules.RankMode, lead...)},
		}},
		{name: "TaskRequest from a participant who is not the initiator", msgs: []msg{
			{from: "alice", typ: "TaskRequest", body: taskRequest("t1", ""), want: authz(rP)},
		}},
		{name: "TaskRequest from a non-participant", msgs: []msg{
			{from: "mallory", typ: "TaskRequest", body: taskRequest("t1", ""), want: authz()},
		}},
		{name: "TaskRequest that does not decode", msgs: []msg{
			{from: "lead", typ: "TaskRequest", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, lead...)},
		}},

		// TaskAccept.
		{name: "accept before the request", msgs: []msg{
			{from: "alice", typ: "TaskAccept", body: taskAccept("t1", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
		}},
		{name: "accept of another task", msgs: []msg{
			request,
			{from: "alice", typ: "TaskAccept", body: taskAccept("t2", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "TaskAccept", body: taskAccept("", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "TaskAccept", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
		}},
		{name: "the requested assignee is the only eligible one", msgs: []msg{
			requestAlice,
			{from: "bob", typ: "TaskAccept", body: taskAccept("t1", ""), want: authz(rP)},
			{from: "lead", typ: "TaskAccept", body: taskAccept("t1", ""), want: authz(lead...)},
			aliceAccepts,
		}, final: map[string]any{"active_assignee": "alice"}},
		{name: "the initiator may be the requested assignee", msgs: []msg{
			{from: "lead", typ: "TaskRequest", body: taskRequest("t1", "lead"), want: accepted(lead...)},
			{from: "alice", typ: "TaskAccept", body: taskAccept("t1", ""), want: authz(rP)},
			{from: "lead", typ: "TaskAccept", body: taskAccept("t1", ""), want: accepted(with(lead, rE)...)},
		}},
		{name: "without a requested assignee any other participant is eligible", msgs: []msg{
			request,
			{from: "lead", typ: "TaskAccept", body: taskAccept("t1", ""), want: authz(lead...)},
			{from: "mallory", typ: "TaskAccept", body: taskAccept("t1", ""), want: authz()},
			{from: "bob", typ: "TaskAccept", body: taskAccept("t1", "bob"), want: accepted(rP, rE)},
		}, final: map[string]any{"active_assignee": "bob"}},
		{name: "first accept wins", msgs: []msg{
			request,
			aliceAccepts,
			{from: "bob", typ: "TaskAccept", body: taskAccept("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "alice", typ: "TaskAccept", body: taskAccept("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
		}, final: map[string]any{"active_assignee": "alice"}},
		{name: "accept naming another assignee", msgs: []msg{
			request,
			{from: "alice", typ: "TaskAccept", body: taskAccept("t1", "bob"), want: bad(rules.ReasonIdentityMismatch, rules.RankMode, rP)},
			{from: "alice", typ: "TaskAccept", body: taskAccept("t1", "alice"), want: accepted(rP, rE)},
		}},

		// Reassignment.
		{name: "no accept after a rejection without the policy", msgs: []msg{
			request,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: accepted(rP, rE)},
			{from: "bob", typ: "TaskAccept", body: taskAccept("t1", ""), want: refused(rules.CodePolicyDenied, rules.ReasonPolicyForbids, rules.RankMode, rP)},
		}, final: map[string]any{"active_assignee": "", "rejected": []string{"alice"}}},
		{name: "the active assignee cannot reject without the policy", msgs: []msg{
			request,
			aliceAccepts,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: refused(rules.CodePolicyDenied, rules.ReasonPolicyForbids, rules.RankMode, rP)},
		}, final: map[string]any{"active_assignee": "alice", "rejected": nil}},
		{name: "reassignment with the policy", setup: reassign, msgs: []msg{
			request,
			aliceAccepts,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", "alice"), want: accepted(rP, rA)},
			{from: "bob", typ: "TaskAccept", body: taskAccept("t1", ""), want: accepted(rP, rE)},
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: authz(rP)},
			{from: "bob", typ: "TaskComplete", body: taskComplete("t1", "", ""), want: accepted(rP, rA)},
		}, final: map[string]any{"active_assignee": "bob", "rejected": []string{"alice"}, "report": "completed"}},
		{name: "a participant who rejected may accept again with the policy", setup: reassign, msgs: []msg{
			request,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: accepted(rP, rE)},
			aliceAccepts,
		}, final: map[string]any{"active_assignee": "alice", "rejected": []string{"alice"}}},
		{name: "reassignment leaves one rejection per participant", setup: reassign, msgs: []msg{
			request,
			aliceAccepts,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: accepted(rP, rA)},
			aliceAccepts,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP, rA)},
		}, final: map[string]any{"active_assignee": "alice", "rejected": []string{"alice"}}},

		// TaskReject.
		{name: "reject before the request", msgs: []msg{
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
		}},
		{name: "reject of another task", msgs: []msg{
			request,
			{from: "alice", typ: "TaskReject", body: taskReject("t9", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
		}},
		{name: "only the active assignee rejects an assigned task", setup: reassign, msgs: []msg{
			request,
			aliceAccepts,
			{from: "bob", typ: "TaskReject", body: taskReject("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "lead", typ: "TaskReject", body: taskReject("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankMode, lead...)},
		}},
		{name: "one rejection per participant", msgs: []msg{
			request,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: accepted(rP, rE)},
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP, rE)},
			{from: "bob", typ: "TaskReject", body: taskReject("t1", "bob"), want: accepted(rP, rE)},
		}, final: map[string]any{"rejected": []string{"alice", "bob"}}},
		{name: "reject naming another assignee", msgs: []msg{
			request,
			{from: "alice", typ: "TaskReject", body: taskReject("t1", "bob"), want: bad(rules.ReasonIdentityMismatch, rules.RankMode, rP)},
		}},
		{name: "reject by a participant who is not eligible", msgs: []msg{
			requestAlice,
			{from: "bob", typ: "TaskReject", body: taskReject("t1", ""), want: authz(rP)},
			{from: "lead", typ: "TaskReject", body: taskReject("t1", ""), want: authz(lead...)},
			{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: accepted(rP, rE)},
		}},

		// TaskUpdate, TaskComplete, TaskFail.
		{name: "reports only from the running active assignee", msgs: []msg{
			request,
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: authz(rP)},
			{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "", "x"), want: authz(rP)},
			aliceAccepts,
			{from: "bob", typ: "TaskUpdate", body: taskUpdate("t1"), want: authz(rP)},
			{from: "lead", typ: "TaskUpdate", body: taskUpdate("t1"), want: authz(lead...)},
			{from: "mallory", typ: "TaskComplete", body: taskComplete("t1", "", "x"), want: authz()},
			{from: "bob", typ: "TaskFail", body: taskFail("t1", ""), want: authz(rP)},
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: accepted(rP, rA)},
			{from: "alice", typ: "TaskFail", body: taskFail("t1", "alice"), want: accepted(rP, rA)},
			// After the terminal report nobody holds the role.
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: authz(rP)},
			{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "", "x"), want: authz(rP)},
			{from: "alice", typ: "TaskFail", body: taskFail("t1", ""), want: authz(rP)},
		}, final: map[string]any{"report": "failed", "completion_message_id": "m-9"}},
		{name: "reports need the task", msgs: []msg{
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			request,
			aliceAccepts,
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t2"), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "TaskComplete", body: taskComplete("", "", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "TaskFail", body: taskFail("t2", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "TaskUpdate", raw: []byte{0x0a}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
		}},
		{name: "reports naming another assignee", msgs: []msg{
			request,
			aliceAccepts,
			{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "bob", "x"), want: bad(rules.ReasonIdentityMismatch, rules.RankModePost, rP, rA)},
			{from: "alice", typ: "TaskFail", body: taskFail("t1", "bob"), want: bad(rules.ReasonIdentityMismatch, rules.RankModePost, rP, rA)},
			{from: "bob", typ: "TaskComplete", body: taskComplete("t1", "alice", "x"), want: bad(rules.ReasonIdentityMismatch, rules.RankModePost, rP)},
			{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "alice", "x"), want: accepted(rP, rA)},
		}, final: map[string]any{"report": "completed"}},

		// Commitment.
		{name: "commitment needs a terminal report", msgs: []msg{
			{from: "lead", typ: TypeCommitment, body: commit("task.completed", true), want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
			request,
			aliceAccepts,
			{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1"), want: accepted(rP, rA)},
			{from: "lead", typ: TypeCommitment, body: commit("task.failed", false), want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
		}},
		{name: "commitment payload is checked before eligibility", msgs: []msg{
			{from: "lead", typ: TypeCommitment, body: commit("task.completed", false), want: bad(rules.ReasonOutcomeMismatch, rules.RankModePost, lead...)},
		}},
		{name: "commitment after a failure", state: StateResolved, msgs: []msg{
			request, aliceAccepts,
			{from: "alice", typ: "TaskFail", body: taskFail("t1", ""), want: accepted(rP, rA)},
			{from: "lead", typ: TypeCommitment, body: commit("task.failed", false), want: accepted(lead...).withFacts(map[string]any{
				"outcome_positive": false, "action": "task.failed", "report": "failed", "has_output": false})},
		}},
		// The polarity of the commitment against the report is the policy's
		// rule; the rules hand it the facts.
		{name: "positive commitment after a failure carries the facts", msgs: []msg{
			request, aliceAccepts,
			{from: "alice", typ: "TaskFail", body: taskFail("t1", ""), want: accepted(rP, rA)},
			{from: "lead", typ: TypeCommitment, body: commit("task.completed", true), want: governed(lead...).withFacts(map[string]any{
				"outcome_positive": true, "action": "task.completed", "report": "failed", "has_output": false})},
		}},
		{name: "completion without output", state: StateResolved, msgs: []msg{
			request, aliceAccepts,
			{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "", ""), want: accepted(rP, rA)},
			{from: "lead", typ: TypeCommitment, body: commit("task.completed", true), want: accepted(lead...).withFacts(map[string]any{
				"outcome_positive": true, "action": "task.completed", "report": "completed", "has_output": false})},
		}},

		// Other types.
		{name: "message types of other modes", msgs: []msg{
			{from: "alice", typ: "Vote", body: taskUpdate("t1"), want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
			{from: "lead", typ: "HandoffOffer", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, lead...)},
			{from: "lead", typ: "taskrequest", body: taskRequest("t1", ""), want: bad(rules.ReasonUnknownMessageType, rules.RankMode, lead...)},
		}},
		{name: "progress is informational", msgs: []msg{
			{from: "alice", typ: TypeProgress, raw: []byte("anything"), want: accepted(rP)},
			{from: "mallory", typ: TypeProgress, want: authz()},
		}},
		{name: "initiator outside the participants", setup: &setup{mode: ModeTask, initiator: "lead", participants: []string{"alice", "bob"}}, msgs: []msg{
			{from: "lead", typ: "TaskRequest", body: taskRequest("t1", ""), want: accepted(rI, rC)},
			{from: "lead", typ: "TaskAccept", body: taskAccept("t1", ""), want: authz(rI, rC)},
			aliceAccepts,
		}},
	})
}

// TestStepRecordOnlyCopies: a record-only message is decided on the session
// itself and copied only when allowed. Whatever the verdict, the input is
// unchanged, and the next states of two messages decided on one state are
// states of their own: neither sees the other's id (a next state sharing
// the input's record with room to spare would write both ids into one
// array).
func TestStepRecordOnlyCopies(t *testing.T) {
	su := setup{mode: ModeTask, initiator: "planner", participants: []string{"planner", "alice", "bob"}}
	s, _ := su.start()
	for i, m := range []struct {
		from, typ string
		body      proto.Message
	}{{"planner", "TaskRequest", taskRequest("t1", "alice")}, {"alice", "TaskAccept", taskAccept("t1", "alice")}} {
		out := Step(s, envelope(ModeTask, m.typ, fmt.Sprint("m-", i), m.from, marshal(m.body)), m.from, t0+1)
		if !out.Verdict.OK() {
			t.Fatalf("%s: %+v", m.typ, out.Verdict)
		}
		s = out.Next
	}
	update := func(id, task string) *macpv1.Envelope {
		return envelope(ModeTask, "TaskUpdate", id, "alice", marshal(taskUpdate(task)))
	}
	progress := func(id, from string) *macpv1.Envelope {
		return envelope(ModeTask, TypeProgress, id, from, marshal(&macpv1.ProgressPayload{ProgressToken: "p", Progress: 1, Total: 2}))
	}
	before := dump(s)
	for _, tc := range []struct {
		name    string
		a, b    *macpv1.Envelope
		allowed bool
	}{
		{"allowed updates", update("u-a", "t1"), update("u-b", "t1"), true},
		{"updates of another task", update("u-a", "t9"), update("u-b", "t9"), false},
		{"progress", progress("p-a", "bob"), progress("p-b", "alice"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outA, outB := Step(s, tc.a, tc.a.GetSender(), t0+2), Step(s, tc.b, tc.b.GetSender(), t0+2)
			if after := dump(s); after != before {
				t.Fatalf("mutated its input:\nbefore %s\nafter  %s", before, after)
			}
			if outA.Verdict.OK() != tc.allowed || outB.Verdict.OK() != tc.allowed {
				t.Fatalf("verdicts %+v, %+v: want allowed %v", outA.Verdict, outB.Verdict, tc.allowed)
			}
			if !tc.allowed {
				if outA.Next != nil || outB.Next != nil {
					t.Fatal("a refusal has a next state")
				}
				return
			}
			if tc.name == "progress" { // records nothing: the session itself (the runtime's signal path)
				if outA.Next != s || outB.Next != s {
					t.Fatal("a Progress's next state is not the input")
				}
				return
			}
			if outA.Next == s || outB.Next == s || outA.Next == outB.Next {
				t.Fatal("a next state is the input, or the other's")
			}
			for _, c := range []struct {
				next     *Session
				own, not *macpv1.Envelope
			}{{outA.Next, tc.a, tc.b}, {outB.Next, tc.b, tc.a}} {
				if _, dup := c.next.duplicate(c.own, c.own.GetSender()); !dup {
					t.Errorf("%s: its own id is not recorded", c.own.GetMessageId())
				}
				if _, dup := c.next.duplicate(c.not, c.not.GetSender()); dup {
					t.Errorf("%s's next state records %s, decided on the same state", c.own.GetMessageId(), c.not.GetMessageId())
				}
			}
		})
	}
}

// BenchmarkStepRecordOnly decides a TaskUpdate of the running task (allowed),
// one of another task (refused by the rules), and a Progress.
func BenchmarkStepRecordOnly(b *testing.B) {
	su := setup{mode: ModeTask, initiator: "planner", participants: []string{"planner", "alice", "bob"}}
	s, _ := su.start()
	s = Step(s, envelope(ModeTask, "TaskRequest", "m-0", "planner", marshal(taskRequest("t1", "alice"))), "planner", t0+1).Next
	s = Step(s, envelope(ModeTask, "TaskAccept", "m-1", "alice", marshal(taskAccept("t1", "alice"))), "alice", t0+1).Next
	for _, bc := range []struct {
		name string
		env  *macpv1.Envelope
	}{
		{"TaskUpdate/allow", envelope(ModeTask, "TaskUpdate", "u", "alice", marshal(taskUpdate("t1")))},
		{"TaskUpdate/refuse", envelope(ModeTask, "TaskUpdate", "u", "alice", marshal(taskUpdate("t9")))},
		{"Progress/allow", envelope(ModeTask, TypeProgress, "p", "bob", marshal(&macpv1.ProgressPayload{ProgressToken: "p", Progress: 1, Total: 2}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Step(s, bc.env, bc.env.GetSender(), t0+2)
			}
		})
	}
}
