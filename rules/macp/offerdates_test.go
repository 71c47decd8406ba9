package macp

import (
	"fmt"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// declinedThenOffered is a handoff session under a 5 s implicit-accept
// timeout where alice declined h1 (at 1_500) and lead offered h2 to bob at
// 2_000 (ms after t0).
func declinedThenOffered(t *testing.T) *Session {
	implicit := withPolicy(setup{mode: ModeHandoff, initiator: "lead", participants: []string{"lead", "alice", "bob"}},
		"policy.handoff.implicit", `{"acceptance":{"implicit_accept_timeout_ms":5000}}`)
	return play(t, *implicit, []msg{
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), at: 1_000, want: accepted(lead...)},
		{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), at: 1_500, want: accepted(rP, rT)},
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob"), at: 2_000, want: accepted(lead...)},
	})
}

// offerAt is what lead's Commitment at ms after t0 finds of s's pending
// offer: "accepted", "pending", "unknown" (refused, not eligible) or
// another refusal.
func offerAt(s *Session, at int64, positive bool) string {
	env := msg{from: "lead", typ: TypeCommitment, body: commit("handoff.x", positive)}.envelope(s, 9)
	switch out := Step(s, env, "lead", t0+at); {
	case out.Verdict.OK() && out.Facts["accepted"] == true:
		return "accepted"
	case out.Verdict.OK():
		return "pending"
	case out.Verdict.Reason == rules.ReasonNotEligible:
		return "unknown"
	default:
		return fmt.Sprintf("refused %s: %s", out.Verdict.Reason, out.Verdict.Detail)
	}
}

// TestImplicitAcceptDated: the one rule Warden applies an implicit accept
// by (implicitDue, at the Commitment) on an offer dated as a live decision
// dates it and as a rebuild does (DatePendingOffer): due once the timeout
// has run from the latest time the runtime can have accepted the offer,
// not due before it has run from the earliest, and unknown in between,
// where a Commitment is refused whichever its outcome: a positive one
// needs the accept, a negative one contradicts it, and Warden cannot tell
// which the runtime decides. A dated session survives the codec.
func TestImplicitAcceptDated(t *testing.T) {
	s := declinedThenOffered(t)
	const live = -1
	for _, tc := range []struct {
		name             string
		from, by, notDue int64 // ms after t0; from live: the live decision's dates
		at               int64
		want             string
	}{
		{"live, before the timeout", live, 0, 0, 6_999, "pending"},
		{"live, at the timeout", live, 0, 0, 7_000, "accepted"},
		{"dated exactly, before", 2_000, 2_000, 0, 6_999, "pending"},
		{"dated exactly, at", 2_000, 2_000, 0, 7_000, "accepted"},
		{"a window, before its earliest", 1_500, 2_500, 0, 6_499, "pending"},
		{"a window, from its earliest", 1_500, 2_500, 0, 6_500, "unknown"},
		{"a window, before its latest", 1_500, 2_500, 0, 7_499, "unknown"},
		{"a window, from its latest", 1_500, 2_500, 0, 7_500, "accepted"},
		{"given the other way round", 2_500, 1_500, 0, 6_500, "unknown"},
		// at 7_000 the runtime accepted a later message without the accept:
		// the offer was younger than 5 s then, accepted at 2_001 or later
		{"not due at a later message", 1_500, 2_500, 7_000, 7_000, "pending"},
		{"not due at a later message, after", 1_500, 2_500, 7_000, 7_001, "unknown"},
		{"not due at a later message, at the latest", 1_500, 2_500, 7_000, 7_500, "accepted"},
		{"not due at a message past the latest", 1_500, 2_500, 9_000, 7_400, "unknown"}, // contradicts the latest: ignored
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := s
			if tc.from != live {
				before := dump(s)
				notDue := int64(0)
				if tc.notDue != 0 {
					notDue = t0 + tc.notDue
				}
				d = s.DatePendingOffer(t0+tc.from, t0+tc.by, notDue)
				if dump(s) != before {
					t.Fatal("DatePendingOffer changed its input")
				}
			}
			b, err := d.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := DecodeSession(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, sess := range []*Session{d, c} {
				for _, positive := range []bool{true, false} {
					if got := offerAt(sess, tc.at, positive); got != tc.want {
						t.Errorf("a Commitment (positive %v) at t0%+d: %s, want %s", positive, tc.at, got, tc.want)
					}
				}
			}
		})
	}
}

// TestImplicitAcceptSuspended: time a session spends suspended does not
// count toward an offer's implicit accept (RFC-MACP-0010 §5.1(1); the
// runtime subtracts the time suspended since the offer, semantics revision
// 2 on). Before, Warden counted it: after a 3 s suspension a positive
// Commitment, which Warden refuses without an accepted offer, passed 3 s
// before the runtime's timeout, over an offer nobody had accepted (the
// runtime takes it once an earlier offer was declined). A rebuilt session
// does not know when its suspensions came: the latest date moves by all of
// them.
func TestImplicitAcceptSuspended(t *testing.T) {
	s := declinedThenOffered(t)
	for _, op := range []struct {
		op string
		at int64
	}{{OpSuspend, 3_000}, {OpResume, 6_000}} {
		out := Control(s, op.op, "lead", t0+op.at)
		if out.Next == nil {
			t.Fatalf("%s: %s", op.op, out.Verdict.Detail)
		}
		s = out.Next
	}
	rebuilt := s.DatePendingOffer(t0+2_000, t0+2_000, 0) // exact, as a rebuild dates it, suspended 3 s at some time
	for _, tc := range []struct {
		at            int64
		live, rebuilt string
	}{
		{9_999, "pending", "unknown"}, // the live decision knows the suspension came after the offer
		{10_000, "accepted", "accepted"},
		{6_999, "pending", "pending"},
		{7_000, "pending", "unknown"},
	} {
		if got := offerAt(s, tc.at, true); got != tc.live {
			t.Errorf("live, a positive Commitment at t0%+d: %s, want %s", tc.at, got, tc.live)
		}
		if got := offerAt(rebuilt, tc.at, true); got != tc.rebuilt {
			t.Errorf("rebuilt, a positive Commitment at t0%+d: %s, want %s", tc.at, got, tc.rebuilt)
		}
	}
}
