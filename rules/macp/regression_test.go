package macp

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// Regression tests of defects found while writing this suite, fixed since;
// see the comment of each for the protocol reference.

// TestRegressionDecisionEvaluationNaNConfidence: RFC-MACP-0007 (and decision.go's own
// check) require an Evaluation's confidence to lie within [0, 1]. NaN is not
// within [0, 1], but `c < 0 || c > 1` is false for NaN, so the rules accept it.
// The NaN then reaches the Commitment's facts ("evaluations"), which cannot be
// encoded as JSON: the policies package cannot evaluate (OPA input) or memoize
// (appendJSON) them, so one participant can make every later Commitment of the
// session undecidable.
func TestRegressionDecisionEvaluationNaNConfidence(t *testing.T) {
	su := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice", "bob"}}
	s, _ := su.start()
	out := Step(s, envelope(ModeDecision, "Proposal", "m-1", "alice", marshal(decProposal("p1", "deploy"))), "alice", t0+1)
	if !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	s = out.Next
	for _, c := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			out := Step(s, envelope(ModeDecision, "Evaluation", "m-2", "bob", marshal(decEval("p1", "APPROVE", c))), "bob", t0+2)
			if out.Verdict.Code != rules.CodeInvalidEnvelope || out.Verdict.Reason != rules.ReasonMalformedPayload {
				t.Errorf("Evaluation with confidence %v: verdict %+v, want INVALID_ENVELOPE malformed_payload", c, out.Verdict)
			}
			if !out.Verdict.OK() {
				return
			}
			out = Step(out.Next, envelope(ModeDecision, TypeCommitment, "m-3", "lead", marshal(commit("decision.selected", true))), "lead", t0+3)
			if _, err := json.Marshal(out.Facts); err != nil {
				t.Errorf("the Commitment's facts cannot be encoded: %v", err)
			}
		})
	}
}

// TestRegressionMultiRoundLegacyJSONFieldCase: the legacy JSON Contribute payload is
// read with encoding/json, which matches object keys case-insensitively and
// keeps the last of duplicate keys. The runtime (multi_round.rs,
// parse_contribute_value) reads it with serde_json into `struct { value:
// String }`: keys are case-sensitive, unknown keys are ignored and a
// duplicate `value` is an error (after which the bytes do not decode as
// protobuf either, so the runtime answers INVALID_ENVELOPE).
//
// The first case makes Warden's state diverge from the runtime's: both accept
// the message, the runtime records "a", Warden records "b". Warden then sees
// no convergence where the runtime does (and refuses the coordinator's
// Commitment that the runtime would accept), or the reverse.
func TestRegressionMultiRoundLegacyJSONFieldCase(t *testing.T) {
	su := setup{mode: ModeMultiRound, initiator: "coord", participants: []string{"coord", "alice", "bob"}}
	tests := []struct {
		name    string
		payload string
		value   string // what the runtime records; "" with refuse
		refuse  bool
	}{
		{"exact key and upper-case key", `{"value":"a","VALUE":"b"}`, "a", false},
		{"upper-case key only", `{"VALUE":"x"}`, "", true},
		{"mixed-case key only", `{"Value":"x"}`, "", true},
		{"duplicate key", `{"value":"a","value":"b"}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := su.start()
			out := Step(s, envelope(ModeMultiRound, "Contribute", "m-1", "alice", []byte(tc.payload)), "alice", t0+1)
			if tc.refuse {
				if out.Verdict.Code != rules.CodeInvalidEnvelope {
					t.Errorf("Contribute %s: verdict %+v, want INVALID_ENVELOPE as the runtime answers", tc.payload, out.Verdict)
				}
				return
			}
			if !out.Verdict.OK() {
				t.Fatalf("Contribute %s: %+v", tc.payload, out.Verdict)
			}
			if got := out.Next.ModeState()["contributions"].(map[string]any)["alice"]; got != tc.value {
				t.Errorf("Contribute %s recorded %q; the runtime records %q", tc.payload, got, tc.value)
			}
		})
	}
}

// TestRegressionSenderIndexOverflow: a seen message_id records its sender as an int16
// (index into Participants, or -1-i into the list of other senders). With
// 32768 or more distinct senders outside the participant list the index
// wraps: the 32768th such sender gets the "never seen" marker (its
// MessageCount is 0, and any new sender reusing its message_id is answered as
// a retransmission, not DUPLICATE_MESSAGE), and the 65535th gets index 1 and is
// taken for the second participant. Low severity: under the default policy
// few senders outside the participant list are ever accepted. The state is
// built directly because building it message by message is quadratic.
func TestRegressionSenderIndexOverflow(t *testing.T) {
	su := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice"}}
	// A Progress records nothing (the runtime's signal path): the record is
	// written directly, and read by another type.
	proposal := func(s *Session, id, who string) Outcome {
		return Step(s, envelope(ModeDecision, "Proposal", id, who, marshal(decProposal("p1", "x"))), who, t0+1)
	}
	for _, n := range []int{32767, 65534} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s, _ := su.start()
			outsiders := make([]string, n)
			for i := range n {
				outsiders[i] = fmt.Sprintf("outsider-%d", i)
			}
			s.setRec(seldom{susp: s.Suspension(), senders: outsiders})
			// The next outsider is number n+1.
			s = s.share()
			s.recordID(envelope(ModeDecision, "Proposal", "o-1", "newcomer", nil), "newcomer")
			if got := s.MessageCount("newcomer"); got != 1 {
				t.Errorf("MessageCount(newcomer) = %d, want 1", got)
			}
			if got := s.MessageCount("alice"); got != 0 {
				t.Errorf("MessageCount(alice) = %d, want 0", got)
			}
			for _, other := range []string{"alice", "stranger"} {
				if out := proposal(s, "o-1", other); out.Verdict.Code != rules.CodeDuplicateMessage {
					t.Errorf("%s reusing newcomer's message_id: %+v duplicate=%v, want DUPLICATE_MESSAGE", other, out.Verdict, out.Duplicate)
				}
			}
		})
	}
}
