package macp

import (
	"fmt"
	"testing"
	"unique"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
)

func TestDeduplication(t *testing.T) {
	def := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice", "bob"}}
	p1 := msg{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy"), want: accepted(rP)}
	foreign := refused(rules.CodeDuplicateMessage, rules.ReasonDuplicateForeignID, rules.RankPre)
	resolve := msg{from: "lead", typ: TypeCommitment, id: "x-c", body: commit("decision.selected", true), want: accepted(lead...)}

	runModeCases(t, def, []modeCase{
		{name: "retransmission by the same sender", msgs: []msg{
			p1,
			{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy"), want: duplicate(rP)},
			// A retransmission is the same message: the id reused for
			// another type or payload is refused, never answered as a
			// duplicate (the runtime may not have recorded the id).
			{from: "alice", typ: "Vote", id: "x-1", body: decVote("p1", "APPROVE"), want: refused(rules.CodeDuplicateMessage, rules.ReasonReusedID, rules.RankPre)},
			{from: "alice", typ: "Proposal", id: "x-1", raw: []byte{0xff}, want: refused(rules.CodeDuplicateMessage, rules.ReasonReusedID, rules.RankPre)},
			{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy2"), want: refused(rules.CodeDuplicateMessage, rules.ReasonReusedID, rules.RankPre)},
		}, final: map[string]any{"phase": "Evaluation"}},
		{name: "same id from another sender", msgs: []msg{
			p1,
			{from: "bob", typ: "Proposal", id: "x-1", body: decProposal("p2", "other"), want: foreign},
			{from: "mallory", typ: "Proposal", id: "x-1", body: decProposal("p2", "other"), want: foreign},
			{from: "alice", typ: "Proposal", id: "m-start", body: decProposal("p2", "other"), want: foreign},
			{from: "lead", typ: "Vote", id: "m-start", body: decVote("p1", "APPROVE"), want: refused(rules.CodeDuplicateMessage, rules.ReasonReusedID, rules.RankPre)},
			// Ids are compared exactly.
			{from: "bob", typ: "Proposal", id: "X-1", body: decProposal("p2", "other"), want: accepted(rP)},
		}},
		{name: "deduplication comes before the mode check", msgs: []msg{
			p1,
			{from: "alice", typ: "Proposal", id: "x-1", mode: ModeTask, want: refused(rules.CodeDuplicateMessage, rules.ReasonReusedID, rules.RankPre)},
			{from: "bob", typ: "Proposal", id: "x-1", mode: ModeTask, want: foreign},
			{from: "alice", typ: "Proposal", id: "x-2", mode: ModeTask, want: bad(rules.ReasonModeMismatch, rules.RankPre)},
		}},
		{name: "deduplication comes before the OPEN gate", state: StateResolved, msgs: []msg{
			p1, resolve,
			{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy"), want: duplicate(rP)},
			{from: "lead", typ: TypeCommitment, id: "x-c", body: commit("decision.selected", true), want: duplicate(lead...)},
			{from: "bob", typ: TypeCommitment, id: "x-c", body: commit("decision.selected", true), want: foreign},
			{from: "lead", typ: TypeCommitment, id: "x-c2", body: commit("decision.selected", true), want: refused(rules.CodeSessionNotOpen, rules.ReasonSessionNotOpen, rules.RankPre)},
		}},
		{name: "deduplication comes before the TTL", msgs: []msg{
			p1,
			{from: "alice", typ: "Proposal", id: "x-1", at: ttl + 1, body: decProposal("p1", "deploy"), want: duplicate(rP)},
			{from: "alice", typ: "Proposal", id: "x-2", at: ttl + 2, body: decProposal("p2", "x"), want: refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre)},
		}},
		{name: "a refused message consumes no id", msgs: []msg{
			p1,
			{from: "bob", typ: "Evaluation", id: "x-2", body: decEval("p1", "MAYBE", 0.5), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", id: "x-2", body: decEval("p1", "APPROVE", 0.5), want: accepted(rP)},
			{from: "alice", typ: "Evaluation", id: "x-3", at: ttl + 5, body: decEval("p1", "APPROVE", 0.5), want: refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre)},
		}},
		{name: "senders outside the participants", msgs: []msg{
			{from: "mallory", typ: TypeProgress, id: "x-9", want: forced()},
			{from: "mallory", typ: TypeProgress, id: "x-9", want: forced()}, // relayed again by the runtime: decided as new
			// A Progress's id is not recorded (the runtime's signal path
			// records none): another's message under it is new.
			{from: "alice", typ: TypeProgress, id: "x-9", want: accepted(rP)},
			{from: "eve", typ: TypeProgress, id: "x-9", want: forced()},
			{from: "alice", typ: "Proposal", id: "x-9", body: decProposal("p9", "x"), want: accepted(rP)},
			{from: "mallory", typ: TypeProgress, id: "x-9", want: forced()}, // nor checked: the runtime relays it
			{from: "bob", typ: "Proposal", id: "x-9", body: decProposal("p9", "x"), want: foreign},
		}},
	})
}

func TestOpenGate(t *testing.T) {
	def := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice"}}
	notOpen := refused(rules.CodeSessionNotOpen, rules.ReasonSessionNotOpen, rules.RankPre)
	expired := refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre)
	runModeCases(t, def, []modeCase{
		{name: "nothing after resolution", state: StateResolved, msgs: []msg{
			{from: "alice", typ: "Proposal", body: decProposal("p1", "x"), want: accepted(rP)},
			{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true), want: accepted(lead...)},
			{from: "alice", typ: "Proposal", body: decProposal("p2", "x"), want: notOpen},
			{from: "alice", typ: "Vote", body: decVote("p1", "APPROVE"), want: notOpen},
			{from: "alice", typ: TypeProgress, want: notOpen},
			{from: "lead", typ: TypeCommitment, body: commit("decision.rejected", false), want: notOpen},
			{from: "alice", typ: "Bogus", raw: []byte{0xff}, want: notOpen},
		}, final: map[string]any{"phase": "Committed"}},
		{name: "a resent Progress after resolution", state: StateResolved, msgs: []msg{
			{from: "alice", typ: TypeProgress, id: "pg", want: accepted(rP)},
			{from: "alice", typ: "Proposal", id: "pp", body: decProposal("p1", "x"), want: accepted(rP)},
			{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true), want: accepted(lead...)},
			{from: "alice", typ: TypeProgress, id: "pg", want: notOpen},
			{from: "alice", typ: "Proposal", id: "pp", body: decProposal("p1", "x"), want: duplicate(rP)}, // answered, as the runtime does
		}, final: map[string]any{"phase": "Committed"}},
		{name: "TTL boundary is strict", msgs: []msg{
			{from: "alice", typ: "Proposal", body: decProposal("p1", "x"), at: ttl, want: accepted(rP)},
			{from: "alice", typ: "Proposal", body: decProposal("p2", "x"), at: ttl + 1, want: expired},
			{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true), at: ttl + 1, want: expired},
		}},
		{name: "mode mismatch is checked before the TTL", msgs: []msg{
			{from: "alice", typ: "Proposal", mode: ModeProposal, body: decProposal("p1", "x"), want: bad(rules.ReasonModeMismatch, rules.RankPre)},
			{from: "alice", typ: "Proposal", mode: ModeProposal, at: ttl + 1, want: bad(rules.ReasonModeMismatch, rules.RankPre)},
			{from: "alice", typ: "Proposal", mode: "decision", at: ttl + 2, want: bad(rules.ReasonModeMismatch, rules.RankPre)},
		}},
	})

	s, _ := def.start()
	suspended := Control(s, OpSuspend, "lead", t0+1).Next
	in := func(st State) *Session { c := s.clone(); c.State = st; return c }
	for _, tc := range []struct {
		s    *Session
		want expect
	}{
		{suspended, notOpen},
		{in(StateCancelled), notOpen},
		{in(StateResolved), notOpen},
		{in(StateUnspecified), notOpen},
		{in(StateExpired), expired},
	} {
		out := Step(tc.s, envelope(ModeDecision, "Proposal", "m-x", "alice", marshal(decProposal("p1", "x"))), "alice", t0+2)
		checkOutcome(t, tc.s.State.String(), out, tc.want)
	}
	out := Step(nil, envelope(ModeDecision, "Proposal", "m-x", "alice", nil), "alice", t0)
	checkOutcome(t, "unknown session", out, refused(rules.CodeSessionNotFound, rules.ReasonSessionUnknown, rules.RankPre))
}

