package macp

import (
	"testing"

	"github.com/agentwarden/warden/rules"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

func handoffOffer(id, target string) *handoffv1.HandoffOfferPayload {
	return &handoffv1.HandoffOfferPayload{HandoffId: id, TargetParticipant: target, Scope: "payments"}
}

func handoffContext(id string) *handoffv1.HandoffContextPayload {
	return &handoffv1.HandoffContextPayload{HandoffId: id, ContentType: "application/json", Context: []byte(`{}`)}
}

func handoffAccept(id, by string) *handoffv1.HandoffAcceptPayload {
	return &handoffv1.HandoffAcceptPayload{HandoffId: id, AcceptedBy: by}
}

func handoffDecline(id, by string) *handoffv1.HandoffDeclinePayload {
	return &handoffv1.HandoffDeclinePayload{HandoffId: id, DeclinedBy: by}
}

func offers(kv ...string) map[string]any {
	out := map[string]any{}
	for i := 0; i+2 < len(kv); i += 3 {
		out[kv[i]] = map[string]any{"target": kv[i+1], "disposition": kv[i+2]}
	}
	return out
}

func TestHandoff(t *testing.T) {
	def := setup{mode: ModeHandoff, initiator: "lead", participants: []string{"lead", "alice", "bob", "carol"}}
	implicit := withPolicy(def, "policy.handoff.implicit", `{"acceptance":{"implicit_accept_timeout_ms":5000}}`)
	offerAlice := msg{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), want: accepted(lead...)}
	owner := with(lead, rO)
	handoffFacts := func(positive bool, action string, acc, dec bool) map[string]any {
		return map[string]any{"outcome_positive": positive, "action": action, "accepted": acc, "declined": dec}
	}

	runModeCases(t, def, []modeCase{
		{name: "happy path", state: StateResolved, msgs: []msg{
			offerAlice,
			{from: "lead", typ: "HandoffContext", body: handoffContext("h1"), want: accepted(owner...)},
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", "alice"), want: accepted(rP, rT)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.accepted", true), want: accepted(lead...).withFacts(handoffFacts(true, "handoff.accepted", true, false))},
		}, final: map[string]any{"offers": offers("h1", "alice", "Accepted")}},

		// HandoffOffer.
		{name: "offer fields required", msgs: []msg{
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("", "alice"), want: bad(rules.ReasonMalformedPayload, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", ""), want: bad(rules.ReasonMalformedPayload, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", raw: []byte{0xff, 0x01}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, lead...)},
		}, final: map[string]any{"offers": offers()}},
		{name: "offer target must be another participant", msgs: []msg{
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "mallory"), want: bad(rules.ReasonInvalidParticipants, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "lead"), want: bad(rules.ReasonInvalidParticipants, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "Alice"), want: bad(rules.ReasonInvalidParticipants, rules.RankMode, lead...)},
		}},
		{name: "offer from a participant who is not the owner", msgs: []msg{
			{from: "alice", typ: "HandoffOffer", body: handoffOffer("h1", "bob"), want: authz(rP)},
			{from: "alice", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), want: bad(rules.ReasonInvalidParticipants, rules.RankMode, rP)},
		}},
		{name: "one outstanding offer", msgs: []msg{
			offerAlice,
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob"), want: bad(rules.ReasonStateConflict, rules.RankMode, lead...)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Offered")}},
		{name: "handoff ids are unique", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: accepted(rP, rT)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "bob"), want: bad(rules.ReasonStateConflict, rules.RankMode, lead...)},
		}},
		{name: "no offer after an accept", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: accepted(rP, rT)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob"), want: bad(rules.ReasonStateConflict, rules.RankMode, lead...)},
		}},
		{name: "no re-offer to a declined target", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", "alice"), want: accepted(rP, rT)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "alice"), want: bad(rules.ReasonReofferDeclined, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob"), want: accepted(lead...)},
			{from: "bob", typ: "HandoffDecline", body: handoffDecline("h2", ""), want: accepted(rP, rT)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h3", "alice"), want: bad(rules.ReasonReofferDeclined, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h3", "bob"), want: bad(rules.ReasonReofferDeclined, rules.RankMode, lead...)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h3", "carol"), want: accepted(lead...)},
			{from: "carol", typ: "HandoffAccept", body: handoffAccept("h3", ""), want: accepted(rP, rT)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Declined", "h2", "bob", "Declined", "h3", "carol", "Accepted")}},

		// HandoffContext.
		{name: "context", msgs: []msg{
			{from: "lead", typ: "HandoffContext", body: handoffContext("h1"), want: bad(rules.ReasonUnknownReference, rules.RankMode, lead...)},
			offerAlice,
			{from: "lead", typ: "HandoffContext", body: handoffContext("h2"), want: bad(rules.ReasonUnknownReference, rules.RankMode, lead...)},
			{from: "alice", typ: "HandoffContext", body: handoffContext("h1"), want: authz(rP)},
			{from: "mallory", typ: "HandoffContext", body: handoffContext("h1"), want: authz()},
			{from: "lead", typ: "HandoffContext", body: handoffContext("h1"), want: accepted(owner...)},
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: accepted(rP, rT)},
			// Late context is permitted.
			{from: "lead", typ: "HandoffContext", body: handoffContext("h1"), want: accepted(owner...)},
			{from: "lead", typ: "HandoffContext", raw: []byte{0x08}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, lead...)},
		}},

		// HandoffAccept and HandoffDecline.
		{name: "accept and decline reference an offer", msgs: []msg{
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			offerAlice,
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h9", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("", ""), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "alice", typ: "HandoffDecline", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
		}},
		{name: "only the target holds the target role", msgs: []msg{
			offerAlice,
			{from: "bob", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: authz(rP)},
			{from: "lead", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: authz(lead...)},
			{from: "mallory", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: authz()},
		}},
		{name: "accepted_by and declined_by name the sender", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", "bob"), want: bad(rules.ReasonIdentityMismatch, rules.RankModePost, rP, rT)},
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", "bob"), want: bad(rules.ReasonIdentityMismatch, rules.RankModePost, rP, rT)},
			{from: "bob", typ: "HandoffAccept", body: handoffAccept("h1", "alice"), want: bad(rules.ReasonIdentityMismatch, rules.RankModePost, rP)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Offered")}},
		{name: "implicit accepts come from the runtime only", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffAccept", body: &handoffv1.HandoffAcceptPayload{HandoffId: "h1", Implicit: true}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
		}},
		{name: "the runtime's id namespace is refused, whatever the type", msgs: []msg{
			{from: "lead", typ: "HandoffOffer", id: "implicit-accept:h1", body: handoffOffer("h1", "alice"), want: bad(rules.ReasonRuntimeOnly, rules.RankMode, lead...)},
			offerAlice,
			{from: "alice", typ: "HandoffDecline", id: "implicit-accept:h1", body: handoffDecline("h1", ""), want: bad(rules.ReasonRuntimeOnly, rules.RankMode, rP)},
			{from: "alice", typ: "HandoffAccept", id: "implicit-accept:h1", body: handoffAccept("h1", ""), want: bad(rules.ReasonRuntimeOnly, rules.RankMode, rP)},
			{from: "alice", typ: "HandoffAccept", id: "implicit-accept:h1", body: &handoffv1.HandoffAcceptPayload{HandoffId: "h1", Implicit: true}, want: bad(rules.ReasonRuntimeOnly, rules.RankMode, rP)},
			{from: "lead", typ: "HandoffContext", id: "implicit-accept:x", body: handoffContext("h1"), want: bad(rules.ReasonRuntimeOnly, rules.RankMode, lead...)},
			{from: "lead", typ: TypeCommitment, id: "implicit-accept:c", body: commit("handoff.accepted", true), want: bad(rules.ReasonRuntimeOnly, rules.RankMode, lead...)},
			{from: "lead", typ: TypeProgress, id: "implicit-accept:p", want: accepted(lead...)},
			{from: "alice", typ: "HandoffDecline", id: "Implicit-Accept:h1", body: handoffDecline("h1", ""), want: accepted(rP, rT)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Declined")}},
		{name: "a disposition is final", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: accepted(rP, rT)},
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP, rT)},
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP, rT)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Declined")}},
		{name: "no competing accept", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: accepted(rP, rT)},
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP, rT)},
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP, rT)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Accepted")}},

		// Commitment.
		{name: "commitment needs a disposition", msgs: []msg{
			{from: "lead", typ: TypeCommitment, body: commit("handoff.declined", false), want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
			offerAlice,
			{from: "lead", typ: TypeCommitment, body: commit("handoff.declined", false), want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
		}},
		{name: "commitment after a decline", state: StateResolved, msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: accepted(rP, rT)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.declined", false), want: accepted(lead...).withFacts(handoffFacts(false, "handoff.declined", false, true))},
		}},
		{name: "commitment after a decline and an accept", state: StateResolved, msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), want: accepted(rP, rT)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob"), want: accepted(lead...)},
			{from: "bob", typ: "HandoffAccept", body: handoffAccept("h2", ""), want: accepted(rP, rT)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.accepted", true), want: accepted(lead...).withFacts(handoffFacts(true, "handoff.accepted", true, true))},
		}},
		{name: "commitment from a participant", msgs: []msg{
			offerAlice,
			{from: "alice", typ: "HandoffAccept", body: handoffAccept("h1", ""), want: accepted(rP, rT)},
			{from: "alice", typ: TypeCommitment, body: commit("handoff.accepted", true), want: authz(rP).withFacts(handoffFacts(true, "handoff.accepted", true, false))},
		}},

		// Implicit accept (RFC-MACP-0012 §4.5) on Warden's clock.
		{name: "implicit accept at the timeout", setup: implicit, state: StateResolved, msgs: []msg{
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), at: 1_000, want: accepted(lead...)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.accepted", true), at: 5_999, want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.accepted", true), at: 6_000, want: accepted(lead...).withFacts(handoffFacts(true, "handoff.accepted", true, false))},
		}, final: map[string]any{"offers": offers("h1", "alice", "Accepted")}},
		{name: "no implicit accept without the policy", msgs: []msg{
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), at: 1_000, want: accepted(lead...)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.accepted", true), at: 59_000, want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
		}, final: map[string]any{"offers": offers("h1", "alice", "Offered")}},
		{name: "an explicit answer after the timeout still counts", setup: implicit, state: StateResolved, msgs: []msg{
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), at: 1_000, want: accepted(lead...)},
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), at: 9_000, want: accepted(rP, rT)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.declined", false), at: 9_001, want: accepted(lead...).withFacts(handoffFacts(false, "handoff.declined", false, true))},
		}, final: map[string]any{"offers": offers("h1", "alice", "Declined")}},
		// The facts say accepted: the policy refuses the negative outcome.
		{name: "implicit accept of the pending offer after a decline", setup: implicit, msgs: []msg{
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice"), at: 1_000, want: accepted(lead...)},
			{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", ""), at: 1_500, want: accepted(rP, rT)},
			{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob"), at: 2_000, want: accepted(lead...)},
			{from: "lead", typ: TypeCommitment, body: commit("handoff.declined", false), at: 7_000, want: governed(lead...).withFacts(handoffFacts(false, "handoff.declined", true, true))},
		}, final: map[string]any{"offers": offers("h1", "alice", "Declined", "h2", "bob", "Offered")}},

		{name: "message types of other modes", msgs: []msg{
			{from: "lead", typ: "TaskRequest", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, lead...)},
		}},
	})
}
