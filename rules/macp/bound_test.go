package macp

import (
	"testing"

	"github.com/agentwarden/warden/rules"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestBoundPolicyUnknown: a session rebuilt with a governance policy whose
// definition Warden cannot know (StartBound with UnknownPolicy) decides
// everything that does not read the definition as usual and refuses, with
// the reason bound_policy_unknown, what does: a Commitment, a control call
// by anyone but the initiator, a reassignment after a rejection, a
// counter-proposal (rounds), a Reject not marked terminal. It never decides
// on another definition: the old rebuild fetched the one registered under
// the id now, which an outsider could replace, and refused every message
// once the id was unregistered. The encoding keeps the mark, so replicas
// agree.
func TestBoundPolicyUnknown(t *testing.T) {
	unknown := refused(rules.CodeUnknownPolicyVersion, rules.ReasonBoundPolicyUnknown, rules.RankPre)
	taskSetup := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob"}, policy: &PolicyDescriptor{PolicyID: "policy.p", Mode: "*"}}
	propSetup := setup{mode: ModeProposal, initiator: "lead", participants: []string{"lead", "alice"}, policy: &PolicyDescriptor{PolicyID: "policy.p", Mode: "*"}}
	for _, tc := range []struct {
		name string
		su   setup
		msgs []msg
	}{
		{"task", taskSetup, []msg{
			{from: "lead", typ: "TaskRequest", body: &taskv1.TaskRequestPayload{TaskId: "t1"}, want: expect{}},
			{from: "alice", typ: "TaskReject", body: &taskv1.TaskRejectPayload{TaskId: "t1", Assignee: "alice"}, want: expect{}},
			{from: "bob", typ: "TaskAccept", body: &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "bob"}, want: unknown},
			{from: "lead", typ: TypeCommitment, body: commit("task.failed", false), want: unknown},
		}},
		{"proposal", propSetup, []msg{
			{from: "lead", typ: "Proposal", body: &proposalv1.ProposalPayload{ProposalId: "p1", Title: "a"}, want: expect{}},
			{from: "alice", typ: "CounterProposal", body: &proposalv1.CounterProposalPayload{ProposalId: "p2", SupersedesProposalId: "p1", Title: "b"}, want: unknown},
			{from: "alice", typ: "Reject", body: &proposalv1.RejectPayload{ProposalId: "p1"}, want: unknown},
			{from: "alice", typ: "Reject", body: &proposalv1.RejectPayload{ProposalId: "p1", Terminal: true}, want: expect{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := StartBound(nil, tc.su.envelope(), tc.su.initiator, UnknownPolicy("policy.p"), t0)
			s := out.Next
			if s == nil || s.Policy.Known() || s.Policy.ID != "policy.p" {
				t.Fatalf("StartBound: %+v", out.Verdict)
			}
			b, err := s.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if s, err = DecodeSession(b); err != nil || s.Policy.Known() || s.Policy.ID != "policy.p" {
				t.Fatalf("the encoding lost the unknown policy: %v %+v", err, s.Policy)
			}
			for i, m := range tc.msgs {
				out := Step(s, m.envelope(s, i), m.from, t0+int64(i+1))
				switch {
				case m.want.code != "" && (out.Verdict.Reason != m.want.reason || out.Verdict.Code != m.want.code):
					t.Errorf("%d %s from %s: %+v, want %s", i, m.typ, m.from, out.Verdict, m.want.reason)
				case m.want.code == "" && !out.Verdict.OK():
					t.Errorf("%d %s from %s: %+v, want it decided as usual (accepted)", i, m.typ, m.from, out.Verdict)
				}
				if out.Next != nil {
					s = out.Next
				}
			}
			for _, c := range []struct {
				from string
				want rules.Reason
			}{{"alice", rules.ReasonBoundPolicyUnknown}, {"lead", rules.ReasonAllowed}} {
				if out := Control(s, OpSuspend, c.from, t0+100); out.Verdict.Reason != c.want {
					t.Errorf("SuspendSession by %s: %+v, want %s", c.from, out.Verdict, c.want)
				}
			}
		})
	}
	// A session rebuilt with the definition Warden recorded decides on it.
	d := descriptor("policy.p", ModeTask, `{"assignment":{"allow_reassignment_on_reject":true}}`)
	g, err := Bind(d)
	if err != nil {
		t.Fatal(err)
	}
	su := taskSetup
	su.policy = &d
	s := StartBound(nil, su.envelope(), "lead", g, t0).Next
	for i, m := range []msg{
		{from: "lead", typ: "TaskRequest", body: &taskv1.TaskRequestPayload{TaskId: "t1"}},
		{from: "alice", typ: "TaskReject", body: &taskv1.TaskRejectPayload{TaskId: "t1", Assignee: "alice"}},
		{from: "bob", typ: "TaskAccept", body: &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "bob"}},
	} {
		out := Step(s, m.envelope(s, i), m.from, t0+int64(i+1))
		if !out.Verdict.OK() {
			t.Fatalf("%s with the recorded definition: %+v", m.typ, out.Verdict)
		}
		s = out.Next
	}
}

// TestResumeUndatedSuspension: a session rebuilt suspended, its suspension
// dated only between its last message (Suspension.FromMs) and the rebuild
// (Suspension.AtMs), is not expired by max_suspend_ms before the runtime would
// expire it (counted from the latest), and a Resume banks into the deadline
// the longest the suspension can have lasted, within the cap: Warden refuses
// nothing the runtime accepts.
func TestResumeUndatedSuspension(t *testing.T) {
	su := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice"}}
	s, _ := su.start()
	s.State = StateSuspended
	s.SetSuspension(Suspension{MaxMs: 3_000, FromMs: t0 + 1_000, AtMs: t0 + 3_500}) // last message at +1 s, rebuilt at +3.5 s
	b, _ := s.AppendBinary(nil)
	s, err := DecodeSession(b)
	if err != nil || s.Suspension().FromMs != t0+1_000 {
		t.Fatalf("the encoding lost the undated suspension: %v", err)
	}
	// At +5 s: 4 s since the last message, 1.5 s since the rebuild.
	out := Control(s, OpResume, "lead", t0+5_000)
	if !out.Verdict.OK() {
		t.Fatalf("Resume 4 s after the last message, max_suspend_ms 3 s: %+v; the runtime accepts it when it suspended the session after +2 s", out.Verdict)
	}
	n := out.Next
	if n.Suspension().FromMs != 0 || n.Suspension().TotalMs != 1_500 || n.DeadlineMs != s.DeadlineMs+3_000 {
		t.Errorf("resumed: from %d, total %d ms, deadline +%d ms; want 0, 1500 ms, +3000 ms (4 s at most, capped at 3 s)",
			n.Suspension().FromMs, n.Suspension().TotalMs, n.DeadlineMs-s.DeadlineMs)
	}
	if out := Control(s, OpResume, "lead", t0+6_600); out.Verdict.Reason != rules.ReasonSessionExpired {
		t.Errorf("Resume 3.1 s after the rebuild: %+v, want expired (the runtime's cap has passed whenever it suspended)", out.Verdict)
	}
}