func TestControl(t *testing.T) {
	su := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice"}}
	open, _ := su.start()
	deadline := t0 + ttl
	suspended := Control(open, OpSuspend, "lead", t0+10_000).Next
	week := int64(DefaultMaxSuspend)
	state := func(st State) *Session {
		c := open.clone()
		c.State = st
		return c
	}
	type want struct {
		code      rules.Code
		reason    rules.Reason
		state     State
		deadline  int64
		suspended int64
		total     int64
	}
	allowed := func(st State, deadline, suspendedAt int64) want {
		return want{reason: rules.ReasonAllowed, state: st, deadline: deadline, suspended: suspendedAt}
	}
	resumed := func(deadline, total int64) want {
		return want{reason: rules.ReasonAllowed, state: StateOpen, deadline: deadline, total: total}
	}
	notOpen := want{code: rules.CodeSessionNotOpen, reason: rules.ReasonSessionNotOpen}
	expired := want{code: rules.CodeSessionNotOpen, reason: rules.ReasonSessionExpired}
	tests := []struct {
		name   string
		s      *Session
		op     string
		sender string
		now    int64
		roles  []string
		want   want
	}{
		{"cancel open", open, OpCancel, "lead", t0 + 1, lead, allowed(StateCancelled, deadline, 0)},
		{"cancel open by a participant", open, OpCancel, "alice", t0 + 1, []string{rP}, allowed(StateCancelled, deadline, 0)},
		{"cancel open by an outsider", open, OpCancel, "mallory", t0 + 1, nil, allowed(StateCancelled, deadline, 0)},
		{"cancel at the deadline", open, OpCancel, "lead", deadline, lead, allowed(StateCancelled, deadline, 0)},
		{"cancel after the deadline", open, OpCancel, "lead", deadline + 1, lead, expired},
		{"cancel suspended", suspended, OpCancel, "lead", t0 + 20_000, lead, allowed(StateCancelled, deadline, t0+10_000)},
		{"cancel suspended past its old deadline", suspended, OpCancel, "lead", deadline + 50_000, lead, allowed(StateCancelled, deadline, t0+10_000)},
		{"cancel suspended at the suspension cap", suspended, OpCancel, "lead", t0 + 10_000 + week, lead, allowed(StateCancelled, deadline, t0+10_000)},
		{"cancel suspended past the suspension cap", suspended, OpCancel, "lead", t0 + 10_001 + week, lead, expired},
		{"cancel resolved", state(StateResolved), OpCancel, "lead", t0 + 1, lead, notOpen},
		{"cancel cancelled", state(StateCancelled), OpCancel, "lead", t0 + 1, lead, notOpen},
		{"cancel expired", state(StateExpired), OpCancel, "lead", t0 + 1, lead, expired},

		{"suspend open", open, OpSuspend, "lead", t0 + 10_000, lead, allowed(StateSuspended, deadline, t0+10_000)},
		{"suspend at the deadline", open, OpSuspend, "lead", deadline, lead, allowed(StateSuspended, deadline, deadline)},
		{"suspend after the deadline", open, OpSuspend, "lead", deadline + 1, lead, expired},
		{"suspend expired", state(StateExpired), OpSuspend, "lead", t0 + 1, lead, expired},
		{"suspend suspended", suspended, OpSuspend, "lead", t0 + 20_000, lead, notOpen},
		{"suspend resolved", state(StateResolved), OpSuspend, "lead", t0 + 1, lead, notOpen},
		{"suspend cancelled", state(StateCancelled), OpSuspend, "lead", t0 + 1, lead, notOpen},

		{"resume open", open, OpResume, "lead", t0 + 1, lead, notOpen},
		{"resume suspended banks the TTL", suspended, OpResume, "lead", t0 + 25_000, lead, resumed(deadline+15_000, 15_000)},
		{"resume suspended past its old deadline", suspended, OpResume, "lead", deadline + 100_000, lead, resumed(deadline+ttl+100_000-10_000, ttl+100_000-10_000)},
		{"resume at once", suspended, OpResume, "lead", t0 + 10_000, lead, resumed(deadline, 0)},
		{"resume at the suspension cap", suspended, OpResume, "lead", t0 + 10_000 + week, lead, resumed(deadline+week, week)},
		{"resume past the suspension cap", suspended, OpResume, "lead", t0 + 10_001 + week, lead, expired},
		{"resume resolved", state(StateResolved), OpResume, "lead", t0 + 1, lead, notOpen},
		{"resume expired", state(StateExpired), OpResume, "lead", t0 + 1, lead, expired},

		{"unknown operation", open, "PauseSession", "lead", t0 + 1, lead, want{code: rules.CodeInvalidEnvelope, reason: rules.ReasonUnknownMessageType}},
		{"message type is not an operation", open, TypeSessionCancel, "lead", t0 + 1, lead, want{code: rules.CodeInvalidEnvelope, reason: rules.ReasonUnknownMessageType}},
		{"unknown session", nil, OpCancel, "lead", t0 + 1, nil, want{code: rules.CodeSessionNotFound, reason: rules.ReasonSessionUnknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(tc.s)
			out := Control(tc.s, tc.op, tc.sender, tc.now)
			if dump(tc.s) != before {
				t.Fatal("Control mutated its input")
			}
			v := out.Verdict
			if v.Code != tc.want.code || v.Reason != tc.want.reason || v.Rank != rules.RankPre {
				t.Fatalf("verdict = %+v, want %q %q", v, tc.want.code, tc.want.reason)
			}
			if !sameRoles(out.Roles, tc.roles) {
				t.Errorf("roles = %q, want %q", out.Roles, tc.roles)
			}
			if !v.OK() {
				if out.Next != nil {
					t.Errorf("a refusal returned a next state")
				}
				return
			}
			n := out.Next
			if n == nil {
				t.Fatal("allowed without a next state")
			}
			if n.State != tc.want.state || n.DeadlineMs != tc.want.deadline || n.Suspension().AtMs != tc.want.suspended || n.Suspension().TotalMs != tc.want.total {
				t.Errorf("next: state %v deadline t0%+d suspended %d total %d, want %v t0%+d %d %d",
					n.State, n.DeadlineMs-t0, n.Suspension().AtMs, n.Suspension().TotalMs, tc.want.state, tc.want.deadline-t0, tc.want.suspended, tc.want.total)
			}
			if n.MessageCount("lead") != tc.s.MessageCount("lead") {
				t.Errorf("a control operation counted as a message")
			}
		})
	}
}

