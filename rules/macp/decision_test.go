package macp

import (
	"testing"

	"github.com/agentwarden/warden/rules"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
)

func decProposal(id, option string) *decisionv1.ProposalPayload {
	return &decisionv1.ProposalPayload{ProposalId: id, Option: option, Rationale: "why not"}
}

func decEval(id, rec string, confidence float64) *decisionv1.EvaluationPayload {
	return &decisionv1.EvaluationPayload{ProposalId: id, Recommendation: rec, Confidence: confidence, Reason: "r"}
}

func decObjection(id, severity string) *decisionv1.ObjectionPayload {
	return &decisionv1.ObjectionPayload{ProposalId: id, Severity: severity, Reason: "risky"}
}

func decVote(id, vote string) *decisionv1.VotePayload {
	return &decisionv1.VotePayload{ProposalId: id, Vote: vote}
}

func TestDecision(t *testing.T) {
	def := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice", "bob"}}
	propose := msg{from: "alice", typ: "Proposal", body: decProposal("p1", "deploy"), want: accepted(rP)}
	vote := func(from, id, v string, want expect) msg {
		return msg{from: from, typ: "Vote", body: decVote(id, v), want: want}
	}
	participants := []any{"lead", "alice", "bob"}

	runModeCases(t, def, []modeCase{
		{name: "happy path", state: StateResolved, msgs: []msg{
			propose,
			{from: "bob", typ: "Evaluation", body: decEval("p1", "APPROVE", 0.9), want: accepted(rP)},
			{from: "lead", typ: "Evaluation", body: decEval("p1", "review", 0.5), want: accepted(lead...)},
			{from: "bob", typ: "Objection", body: decObjection("p1", "HIGH"), want: accepted(rP)},
			{from: "alice", typ: "Objection", body: decObjection("p1", ""), want: accepted(rP)},
			vote("alice", "p1", "APPROVE", accepted(rP)),
			vote("bob", "p1", "approve", accepted(rP)),
			vote("lead", "p1", "Reject", accepted(lead...)),
			{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true), want: accepted(lead...).withFacts(map[string]any{
				"outcome_positive": true, "action": "decision.selected",
				"votes": []any{
					map[string]any{"proposal": "p1", "voter": "alice", "vote": "APPROVE"},
					map[string]any{"proposal": "p1", "voter": "bob", "vote": "APPROVE"},
					map[string]any{"proposal": "p1", "voter": "lead", "vote": "REJECT"},
				},
				"evaluations": []any{
					map[string]any{"proposal": "p1", "recommendation": "APPROVE", "confidence": 0.9},
					map[string]any{"proposal": "p1", "recommendation": "REVIEW", "confidence": 0.5},
				},
				"objections": []any{
					map[string]any{"proposal": "p1", "severity": "high", "sender": "bob"},
					map[string]any{"proposal": "p1", "severity": "medium", "sender": "alice"},
				},
				"participants": participants,
			})},
		}, final: map[string]any{
			"phase":     "Committed",
			"proposals": map[string]any{"p1": map[string]any{"proposal_id": "p1", "sender": "alice"}},
			"votes": map[string]any{"p1": map[string]any{
				"alice": map[string]any{"vote": "APPROVE"}, "bob": map[string]any{"vote": "APPROVE"}, "lead": map[string]any{"vote": "REJECT"}}},
		}},

		// Phases: Proposal -> Evaluation -> Voting.
		{name: "nothing to deliberate before a proposal", msgs: []msg{
			{from: "bob", typ: "Evaluation", body: decEval("p1", "APPROVE", 0.9), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "bob", typ: "Objection", body: decObjection("p1", "low"), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			vote("bob", "p1", "APPROVE", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			// Payload values are checked before the phase.
			{from: "bob", typ: "Evaluation", body: decEval("p1", "MAYBE", 0.9), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			vote("bob", "p1", "YES", bad(rules.ReasonMalformedPayload, rules.RankMode, rP)),
		}, final: map[string]any{"phase": "Proposal"}},
		{name: "voting closes proposals and deliberation", msgs: []msg{
			propose,
			{from: "bob", typ: "Proposal", body: decProposal("p2", "wait"), want: accepted(rP)},
			vote("bob", "p1", "APPROVE", accepted(rP)),
			{from: "bob", typ: "Proposal", body: decProposal("p3", "rollback"), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			// The phase is checked before the payload decodes.
			{from: "bob", typ: "Proposal", raw: []byte{0xff}, want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p1", "APPROVE", 0.9), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "bob", typ: "Objection", body: decObjection("p1", "critical"), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			vote("bob", "p2", "REJECT", accepted(rP)),
			vote("alice", "p1", "ABSTAIN", accepted(rP)),
		}, final: map[string]any{"phase": "Voting"}},

		// Proposal.
		{name: "proposal validation", msgs: []msg{
			{from: "alice", typ: "Proposal", body: decProposal(" ", "deploy"), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "alice", typ: "Proposal", body: decProposal("p1", "\t"), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "alice", typ: "Proposal", raw: []byte{0x0a, 0x05}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			propose,
			{from: "bob", typ: "Proposal", body: decProposal("p1", "other"), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "bob", typ: "Proposal", body: decProposal("P1", "other"), want: accepted(rP)},
			{from: "mallory", typ: "Proposal", body: decProposal("p9", "other"), want: authz()},
		}, final: map[string]any{"phase": "Evaluation", "proposals": map[string]any{
			"p1": map[string]any{"proposal_id": "p1", "sender": "alice"},
			"P1": map[string]any{"proposal_id": "P1", "sender": "bob"}}}},

		// Evaluation.
		{name: "evaluation validation", msgs: []msg{
			propose,
			{from: "bob", typ: "Evaluation", body: decEval("p1", "", 0.5), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p1", "ACCEPT", 0.5), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p1", "APPROVE", -0.01), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p1", "APPROVE", 1.01), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p2", "APPROVE", 0.5), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p1", "BLOCK", 0), want: accepted(rP)},
			{from: "bob", typ: "Evaluation", body: decEval("p1", "REJECT", 1), want: accepted(rP)},
			{from: "mallory", typ: "Evaluation", body: decEval("p1", "APPROVE", 1), want: authz()},
		}},

		// Objection.
		{name: "objection validation", msgs: []msg{
			propose,
			{from: "bob", typ: "Objection", body: decObjection("p1", "urgent"), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "bob", typ: "Objection", body: decObjection("p2", "low"), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "bob", typ: "Objection", body: decObjection("", "low"), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "bob", typ: "Objection", body: decObjection("p1", "Critical"), want: accepted(rP)},
			{from: "bob", typ: "Objection", body: decObjection("p1", "low"), want: accepted(rP)},
			{from: "lead", typ: TypeCommitment, body: commit("decision.rejected", false), want: accepted(lead...).withFacts(map[string]any{
				"outcome_positive": false, "action": "decision.rejected", "votes": []any{}, "evaluations": []any{},
				"objections": []any{
					map[string]any{"proposal": "p1", "severity": "critical", "sender": "bob"},
					map[string]any{"proposal": "p1", "severity": "low", "sender": "bob"},
				},
				"participants": participants,
			})},
		}, state: StateResolved},

		// Vote.
		{name: "one vote per proposal per participant", msgs: []msg{
			propose,
			{from: "bob", typ: "Proposal", body: decProposal("p2", "wait"), want: accepted(rP)},
			vote("alice", "p1", "APPROVE", accepted(rP)),
			vote("alice", "p1", "REJECT", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			vote("alice", "p1", "APPROVE", bad(rules.ReasonStateConflict, rules.RankMode, rP)),
			vote("alice", "p2", "REJECT", accepted(rP)),
			vote("alice", "p3", "REJECT", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			vote("alice", "p2", "maybe", bad(rules.ReasonMalformedPayload, rules.RankMode, rP)),
			vote("mallory", "p1", "APPROVE", authz()),
		}, final: map[string]any{"votes": map[string]any{
			"p1": map[string]any{"alice": map[string]any{"vote": "APPROVE"}},
			"p2": map[string]any{"alice": map[string]any{"vote": "REJECT"}}}}},

		// Commitment.
		{name: "commitment needs a proposal", msgs: []msg{
			{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true), want: bad(rules.ReasonNotEligible, rules.RankModePost, lead...)},
		}},
		{name: "commitment without votes carries empty tallies", state: StateResolved, msgs: []msg{
			propose,
			{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true), want: accepted(lead...).withFacts(map[string]any{
				"outcome_positive": true, "action": "decision.selected", "votes": []any{}, "evaluations": []any{},
				"objections": []any{}, "participants": participants})},
		}, final: map[string]any{"phase": "Committed"}},
		{name: "commitment from a participant", msgs: []msg{
			propose,
			{from: "alice", typ: TypeCommitment, body: commit("decision.selected", true), want: authz(rP)},
		}},

		{name: "message types of other modes", msgs: []msg{
			{from: "alice", typ: "Accept", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
			{from: "alice", typ: "Contribute", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
		}},
	})
}
