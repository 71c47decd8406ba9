package macp

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
)

// fuzzTypes are the message types FuzzStep picks from: every mode's, the core
// ones, the control operations (decided by Control) and a few that no mode
// defines.
var fuzzTypes = []string{
	"TaskRequest", "TaskAccept", "TaskReject", "TaskUpdate", "TaskComplete", "TaskFail",
	"HandoffOffer", "HandoffContext", "HandoffAccept", "HandoffDecline",
	"Proposal", "Evaluation", "Objection", "Vote",
	"CounterProposal", "Accept", "Reject", "Withdraw",
	"ApprovalRequest", "Approve", "Abstain",
	"Contribute",
	TypeCommitment, TypeProgress, TypeSignal, TypeSessionStart,
	TypeSessionCancel, TypeSessionSuspend, TypeSessionResume,
	OpCancel, OpSuspend, OpResume,
	"", "Bogus",
}

var fuzzSenders = []string{"lead", "alice", "bob", "carol", "buyer", "seller", "broker", "coord", "mallory", ""}

var fuzzModes = []string{ModeTask, ModeHandoff, ModeDecision, ModeProposal, ModeQuorum, ModeMultiRound, "macp.mode.other.v1"}

// fuzzOffsets are decision times relative to t0: inside the TTL, around the
// implicit-accept timeout, at and past the deadline.
var fuzzOffsets = []int64{1, 1_000, 6_000, ttl, ttl + 1, 10 * ttl}

// samplePayload returns a valid payload of type typ in mode.
func samplePayload(mode, typ string) []byte {
	var m proto.Message
	switch typ {
	case "TaskRequest":
		m = taskRequest("t1", "")
	case "TaskAccept":
		m = taskAccept("t1", "")
	case "TaskReject":
		m = taskReject("t1", "")
	case "TaskUpdate":
		m = taskUpdate("t1")
	case "TaskComplete":
		m = taskComplete("t1", "", "out")
	case "TaskFail":
		m = taskFail("t1", "")
	case "HandoffOffer":
		m = handoffOffer("h9", "bob")
	case "HandoffContext":
		m = handoffContext("h1")
	case "HandoffAccept":
		m = handoffAccept("h1", "")
	case "HandoffDecline":
		m = handoffDecline("h1", "")
	case "Proposal":
		if mode == ModeProposal {
			m = propose("p9")
		} else {
			m = decProposal("p9", "x")
		}
	case "Evaluation":
		m = decEval("p1", "APPROVE", 0.5)
	case "Objection":
		m = decObjection("p1", "low")
	case "Vote":
		m = decVote("p1", "APPROVE")
	case "CounterProposal":
		m = counter("p8", "p1")
	case "Accept":
		m = propAccept("p1")
	case "Reject":
		if mode == ModeQuorum {
			m = &quorumv1.RejectPayload{RequestId: "r1"}
		} else {
			m = propReject("p1", true)
		}
	case "Withdraw":
		m = withdraw("p1")
	case "ApprovalRequest":
		m = approvalRequest("r1", 1)
	case "Approve":
		m = &quorumv1.ApprovePayload{RequestId: "r1"}
	case "Abstain":
		m = &quorumv1.AbstainPayload{RequestId: "r1"}
	case "Contribute":
		m = &multiroundv1.ContributePayload{Value: "option_a"}
	case TypeCommitment:
		action := map[string]string{ModeTask: "task.completed", ModeHandoff: "handoff.accepted", ModeDecision: "decision.selected",
			ModeProposal: "proposal.accepted", ModeQuorum: "quorum.approved", ModeMultiRound: "multi_round.converged"}[mode]
		m = commit(action, true)
	case TypeSessionStart:
		m = startPayload("lead", "alice", "bob")
	default:
		return nil
	}
	return marshal(m)
}

type fuzzState struct {
	name string
	s    *Session
}