// TestSuspendResume: the TTL is banked across suspensions, the session takes
// no message while suspended, and banking accumulates over several pauses.
func TestSuspendResume(t *testing.T) {
	su := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice"}}
	s, _ := su.start()
	proposal := func(id string) []byte { return marshal(decProposal(id, "x")) }
	step := func(s *Session, id string, now int64) Outcome {
		return Step(s, envelope(ModeDecision, "Proposal", id, "alice", proposal(id)), "alice", now)
	}
	mustControl := func(s *Session, op string, now int64) *Session {
		t.Helper()
		out := Control(s, op, "lead", now)
		if !out.Verdict.OK() {
			t.Fatalf("%s at %d: %+v", op, now-t0, out.Verdict)
		}
		return out.Next
	}
	s = mustControl(s, OpSuspend, t0+10_000) // 50 s left
	if out := step(s, "p1", t0+10_001); out.Verdict.Reason != rules.ReasonSessionNotOpen {
		t.Errorf("message while suspended: %+v", out.Verdict)
	}
	if s.Expired(t0 + 10*ttl) {
		t.Errorf("a suspended session expired on its old deadline")
	}
	s = mustControl(s, OpResume, t0+30_000)  // deadline t0+80_000
	s = mustControl(s, OpSuspend, t0+40_000) // 40 s left
	s = mustControl(s, OpResume, t0+100_000) // deadline t0+140_000
	if s.DeadlineMs != t0+140_000 {
		t.Fatalf("deadline = t0%+d, want t0+140000", s.DeadlineMs-t0)
	}
	if out := step(s, "p1", t0+140_000); !out.Verdict.OK() {
		t.Errorf("message at the banked deadline: %+v", out.Verdict)
	}
	if out := step(s, "p2", t0+140_001); out.Verdict.Reason != rules.ReasonSessionExpired {
		t.Errorf("message after the banked deadline: %+v", out.Verdict)
	}
	if s.Expired(t0+140_000) || !s.Expired(t0+140_001) {
		t.Errorf("Expired around the banked deadline is wrong")
	}
}

