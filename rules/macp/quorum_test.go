package macp

import (
	"testing"

	"github.com/agentwarden/warden/rules"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
)

func approvalRequest(id string, required uint32) *quorumv1.ApprovalRequestPayload {
	return &quorumv1.ApprovalRequestPayload{RequestId: id, Action: "deploy", Summary: "ship it", RequiredApprovals: required}
}

func castBallot(typ, from, request string, want expect) msg {
	switch typ {
	case "Approve":
		return msg{from: from, typ: typ, body: &quorumv1.ApprovePayload{RequestId: request}, want: want}
	case "Reject":
		return msg{from: from, typ: typ, body: &quorumv1.RejectPayload{RequestId: request}, want: want}
	case "Abstain":
		return msg{from: from, typ: typ, body: &quorumv1.AbstainPayload{RequestId: request}, want: want}
	}
	panic("ballot type " + typ)
}

func TestQuorum(t *testing.T) {
	// The coordinator is not one of the approvers (RFC-MACP-0011 §2.1).
	def := setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice", "bob", "carol"}}
	coord := []string{rI, rC}
	request := msg{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r1", 2), want: accepted(coord...)}
	tally := func(positive bool, action string, approvals, rejections, abstentions, required int) map[string]any {
		return map[string]any{"outcome_positive": positive, "action": action, "approvals": approvals, "rejections": rejections,
			"abstentions": abstentions, "eligible": 3, "required_approvals": required}
	}

	runModeCases(t, def, []modeCase{
		{name: "happy path", state: StateResolved, msgs: []msg{
			request,
			castBallot("Approve", "alice", "r1", accepted(rP)),
			castBallot("Approve", "bob", "r1", accepted(rP)),
			{from: "lead", typ: TypeCommitment, body: commit("quorum.approved", true), want: accepted(coord...).withFacts(tally(true, "quorum.approved", 2, 0, 0, 2))},
		}, final: map[string]any{"request_id": "r1", "ballots": map[string]any{"alice": "Approve", "bob": "Approve"}}},

		// ApprovalRequest.
		{name: "one request per session", msgs: []msg{
			request,
			{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r2", 1), want: bad(rules.ReasonStateConflict, rules.RankMode, coord...)},
		}, final: map[string]any{"request_id": "r1"}},
		{name: "request validation", msgs: []msg{
			{from: "lead", typ: "ApprovalRequest", body: approvalRequest("", 1), want: bad(rules.ReasonMalformedPayload, rules.RankMode, coord...)},
			{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r1", 0), want: bad(rules.ReasonMalformedPayload, rules.RankMode, coord...)},
			{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r1", 4), want: bad(rules.ReasonMalformedPayload, rules.RankMode, coord...)},
			{from: "lead", typ: "ApprovalRequest", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, coord...)},
			{from: "alice", typ: "ApprovalRequest", body: approvalRequest("r1", 3), want: authz(rP)},
			{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r1", 3), want: accepted(coord...)},
		}},

		// Ballots.
		{name: "ballots need the request", msgs: []msg{
			castBallot("Approve", "alice", "r1", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			castBallot("Abstain", "alice", "", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			request,
			castBallot("Reject", "alice", "r2", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			castBallot("Approve", "alice", "", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			{from: "alice", typ: "Abstain", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
		}, final: map[string]any{"ballots": map[string]any{}}},
		{name: "one ballot per participant", msgs: []msg{
			request,
			castBallot("Approve", "alice", "r1", accepted(rP)),
			castBallot("Approve", "alice", "r1", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			castBallot("Reject", "alice", "r1", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			castBallot("Abstain", "alice", "r1", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			castBallot("Reject", "bob", "r1", accepted(rP)),
			castBallot("Abstain", "carol", "r1", accepted(rP)),
			castBallot("Approve", "lead", "r1", authz(coord...)),
			castBallot("Approve", "mallory", "r1", authz()),
			{from: "lead", typ: TypeCommitment, body: commit("quorum.rejected", false), want: accepted(coord...).withFacts(tally(false, "quorum.rejected", 1, 1, 1, 2))},
		}, state: StateResolved, final: map[string]any{"ballots": map[string]any{"alice": "Approve", "bob": "Reject", "carol": "Abstain"}}},

		// Commitment: the threshold is the policy's; the rules hand it the tally.
		{name: "commitment needs the request", msgs: []msg{
			{from: "lead", typ: TypeCommitment, body: commit("quorum.rejected", false), want: bad(rules.ReasonNotEligible, rules.RankModePost, coord...)},
		}},
		{name: "commitment before any ballot carries the tally", msgs: []msg{
			request,
			{from: "lead", typ: TypeCommitment, body: commit("quorum.approved", true), want: governed(coord...).withFacts(tally(true, "quorum.approved", 0, 0, 0, 2))},
		}},
		{name: "commitment from an approver", msgs: []msg{
			request,
			{from: "alice", typ: TypeCommitment, body: commit("quorum.approved", true), want: authz(rP)},
		}},

		{name: "message types of other modes", msgs: []msg{
			{from: "alice", typ: "Vote", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
			{from: "alice", typ: "Accept", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
		}},
	})
}