// walk steps s through msgs, committing what the rules allow and the fake
// authority lets through, and calls visit with each committed state; it
// returns the last.
func walk(s *Session, msgs []msg, visit func(i int, s *Session)) *Session {
	at := int64(0)
	for i, m := range msgs {
		if m.at != 0 {
			at = m.at
		} else {
			at++
		}
		o := Step(s, m.envelope(s, i), m.from, t0+at)
		if o.Verdict.OK() && o.Next != nil && authority(s.Mode, m.typ, o.Roles) {
			s = o.Next
			visit(i, s)
		}
	}
	return s
}

// fuzzStates are sessions in interesting states: every state a golden
// scenario passes through (fresh, mid-protocol, eligible, resolved, in every
// mode, default and bound policies), plus suspended and cancelled copies.
var fuzzStates = sync.OnceValue(func() []fuzzState {
	var out []fuzzState
	for _, sc := range goldenScenarios {
		s, o := sc.su.start()
		if s == nil {
			panic(fmt.Sprintf("%s: %+v", sc.name, o.Verdict))
		}
		out = append(out, fuzzState{sc.name + "/0", s})
		walk(s, sc.msgs, func(i int, s *Session) {
			out = append(out, fuzzState{fmt.Sprintf("%s/%d", sc.name, i+1), s})
		})
	}
	n := len(out)
	for i := 0; i < n; i += 3 {
		st := out[i]
		if st.s.State != StateOpen {
			continue
		}
		if o := Control(st.s, OpSuspend, "lead", t0+500); o.Next != nil {
			out = append(out, fuzzState{st.name + "/suspended", o.Next})
		}
		if o := Control(st.s, OpCancel, "lead", t0+500); o.Next != nil {
			out = append(out, fuzzState{st.name + "/cancelled", o.Next})
		}
	}
	return out
})

var knownCodes = []rules.Code{rules.CodeOK, rules.CodeForbidden, rules.CodeSessionNotFound, rules.CodeSessionNotOpen, rules.CodeDuplicateMessage,
	rules.CodeSessionAlreadyExists, rules.CodeInvalidEnvelope, rules.CodeUnsupportedVersion, rules.CodeModeNotSupported, rules.CodeInvalidSessionID,
	rules.CodeUnknownPolicyVersion, rules.CodePolicyDenied, rules.CodeInvalidPolicyDefinition}

// checkVerdict checks what holds of every outcome.
func checkVerdict(t testing.TB, label string, out Outcome) {
	t.Helper()
	v := out.Verdict
	if !slices.Contains(knownCodes, v.Code) {
		t.Fatalf("%s: unexpected code %q", label, v.Code)
	}
	if v.Rank > rules.RankModePost {
		t.Fatalf("%s: the rules returned rank %d", label, v.Rank)
	}
	if v.OK() {
		if v.Reason != rules.ReasonAllowed && v.Reason != rules.ReasonDuplicate || v.Rank != rules.RankPre || v.Detail != "" {
			t.Fatalf("%s: allowed with %+v", label, v)
		}
		if out.Duplicate != (v.Reason == rules.ReasonDuplicate) || out.Duplicate && out.Next != nil {
			t.Fatalf("%s: duplicate %v reason %q next %v", label, out.Duplicate, v.Reason, out.Next != nil)
		}
	} else {
		if v.Reason == "" || v.Reason == rules.ReasonAllowed || v.Reason == rules.ReasonDuplicate || v.Detail == "" {
			t.Fatalf("%s: refused with %+v", label, v)
		}
		if out.Next != nil || out.Duplicate {
			t.Fatalf("%s: refused but next=%v duplicate=%v", label, out.Next != nil, out.Duplicate)
		}
	}
	if out.Facts != nil {
		if _, err := json.Marshal(out.Facts); err != nil && !hasNaN(out.Facts) {
			t.Fatalf("%s: facts do not encode: %v", label, err)
		}
	}
}