// TestSuspensionCap: the suspended time is capped by max_suspend_ms (or
// DefaultMaxSuspend), cumulatively across pauses (RFC-MACP-0001 §7.5).
func TestSuspensionCap(t *testing.T) {
	p := startPayload("lead", "alice")
	p.MaxSuspendMs = 30_000
	env := envelope(ModeDecision, TypeSessionStart, "m-start", "lead", marshal(p))
	out := Start(nil, env, "lead", nil, t0)
	if !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	s := out.Next
	if s.Suspension().MaxMs != 30_000 || s.Suspension().TotalMs != 0 {
		t.Fatalf("cap %d total %d", s.Suspension().MaxMs, s.Suspension().TotalMs)
	}
	control := func(s *Session, op string, now int64) Outcome { return Control(s, op, "lead", now) }
	s = control(s, OpSuspend, t0+1_000).Next
	s = control(s, OpResume, t0+21_000).Next // 20 s suspended
	if s.Suspension().TotalMs != 20_000 || s.DeadlineMs != t0+ttl+20_000 {
		t.Fatalf("total %d deadline t0%+d", s.Suspension().TotalMs, s.DeadlineMs-t0)
	}
	s = control(s, OpSuspend, t0+22_000).Next
	// 10 s more reaches the cap exactly: still suspended.
	if s.Expired(t0+32_000) || !s.Expired(t0+32_001) {
		t.Errorf("Expired around the cap is wrong")
	}
	if e := s.Expire(t0 + 32_000); e != s {
		t.Errorf("Expire before the cap returned a copy")
	}
	before := dump(s)
	e := s.Expire(t0 + 32_001)
	if e == s || e.State != StateExpired || s.State != StateSuspended || dump(s) != before {
		t.Errorf("Expire past the cap: %v, input %v", e.State, s.State)
	}
	checkOutcome(t, "resume past the cap", control(s, OpResume, t0+32_001), refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre, lead...))
	checkOutcome(t, "cancel past the cap", control(s, OpCancel, t0+32_001), refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre, lead...))
	msg := envelope(ModeDecision, "Proposal", "m-1", "alice", marshal(decProposal("p1", "x")))
	checkOutcome(t, "message past the cap", Step(s, msg, "alice", t0+32_001), refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre))
	checkOutcome(t, "message before the cap", Step(s, msg, "alice", t0+32_000), refused(rules.CodeSessionNotOpen, rules.ReasonSessionNotOpen, rules.RankPre))
	if out := control(s, OpResume, t0+32_000); !out.Verdict.OK() || out.Next.Suspension().TotalMs != 30_000 {
		t.Errorf("resume at the cap: %+v", out)
	}
}

