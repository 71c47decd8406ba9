package macp

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

// TestRebuildOfferDates (O2): a handoff session decided live and the same
// session rebuilt from the runtime's history agree on whether a pending
// offer was implicitly accepted at a Commitment, whatever its sender
// stamped on its messages; where the rebuild cannot tell (it knows when the
// runtime accepted the offer within bounds only) it refuses the Commitment,
// never guesses. Live, Warden dates an offer by its own decision, which the
// runtime accepts at once (the table's times are both); the runtime runs the
// implicit accept from its own time too. A rebuild has the client's
// timestamps, which the runtime does not time by, and the runtime's stamps
// of each participant's last message. Before, the rebuild dated the offer
// by its timestamp: one stamped 50 s ahead read as pending 5 s after it had
// been implicitly accepted, and its owner's negative Commitment, which
// Warden refuses after an accepted offer, passed.
func TestRebuildOfferDates(t *testing.T) {
	const sid = "7d3c3c60-2e9f-4ebf-9c79-5f2f9e318c32"
	const planner, first, second = "agent://planner", "agent://first", "agent://second"
	t0 := time.Now().Add(-300 * time.Second).UnixMilli()
	gov, err := macp.Bind(macp.PolicyDescriptor{PolicyID: "policy.implicit", Mode: macp.ModeHandoff, SchemaVersion: 2,
		Rules: map[string]any{"acceptance": map[string]any{"implicit_accept_timeout_ms": float64(5000)}, "commitment": map[string]any{"authority": "initiator_only"}}})
	if err != nil {
		t.Fatal(err)
	}
	// one message: its sender, type, payload, when the runtime accepted it
	// (ms after t0) and how far ahead of that its sender stamped it
	type m struct {
		sender, typ string
		p           proto.Message
		at, ahead   int64
	}
	offer := func(id, to string, at, ahead int64) m {
		return m{planner, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: id, TargetParticipant: to, Scope: "s"}, at, ahead}
	}
	handoffContext := func(at int64) m {
		return m{planner, "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h2", ContentType: "text/plain"}, at, 0}
	}
	declined := []m{offer("h1", first, 1_000, 0), {first, "HandoffDecline", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: first}, 1_500, 0}}
	then := func(ms ...m) []m { return append(append([]m{}, declined...), ms...) }
	type at struct {
		ms      int64 // the Commitment's time, ms after t0
		rebuilt string
	}
	for _, tc := range []struct {
		name string
		msgs []m
		at   []at // what the rebuilt session decides; live: pending before 7_000, accepted from then
	}{
		{"stamped as accepted", then(offer("h2", second, 2_000, 0)),
			[]at{{6_999, "pending"}, {7_000, "accepted"}, {60_000, "accepted"}}},
		{"stamped 50 s ahead", then(offer("h2", second, 2_000, 50_000)),
			[]at{{6_999, "pending"}, {7_000, "accepted"}, {60_000, "accepted"}}},
		{"stamped 50 s behind", then(offer("h2", second, 2_000, -50_000)),
			[]at{{6_999, "pending"}, {7_000, "accepted"}}},
		{"stamped a day behind", then(offer("h2", second, 2_000, -86_400_000)),
			[]at{{6_999, "pending"}, {7_000, "accepted"}}},
		// Its owner's context after it: the offer is dated by the target's
		// decline before it and the context after it.
		{"context after", then(offer("h2", second, 2_000, 0), handoffContext(2_500)),
			[]at{{6_499, "pending"}, {6_500, "unknown"}, {7_499, "unknown"}, {7_500, "accepted"}}},
		{"context after, stamped 50 s ahead", then(offer("h2", second, 2_000, 50_000), handoffContext(2_500)),
			[]at{{6_499, "pending"}, {6_500, "unknown"}, {7_500, "accepted"}}},
		// accepted without the implicit accept 4.9 s after the offer:
		// younger than 5 s then
		{"context late", then(offer("h2", second, 2_000, 0), handoffContext(6_900)),
			[]at{{6_900, "pending"}, {6_999, "unknown"}, {11_899, "unknown"}, {11_900, "accepted"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := func(i int, x m) *macpv1.Envelope {
				b, err := proto.Marshal(x.p)
				if err != nil {
					t.Fatal(err)
				}
				return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeHandoff, MessageType: x.typ, MessageId: fmt.Sprint("m", i), SessionId: sid,
					Sender: x.sender, TimestampUnixMs: t0 + x.at + x.ahead, Payload: b}
			}
			start := &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeHandoff, MessageType: macp.TypeSessionStart, MessageId: "start", SessionId: sid, Sender: planner, TimestampUnixMs: t0,
				Payload: mustProto(t, &macpv1.SessionStartPayload{Participants: []string{planner, first, second}, ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: "policy.implicit", TtlMs: 600_000})}
			// Live: each message decided when the runtime accepts it.
			out := macp.StartBound(nil, start, planner, gov, t0)
			live := out.Next
			history := []*macpv1.Envelope{start}
			activity := map[string]*macpv1.ParticipantActivity{}
			for i, x := range tc.msgs {
				e := env(i, x)
				out := macp.Step(live, e, x.sender, t0+x.at)
				if out.Next == nil {
					t.Fatalf("live: %s refused: %s", x.typ, out.Verdict.Detail)
				}
				live = out.Next
				history = append(history, e)
				a := activity[x.sender]
				if a == nil {
					a = &macpv1.ParticipantActivity{ParticipantId: x.sender}
					activity[x.sender] = a
				}
				a.MessageCount++
				a.LastMessageAtUnixMs = t0 + x.at
			}
			meta := &macpv1.SessionMetadata{SessionId: sid, Mode: macp.ModeHandoff, State: macpv1.SessionState_SESSION_STATE_OPEN, Initiator: planner,
				Participants: []string{planner, first, second}, StartedAtUnixMs: t0, ExpiresAtUnixMs: t0 + 600_000, PolicyVersion: "policy.implicit"}
			for _, a := range activity {
				meta.ParticipantActivity = append(meta.ParticipantActivity, a)
			}
			rb := &Rebuilder{up: &historyConn{meta: meta, history: history}, log: slog.New(slog.DiscardHandler), Quiet: 300 * time.Millisecond}
			rebuilt, err := rb.Rebuild(context.Background(), sid, gov)
			if err != nil {
				t.Fatalf("rebuild: %v", err)
			}
			for _, c := range tc.at {
				for _, positive := range []bool{true, false} {
					commit := func(s *macp.Session) string {
						e := &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeHandoff, MessageType: macp.TypeCommitment, MessageId: "commit", SessionId: sid, Sender: planner,
							TimestampUnixMs: t0 + c.ms, Payload: mustProto(t, &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "handoff.x", AuthorityScope: "test", Reason: "r",
								OutcomePositive: positive, ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: "policy.implicit"})}
						out := macp.Step(s, e, planner, t0+c.ms)
						switch {
						case out.Verdict.OK():
							return map[bool]string{true: "accepted", false: "pending"}[out.Facts["accepted"] == true]
						case out.Verdict.Reason == rules.ReasonNotEligible:
							return "unknown"
						}
						return "refused " + out.Verdict.Detail
					}
					l, r := commit(live), commit(rebuilt)
					if wantLive := map[bool]string{true: "accepted", false: "pending"}[c.ms >= 7_000]; l != wantLive {
						t.Errorf("live, a Commitment (positive %v) at t0%+d: %s, want %s", positive, c.ms, l, wantLive)
					}
					if r != c.rebuilt {
						t.Errorf("rebuilt, a Commitment (positive %v) at t0%+d: %s, want %s (live: %s)", positive, c.ms, r, c.rebuilt, l)
					}
					if r != l && r != "unknown" {
						t.Errorf("at t0%+d the rebuilt session decides %s, live %s", c.ms, r, l)
					}
				}
			}
		})
	}
}