// hasNaN reports whether facts hold a NaN: TestBugDecisionEvaluationNaNConfidence.
func hasNaN(v any) bool {
	switch x := v.(type) {
	case float64:
		return math.IsNaN(x)
	case map[string]any:
		for _, e := range x {
			if hasNaN(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNaN(e) {
				return true
			}
		}
	}
	return false
}

// checkStep runs Step (or Control for a control operation) on s and checks
// the properties that hold for any input. It returns the outcome.
func checkStep(t testing.TB, s *Session, env *macpv1.Envelope, sender string, now int64) Outcome {
	t.Helper()
	label := fmt.Sprintf("%s %s from %q at t0%+d", env.GetMode(), env.GetMessageType(), sender, now-t0)
	before := dump(s)
	var out Outcome
	control := slices.Contains([]string{OpCancel, OpSuspend, OpResume}, env.GetMessageType())
	if control {
		out = Control(s, env.GetMessageType(), sender, now)
	} else {
		out = Step(s, env, sender, now)
	}
	if after := dump(s); after != before {
		t.Fatalf("%s: mutated its input:\nbefore %s\nafter  %s", label, before, after)
	}
	checkVerdict(t, label, out)
	typ := env.GetMessageType()
	if out.Verdict.OK() && !out.Duplicate && typ != TypeSignal && out.Next == nil {
		t.Fatalf("%s: allowed without a next state", label)
	}
	// Deterministic.
	var again Outcome
	if control {
		again = Control(s, typ, sender, now)
	} else {
		again = Step(s, env, sender, now)
	}
	if again.Verdict != out.Verdict || !slices.Equal(again.Roles, out.Roles) || again.Duplicate != out.Duplicate ||
		dump(again.Next) != dump(out.Next) || !reflect.DeepEqual(normalOrNil(again.Facts), normalOrNil(out.Facts)) {
		t.Fatalf("%s: not deterministic: %+v then %+v", label, out, again)
	}
	n := out.Next
	if n == nil {
		return out
	}
	// A Progress records nothing (the runtime's signal path): its next state
	// is the input itself; any other message's is a new one.
	if (n == s) != (typ == TypeProgress) {
		t.Fatalf("%s: Next is the input session: %v", label, n == s)
	}
	// A record-only message landing on the state it was decided on commits
	// Step's next state; any other message moves the state so that a flight
	// decided before it must be decided again.
	if out.RecordOnly {
		if r, ok := s.Record(s, env, sender); !ok || dump(r) != dump(n) {
			t.Fatalf("%s: Record on the state decided on: %v\n%s\nStep gave\n%s", label, ok, dump(r), dump(n))
		}
	} else if _, ok := n.Record(s, env, sender); ok {
		t.Fatalf("%s: Record landed on a state this message changed", label)
	}
	if n.ID != s.ID || n.Mode != s.Mode || n.Initiator != s.Initiator || !slices.Equal(n.Participants, s.Participants) ||
		n.Policy != s.Policy || n.StartedAtMs != s.StartedAtMs {
		t.Fatalf("%s: Next changed the session's identity: %s", label, dump(n))
	}
	if _, err := json.Marshal(n.ModeState()); err != nil {
		t.Fatalf("%s: ModeState does not encode: %v", label, err)
	}
	// A clock earlier than the suspension (skew) is not clamped: see the report.
	backwards := typ == OpResume && now < s.Suspension().AtMs
	if n.Suspension().TotalMs < s.Suspension().TotalMs && !backwards || n.Suspension().MaxMs != s.Suspension().MaxMs {
		t.Fatalf("%s: suspension accounting: total %d -> %d, cap %d -> %d", label, s.Suspension().TotalMs, n.Suspension().TotalMs, s.Suspension().MaxMs, n.Suspension().MaxMs)
	}
	if control {
		if n.MessageCount(sender) != s.MessageCount(sender) {
			t.Fatalf("%s: a control operation counted as a message", label)
		}
		return out
	}
	if s.State != StateOpen || now > s.DeadlineMs {
		t.Fatalf("%s: accepted by a session that is not open", label)
	}
	wantState := StateOpen
	if typ == TypeCommitment {
		wantState = StateResolved
	}
	if n.State != wantState || (n.Resolution() != nil) != (typ == TypeCommitment) || n.DeadlineMs != s.DeadlineMs {
		t.Fatalf("%s: next state %v resolution %+v", label, n.State, n.Resolution())
	}
	counted := 1
	if typ == TypeProgress {
		counted = 0
	}
	if got, want := n.MessageCount(sender), s.MessageCount(sender)+counted; got != want {
		t.Fatalf("%s: MessageCount = %d, want %d", label, got, want)
	}
	// A record-only message changes nothing but the id record: pipelining
	// (proxy) decides others while it is in flight on that promise.
	if out.RecordOnly != recordOnly(typ) {
		t.Fatalf("%s: RecordOnly = %v", label, out.RecordOnly)
	}
	if out.RecordOnly && (n.State != s.State || n.Resolution() != s.Resolution() || !reflect.DeepEqual(n.modal, s.modal)) {
		t.Fatalf("%s: a record-only message changed the session: %s -> %s", label, before, dump(n))
	}
	// The same message again is a duplicate, but a Progress, which the
	// runtime relays again: decided as new, and not recorded.
	switch o := Step(n, env, sender, now); {
	case typ != TypeProgress && !o.Duplicate:
		t.Fatalf("%s: the same message again is not a duplicate: %+v", label, o.Verdict)
	case typ == TypeProgress && (o.Duplicate || o.Next != nil && o.Next != n):
		t.Fatalf("%s: the same Progress again is a duplicate or recorded: %+v", label, o.Verdict)
	}
	// Stepping the next state leaves the input alone (no shared storage).
	env2 := proto.Clone(env).(*macpv1.Envelope)
	env2.MessageId += "-again"
	_ = Step(n, env2, sender, now)
	if dump(s) != before {
		t.Fatalf("%s: stepping Next changed the input session", label)
	}
	return out
}

func normalOrNil(m map[string]any) any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprint(m)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// fuzzEnvelope builds the envelope FuzzStep decides.
func fuzzEnvelope(s *Session, typ string, modeSel uint8, id string, sender string, payload []byte) *macpv1.Envelope {
	mode := s.Mode
	if modeSel&0x80 != 0 {
		mode = fuzzModes[int(modeSel&0x7f)%len(fuzzModes)]
	}
	if typ == TypeSignal && modeSel&0x40 == 0 {
		return &macpv1.Envelope{MacpVersion: ProtocolVersion, MessageType: typ, MessageId: id, Sender: sender, Payload: payload}
	}
	return envelope(mode, typ, id, sender, payload)
}

func FuzzStep(f *testing.F) {
	states := fuzzStates()
	for i, st := range states {
		if i%6 != 0 {
			continue
		}
		for j, typ := range fuzzTypes {
			if p := samplePayload(st.s.Mode, typ); p != nil && (i+j)%2 == 0 {
				f.Add(uint16(i), uint8(j), uint8(i+j), uint8(200), uint8(0), uint8(0), p)
			}
		}
	}
	f.Add(uint16(0), uint8(21), uint8(1), uint8(200), uint8(0), uint8(0), []byte(`{"value":"x"}`))
	f.Add(uint16(3), uint8(1), uint8(1), uint8(1), uint8(0x85), uint8(4), []byte{0xff})
	f.Fuzz(func(t *testing.T, state uint16, typ, sender, id, mode, when uint8, payload []byte) {
		st := states[int(state)%len(states)]
		msgID := fmt.Sprintf("m-%d", id%24) // collides with accepted ids
		if id >= 200 {
			msgID = fmt.Sprintf("fz-%d", id)
		}
		env := fuzzEnvelope(st.s, fuzzTypes[int(typ)%len(fuzzTypes)], mode, msgID, fuzzSenders[int(sender)%len(fuzzSenders)], payload)
		checkStep(t, st.s, env, env.Sender, t0+fuzzOffsets[int(when)%len(fuzzOffsets)])
	})
}

// FuzzSequence applies a sequence of messages decoded from data to a state,
// committing what the rules allow and the fake authority lets through, so
// that the fuzzer reaches states no table builds.
func FuzzSequence(f *testing.F) {
	states := fuzzStates()
	for i := range states {
		if i%4 == 0 {
			f.Add(uint16(i), []byte{})
		}
	}
	// A seed that walks a decision session: proposal, evaluation, commitment.
	seq := func(recs ...[]byte) []byte {
		var b []byte
		for _, r := range recs {
			b = append(b, r...)
		}
		return b
	}
	rec := func(typ, sender, when uint8, payload []byte) []byte {
		return append([]byte{typ, sender, when, uint8(len(payload))}, payload...)
	}
	f.Add(uint16(0), seq(
		rec(10, 1, 0, marshal(&decisionv1.ProposalPayload{ProposalId: "p1", Option: "x"})),
		rec(11, 2, 0, marshal(decEval("p1", "APPROVE", 0.5))),
		rec(22, 0, 0, marshal(commit("decision.selected", true)))))
	f.Add(uint16(0), seq(
		rec(10, 4, 0, marshal(&proposalv1.ProposalPayload{ProposalId: "p1"})),
		rec(15, 5, 0, marshal(propAccept("p1")))))
	f.Fuzz(func(t *testing.T, state uint16, data []byte) {
		s := states[int(state)%len(states)].s
		for n := 0; len(data) >= 4 && n < 16; n++ {
			typ, sender, when, size := data[0], data[1], data[2], int(data[3])
			data = data[4:]
			if size > len(data) {
				size = len(data)
			}
			payload := data[:size]
			data = data[size:]
			from := fuzzSenders[int(sender)%len(fuzzSenders)]
			env := fuzzEnvelope(s, fuzzTypes[int(typ)%len(fuzzTypes)], typ&0x80>>1|when&0x80, fmt.Sprintf("sq-%d", n), from, payload)
			if when&0x40 != 0 {
				env.MessageId = fmt.Sprintf("m-%d", when%8)
			}
			out := checkStep(t, s, env, from, t0+fuzzOffsets[int(when&0x3f)%len(fuzzOffsets)])
			if out.Next != nil && (authority(s.Mode, env.GetMessageType(), out.Roles) || slices.Contains([]string{OpCancel, OpSuspend, OpResume}, env.GetMessageType())) {
				s = out.Next
			}
		}
	})
}

// refValidSessionID is an independent statement of the session id rule: a
// 36-character string with hyphens where a UUID has them must be a lowercase
// UUIDv4 or v7; any other string must be a base64url token of at least 22
// characters.
var (
	uuidShape = regexp.MustCompile(`^.{8}-.{4}-.{4}-.{4}-.{12}$`)
	uuidV4V7  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[47][0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	base64url = regexp.MustCompile(`^[A-Za-z0-9_-]{22,}$`)
)

func refValidSessionID(id string) bool {
	if len(id) == 36 && uuidShape.MatchString(id) {
		return uuidV4V7.MatchString(id)
	}
	return base64url.MatchString(id)
}

func FuzzStart(f *testing.F) {
	lookup := registry(
		descriptor("policy.task.strict", ModeTask, `{"completion":{"require_output":true}}`),
		descriptor("policy.any", "*", `{"commitment":{"authority":"any_participant"}}`),
		descriptor("policy.bad", "*", `{"commitment":{"authority":"nobody"}}`),
	)
	for i := range fuzzModes {
		p := startPayload("lead", "alice", "bob")
		f.Add(marshal(p), sid, uint8(i), t0-5, "m-start", "lead")
		p.PolicyVersion = "policy.any"
		f.Add(marshal(p), "Zm9vYmFyYmF6cXV4cXV1eA", uint8(i), int64(0), "m-start", "alice")
		p.PolicyVersion = "policy.task.strict"
		p.TtlMs = MaxTTLMs
		f.Add(marshal(p), "01890a5d-ac96-774b-bcce-b302099a8057", uint8(i), t0+5, "x", "lead")
	}
	f.Add([]byte{0xff}, "3F1C2A4E-9B7D-4C1E-8A2B-5D6E7F809102", uint8(0), int64(-1), "", "")
	f.Add(marshal(startPayload("lead")), "gggggggg-gggg-4ggg-gggg-gggggggggggg", uint8(1), int64(math.MaxInt64), "m", "lead")
	f.Fuzz(func(t *testing.T, payload []byte, sessionID string, modeSel uint8, ts int64, msgID, sender string) {
		if got, want := ValidSessionID(sessionID), refValidSessionID(sessionID); got != want {
			t.Fatalf("ValidSessionID(%q) = %v, reference %v", sessionID, got, want)
		}
		now := t0
		env := &macpv1.Envelope{MacpVersion: ProtocolVersion, Mode: fuzzModes[int(modeSel)%len(fuzzModes)], MessageType: TypeSessionStart,
			MessageId: msgID, SessionId: sessionID, Sender: sender, TimestampUnixMs: ts, Payload: payload}
		out := Start(nil, env, sender, lookup, now)
		checkVerdict(t, "Start", out)
		if out.Duplicate {
			t.Fatal("a duplicate without an existing session")
		}
		if !out.Verdict.OK() {
			return
		}
		s := out.Next
		if s == nil {
			t.Fatal("allowed without a session")
		}
		if !ValidSessionID(sessionID) || !supportedMode(env.Mode) || s.ID != sessionID || s.Mode != env.Mode || s.State != StateOpen || s.Initiator != sender {
			t.Fatalf("accepted start: %s", dump(s))
		}
		base := ts
		if ts <= 0 || ts > now {
			base = now
		}
		if s.StartedAtMs != base || s.DeadlineMs-s.StartedAtMs < 1 || s.DeadlineMs-s.StartedAtMs > MaxTTLMs {
			t.Fatalf("ts %d: started %d deadline %d", ts, s.StartedAtMs, s.DeadlineMs)
		}
		if n := len(s.Participants); n < 1 || n > MaxParticipants {
			t.Fatalf("%d participants", n)
		}
		seen := map[string]bool{}
		for _, p := range s.Participants {
			if blank(p) || seen[p] {
				t.Fatalf("participants %q", s.Participants)
			}
			seen[p] = true
		}
		var p macpv1.SessionStartPayload
		if err := proto.Unmarshal(payload, &p); err != nil {
			t.Fatalf("accepted a payload that does not decode: %v", err)
		}
		if wantCap := p.MaxSuspendMs; s.Suspension().MaxMs != wantCap && (wantCap != 0 || s.Suspension().MaxMs != DefaultMaxSuspend) {
			t.Fatalf("max_suspend_ms %d bound as %d", wantCap, s.Suspension().MaxMs)
		}
		if s.Policy == nil || s.MessageCount(sender) != 1 || len(s.ModeState()) == 0 {
			t.Fatalf("accepted start: %s", dump(s))
		}
		if _, err := json.Marshal(s.ModeState()); err != nil {
			t.Fatal(err)
		}
		// The same start again is a duplicate; a new one is refused.
		before := dump(s)
		if again := Start(s, env, sender, lookup, now+1); !again.Duplicate || again.Next != nil {
			t.Fatalf("retransmitted start: %+v", again)
		}
		env2 := proto.Clone(env).(*macpv1.Envelope)
		env2.MessageId += "-2"
		if again := Start(s, env2, sender, lookup, now+1); again.Verdict.Code != rules.CodeSessionAlreadyExists {
			t.Fatalf("second start: %+v", again.Verdict)
		}
		if dump(s) != before {
			t.Fatal("Start mutated the existing session")
		}
	})
}

// TestStepProperties runs the fuzz properties over every state, message type
// and sender, with a valid, an empty and a malformed payload.
func TestStepProperties(t *testing.T) {
	states := fuzzStates()
	if len(states) < 50 {
		t.Fatalf("only %d fuzz states", len(states))
	}
	n := 0
	for i, st := range states {
		if i%3 != 0 {
			continue // the fuzzers cover the rest
		}
		for _, typ := range fuzzTypes {
			for si, sender := range fuzzSenders {
				if (si+i)%3 != 0 && sender != st.s.Initiator {
					continue
				}
				for _, payload := range [][]byte{samplePayload(st.s.Mode, typ), nil, {0x0a, 0xff}} {
					id := []string{"p-new", "m-1"}[n%2]
					checkStep(t, st.s, fuzzEnvelope(st.s, typ, 0, id, sender, payload), sender, t0+fuzzOffsets[n%len(fuzzOffsets)])
					n++
				}
			}
		}
	}
	t.Logf("%d states, %d steps", len(states), n)
}