func TestExpire(t *testing.T) {
	s, _ := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice"}}.start()
	deadline := t0 + ttl
	if s.Expire(deadline) != s {
		t.Errorf("Expire at the deadline returned a copy")
	}
	before := dump(s)
	e := s.Expire(deadline + 1)
	if e == s || e.State != StateExpired || dump(s) != before {
		t.Fatalf("Expire after the deadline: %v", e.State)
	}
	// An expired copy keeps its history: a retransmission is still a
	// duplicate, anything new is refused as expired.
	if out := Step(e, s.startEnvelopeForTest(), "lead", deadline+2); !out.Duplicate {
		t.Errorf("retransmitted start on an expired session: %+v", out)
	}
	checkOutcome(t, "new message", Step(e, envelope(ModeTask, "TaskRequest", "m-9", "lead", marshal(taskRequest("t1", ""))), "lead", t0+1),
		refused(rules.CodeSessionNotOpen, rules.ReasonSessionExpired, rules.RankPre))
	for _, st := range []State{StateResolved, StateCancelled, StateExpired} {
		c := s.clone()
		c.State = st
		if c.Expire(deadline+1) != c {
			t.Errorf("Expire of a %v session returned a copy", st)
		}
	}
}

// startEnvelopeForTest is the SessionStart every setup sends.
func (s *Session) startEnvelopeForTest() *macpv1.Envelope {
	su := setup{mode: s.Mode, initiator: s.Initiator, participants: s.Participants}
	return su.envelope()
}

func TestExpired(t *testing.T) {
	s, _ := setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice"}}.start()
	in := func(st State) *Session { c := s.clone(); c.State = st; return c }
	deadline := t0 + ttl
	suspended := Control(s, OpSuspend, "lead", t0+1).Next
	tests := []struct {
		name string
		s    *Session
		now  int64
		want bool
	}{
		{"open before the deadline", s, t0, false},
		{"open at the deadline", s, deadline, false},
		{"open after the deadline", s, deadline + 1, true},
		{"suspended after the deadline", suspended, deadline + 1, false},
		{"suspended at the cap", suspended, t0 + 1 + DefaultMaxSuspend, false},
		{"suspended past the cap", suspended, t0 + 2 + DefaultMaxSuspend, true},
		{"resolved", in(StateResolved), t0, true},
		{"cancelled", in(StateCancelled), t0, true},
		{"expired", in(StateExpired), t0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Expired(tc.now); got != tc.want {
				t.Errorf("Expired = %v, want %v", got, tc.want)
			}
		})
	}
	for st := StateUnspecified; st <= StateCancelled+1; st++ {
		want := st == StateResolved || st == StateExpired || st == StateCancelled
		if st.Terminal() != want {
			t.Errorf("%v.Terminal() = %v", st, st.Terminal())
		}
	}
	if StateOpen.String() != "Open" || State(42).String() != "Unknown" {
		t.Errorf("State.String: %q %q", StateOpen, State(42))
	}
}

func TestMessageCount(t *testing.T) {
	// The coordinator of a quorum session is not a participant.
	su := setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice", "bob"}}
	s := play(t, su, []msg{
		{from: "lead", typ: "ApprovalRequest", id: "a", body: approvalRequest("r1", 1), want: accepted(rI, rC)},
		castBallot("Approve", "alice", "r1", accepted(rP)),
		{from: "alice", typ: TypeProgress, id: "p", want: accepted(rP)},
		{from: "alice", typ: TypeProgress, id: "p", want: accepted(rP)}, // decided as new, not counted (the runtime does not)
		castBallot("Approve", "bob", "r9", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
		{from: "mallory", typ: TypeProgress, id: "q", want: forced()},
		{from: "eve", typ: TypeProgress, id: "r", want: forced()},
		{from: "eve", typ: TypeProgress, id: "s", want: forced()},
	})
	want := map[string]int{"lead": 2, "alice": 1, "bob": 0, "mallory": 0, "eve": 0, "carol": 0, "": 0}
	for who, n := range want {
		if got := s.MessageCount(who); got != n {
			t.Errorf("MessageCount(%q) = %d, want %d", who, got, n)
		}
	}
}

// TestProgressRecordsNothing: a Progress, which macp-runtime 0.13.0 takes
// on its signal path without reading or writing the session's accepted ids,
// leaves the id record as it was, whoever sends it and however many: its
// next state is the session itself, and another sender's message under its
// id is new, as the runtime takes it.
func TestProgressRecordsNothing(t *testing.T) {
	s, _ := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice"}}.start()
	const n = 300
	for i := range n {
		who := fmt.Sprintf("outsider-%d", i)
		for j := range 2 {
			out := Step(s, envelope(ModeDecision, TypeProgress, fmt.Sprintf("%s-%d", who, j), who, nil), who, t0+1)
			if !out.Verdict.OK() || out.Next != s || out.Duplicate {
				t.Fatalf("%s's Progress: %+v, next is the session %v", who, out, out.Next == s)
			}
			if r, ok := s.Record(s, envelope(ModeDecision, TypeProgress, fmt.Sprintf("%s-%d", who, j), who, nil), who); !ok || r != s {
				t.Fatalf("%s's Progress landing in flight: %v, the session %v", who, ok, r == s)
			}
		}
	}
	if len(s.seen) != 1 || len(s.outsiders()) != 0 || s.MessageCount("lead") != 1 {
		t.Fatalf("the record grew: %d ids, %d outsiders", len(s.seen), len(s.outsiders()))
	}
	if out := Step(s, envelope(ModeDecision, "Proposal", "outsider-0-0", "alice", marshal(decProposal("p1", "x"))), "alice", t0+2); !out.Verdict.OK() || out.Duplicate {
		t.Fatalf("alice's Proposal under outsider-0's Progress id: %+v", out)
	}
}

// TestModeStateIsACopy: ModeState returns values the caller may change without
// touching the session.
func TestModeStateIsACopy(t *testing.T) {
	s := play(t, setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob"}}, []msg{
		{from: "lead", typ: "TaskRequest", body: taskRequest("t1", ""), want: accepted(lead...)},
		{from: "alice", typ: "TaskReject", body: taskReject("t1", ""), want: accepted(rP, rE)},
	})
	before := dump(s)
	ms := s.ModeState()
	ms["rejected"].([]string)[0] = "changed"
	ms["task_id"] = "changed"
	if dump(s) != before {
		t.Errorf("changing ModeState() changed the session")
	}
	// A decision's tallies too.
	d := play(t, setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice"}}, []msg{
		{from: "alice", typ: "Proposal", body: &decisionv1.ProposalPayload{ProposalId: "p1", Option: "x"}, want: accepted(rP)},
		{from: "alice", typ: "Vote", body: decVote("p1", "APPROVE"), want: accepted(rP)},
	})
	before = dump(d)
	d.ModeState()["votes"].(map[string]any)["p1"].(map[string]any)["alice"] = "changed"
	if dump(d) != before {
		t.Errorf("changing ModeState() changed the session")
	}
}

// TestHandBuiltSession: a session assembled field by field (as a rebuild
// might) rather than by Start still deduplicates, and a mode without state is
// refused rather than crashing.
func TestHandBuiltSession(t *testing.T) {
	s := &Session{ID: sid, Mode: ModeDecision, State: StateOpen, Initiator: "lead", Participants: []string{"lead", "alice"},
		versions: unique.Make(Versions{Mode: SupportedModeVer, Config: cfg}), Policy: defaultGovernance, DeadlineMs: t0 + ttl, modal: &decisionState{}}
	env := envelope(ModeDecision, "Proposal", "m-1", "alice", marshal(decProposal("p1", "x")))
	out := Step(s, env, "alice", t0)
	checkOutcome(t, "first message", out, accepted(rP))
	checkOutcome(t, "retransmission", Step(out.Next, env, "alice", t0), duplicate(rP))
	if out.Next.MessageCount("alice") != 1 {
		t.Errorf("MessageCount = %d", out.Next.MessageCount("alice"))
	}
	bare := &Session{ID: sid, Mode: "ext.unknown.v1", State: StateOpen, Policy: defaultGovernance, DeadlineMs: t0 + ttl}
	checkOutcome(t, "mode without state", Step(bare, envelope("ext.unknown.v1", "Anything", "m-1", "lead", nil), "lead", t0),
		refused(rules.CodeModeNotSupported, rules.ReasonModeNotSupported, rules.RankPre))
}
