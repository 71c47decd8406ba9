package macp

import (
	"testing"

	"github.com/agentwarden/warden/rules"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
)

func propose(id string) *proposalv1.ProposalPayload {
	return &proposalv1.ProposalPayload{ProposalId: id, Title: "offer " + id}
}

func counter(id, supersedes string) *proposalv1.CounterProposalPayload {
	return &proposalv1.CounterProposalPayload{ProposalId: id, SupersedesProposalId: supersedes, Title: "counter " + id}
}

func propAccept(id string) *proposalv1.AcceptPayload {
	return &proposalv1.AcceptPayload{ProposalId: id}
}

func propReject(id string, terminal bool) *proposalv1.RejectPayload {
	return &proposalv1.RejectPayload{ProposalId: id, Terminal: terminal}
}

func withdraw(id string) *proposalv1.WithdrawPayload {
	return &proposalv1.WithdrawPayload{ProposalId: id}
}

func live(proposer string) map[string]any {
	return map[string]any{"proposer": proposer, "disposition": "Live"}
}

func TestProposal(t *testing.T) {
	def := setup{mode: ModeProposal, initiator: "buyer", participants: []string{"buyer", "seller"}}
	three := setup{mode: ModeProposal, initiator: "buyer", participants: []string{"buyer", "seller", "broker"}}
	buyer := lead // initiator, participant, commitment authority
	p1 := msg{from: "buyer", typ: "Proposal", body: propose("p1"), want: accepted(buyer...)}
	accept := func(from, id string, want expect) msg {
		return msg{from: from, typ: "Accept", body: propAccept(id), want: want}
	}
	proposalFacts := func(positive bool, action, phase string, counters int) map[string]any {
		return map[string]any{"outcome_positive": positive, "action": action, "phase": phase, "counter_proposals": counters}
	}
	commitPositive := func(want expect) msg {
		return msg{from: "buyer", typ: TypeCommitment, body: commit("proposal.accepted", true), want: want}
	}
	notEligible := bad(rules.ReasonNotEligible, rules.RankModePost, buyer...)
	withProposal := func(kv map[string]any) map[string]any {
		out := map[string]any{}
		for id, v := range kv {
			m := v.(map[string]any)
			m["proposal_id"] = id
			out[id] = m
		}
		return out
	}

	runModeCases(t, def, []modeCase{
		{name: "happy path", state: StateResolved, msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			accept("buyer", "p2", accepted(buyer...)),
			accept("seller", "p2", accepted(rP)),
			commitPositive(accepted(buyer...).withFacts(proposalFacts(true, "proposal.accepted", "Converged", 1))),
		}, final: map[string]any{
			"phase":     "Committed",
			"accepts":   map[string]any{"buyer": "p2", "seller": "p2"},
			"proposals": withProposal(map[string]any{"p1": live("buyer"), "p2": live("seller")}),
		}},

		// Proposal.
		{name: "proposal ids are non-empty and unique", msgs: []msg{
			{from: "buyer", typ: "Proposal", body: propose(""), want: bad(rules.ReasonStateConflict, rules.RankMode, buyer...)},
			{from: "buyer", typ: "Proposal", body: propose("  "), want: bad(rules.ReasonStateConflict, rules.RankMode, buyer...)},
			{from: "buyer", typ: "Proposal", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, buyer...)},
			p1,
			{from: "seller", typ: "Proposal", body: propose("p1"), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "seller", typ: "CounterProposal", body: counter("p1", "p1"), want: bad(rules.ReasonStateConflict, rules.RankMode, rP)},
			{from: "mallory", typ: "Proposal", body: propose("p2"), want: authz()},
		}, final: map[string]any{"phase": "Negotiating"}},

		// CounterProposal.
		{name: "counter-proposal validation", msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("", "p1"), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "seller", typ: "CounterProposal", body: counter("p2", " "), want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p9"), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: accepted(with(buyer, rW)...)},
			// A counter-proposal may supersede a withdrawn proposal.
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			{from: "buyer", typ: "CounterProposal", body: counter("p3", "p2"), want: accepted(buyer...)},
			{from: "seller", typ: "CounterProposal", body: counter("p4", "p3"), want: accepted(rP)},
		}},
		{name: "counter-proposal round limit", setup: withPolicy(def, "policy.proposal.one-round", `{"counter_proposal":{"max_rounds":1}}`), msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			{from: "buyer", typ: "CounterProposal", body: counter("p3", "p2"), want: bad(rules.ReasonPolicyForbids, rules.RankMode, buyer...)},
			// Proposals are not counter-proposals.
			{from: "buyer", typ: "Proposal", body: propose("p3"), want: accepted(buyer...)},
			accept("buyer", "p2", accepted(buyer...)),
			accept("seller", "p2", accepted(rP)),
			commitPositive(accepted(buyer...).withFacts(proposalFacts(true, "proposal.accepted", "Converged", 1))),
		}, state: StateResolved},

		// Accept and Reject.
		{name: "accept and reject only live proposals", msgs: []msg{
			accept("seller", "p1", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			p1,
			accept("seller", "", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			accept("seller", "p1", accepted(rP)),
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: accepted(with(buyer, rW)...)},
			accept("seller", "p1", bad(rules.ReasonUnknownReference, rules.RankMode, rP)),
			{from: "seller", typ: "Reject", body: propReject("p1", true), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "seller", typ: "Reject", body: propReject("p9", false), want: bad(rules.ReasonUnknownReference, rules.RankMode, rP)},
			{from: "seller", typ: "Accept", raw: []byte{0xff}, want: bad(rules.ReasonMalformedPayload, rules.RankMode, rP)},
		}, final: map[string]any{"accepts": map[string]any{}, "proposals": withProposal(map[string]any{
			"p1": map[string]any{"proposer": "buyer", "disposition": "Withdrawn"}})}},
		{name: "the latest accept of a participant counts", state: StateResolved, msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			accept("buyer", "p1", accepted(buyer...)),
			accept("seller", "p2", accepted(rP)),
			commitPositive(notEligible),
			accept("seller", "p1", accepted(rP)),
			commitPositive(accepted(buyer...).withFacts(proposalFacts(true, "proposal.accepted", "Converged", 1))),
		}, final: map[string]any{"accepts": map[string]any{"buyer": "p1", "seller": "p1"}}},
		{name: "a non-terminal reject does not make the session eligible", msgs: []msg{
			p1,
			{from: "seller", typ: "Reject", body: propReject("p1", false), want: accepted(rP)},
			{from: "buyer", typ: TypeCommitment, body: commit("proposal.rejected", false), want: notEligible},
		}, final: map[string]any{"phase": "Negotiating"}},
		{name: "a terminal reject makes the session eligible", state: StateResolved, msgs: []msg{
			p1,
			{from: "seller", typ: "Reject", body: propReject("p1", true), want: accepted(rP)},
			{from: "buyer", typ: TypeCommitment, body: commit("proposal.rejected", false), want: accepted(buyer...).withFacts(proposalFacts(false, "proposal.rejected", "TerminalRejected", 0))},
		}},
		{name: "a terminal reject outranks convergence", msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			accept("buyer", "p2", accepted(buyer...)),
			accept("seller", "p2", accepted(rP)),
			{from: "seller", typ: "Reject", body: propReject("p1", true), want: accepted(rP)},
			// The commitment goes through with the facts; the policy ties a
			// positive outcome to the Converged phase.
			commitPositive(governed(buyer...).withFacts(proposalFacts(true, "proposal.accepted", "TerminalRejected", 1))),
		}, final: map[string]any{"phase": "TerminalRejected"}},
		{name: "terminal_on_any_reject", setup: withPolicy(def, "policy.proposal.strict", `{"rejection":{"terminal_on_any_reject":true}}`), msgs: []msg{
			p1,
			{from: "seller", typ: "Reject", body: propReject("p1", false), want: accepted(rP)},
		}, final: map[string]any{"phase": "TerminalRejected"}},

		// Withdraw.
		{name: "withdraw", msgs: []msg{
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: bad(rules.ReasonUnknownReference, rules.RankMode, buyer...)},
			p1,
			{from: "buyer", typ: "Withdraw", body: withdraw(" "), want: bad(rules.ReasonMalformedPayload, rules.RankMode, buyer...)},
			{from: "seller", typ: "Withdraw", body: withdraw("p1"), want: authz(rP)},
			{from: "mallory", typ: "Withdraw", body: withdraw("p1"), want: authz()},
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: accepted(with(buyer, rW)...)},
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: bad(rules.ReasonStateConflict, rules.RankModePost, with(buyer, rW)...)},
			{from: "seller", typ: "Withdraw", body: withdraw("p1"), want: bad(rules.ReasonStateConflict, rules.RankModePost, rP)},
		}},
		{name: "the author of a counter-proposal withdraws it", msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			{from: "buyer", typ: "Withdraw", body: withdraw("p2"), want: authz(buyer...)},
			{from: "seller", typ: "Withdraw", body: withdraw("p2"), want: accepted(rP, rW)},
		}, final: map[string]any{"proposals": withProposal(map[string]any{
			"p1": live("buyer"), "p2": map[string]any{"proposer": "seller", "disposition": "Withdrawn"}})}},
		{name: "withdrawing undoes convergence", msgs: []msg{
			p1,
			accept("buyer", "p1", accepted(buyer...)),
			accept("seller", "p1", accepted(rP)),
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: accepted(with(buyer, rW)...)},
			commitPositive(notEligible),
		}, final: map[string]any{"phase": "Negotiating", "accepts": map[string]any{}}},
		{name: "withdrawing drops the proposal's terminal rejections", msgs: []msg{
			p1,
			{from: "seller", typ: "Proposal", body: propose("p2"), want: accepted(rP)},
			{from: "seller", typ: "Reject", body: propReject("p1", true), want: accepted(rP)},
			accept("seller", "p2", accepted(rP)),
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: accepted(with(buyer, rW)...)},
			{from: "buyer", typ: TypeCommitment, body: commit("proposal.rejected", false), want: notEligible},
		}, final: map[string]any{"phase": "Negotiating", "accepts": map[string]any{"seller": "p2"}}},
		{name: "withdrawing keeps other proposals' terminal rejections", state: StateResolved, msgs: []msg{
			p1,
			{from: "seller", typ: "Proposal", body: propose("p2"), want: accepted(rP)},
			{from: "seller", typ: "Reject", body: propReject("p1", true), want: accepted(rP)},
			{from: "buyer", typ: "Reject", body: propReject("p2", true), want: accepted(buyer...)},
			{from: "buyer", typ: "Withdraw", body: withdraw("p1"), want: accepted(with(buyer, rW)...)},
			{from: "buyer", typ: TypeCommitment, body: commit("proposal.rejected", false), want: accepted(buyer...).withFacts(proposalFacts(false, "proposal.rejected", "TerminalRejected", 0))},
		}},

		// Acceptance criteria.
		{name: "all_parties by default", setup: &three, state: StateResolved, msgs: []msg{
			p1,
			accept("seller", "p1", accepted(rP)),
			accept("broker", "p1", accepted(rP)),
			commitPositive(notEligible),
			accept("mallory", "p1", authz()),
			accept("buyer", "p1", accepted(buyer...)),
			commitPositive(accepted(buyer...).withFacts(proposalFacts(true, "proposal.accepted", "Converged", 0))),
		}},
		{name: "all_parties by name", setup: withPolicy(three, "policy.proposal.all", `{"acceptance":{"criterion":"all_parties"}}`), msgs: []msg{
			p1,
			accept("seller", "p1", accepted(rP)),
			accept("broker", "p1", accepted(rP)),
			commitPositive(notEligible),
		}},
		{name: "counterparty", setup: withPolicy(three, "policy.proposal.counterparty", `{"acceptance":{"criterion":"counterparty"}}`), state: StateResolved, msgs: []msg{
			p1,
			accept("seller", "p1", accepted(rP)),
			commitPositive(notEligible),
			accept("broker", "p1", accepted(rP)),
			commitPositive(accepted(buyer...).withFacts(proposalFacts(true, "proposal.accepted", "Converged", 0))),
		}},
		{name: "counterparty of a counter-proposal", setup: withPolicy(three, "policy.proposal.counterparty", `{"acceptance":{"criterion":"counterparty"}}`), msgs: []msg{
			p1,
			{from: "seller", typ: "CounterProposal", body: counter("p2", "p1"), want: accepted(rP)},
			accept("broker", "p2", accepted(rP)),
			commitPositive(notEligible),
			accept("buyer", "p2", accepted(buyer...)),
		}, final: map[string]any{"phase": "Converged"}},
		{name: "initiator", setup: withPolicy(three, "policy.proposal.initiator", `{"acceptance":{"criterion":"initiator"}}`), msgs: []msg{
			{from: "seller", typ: "Proposal", body: propose("p1"), want: accepted(rP)},
			accept("seller", "p1", accepted(rP)),
			accept("broker", "p1", accepted(rP)),
			commitPositive(notEligible),
			accept("buyer", "p1", accepted(buyer...)),
		}, final: map[string]any{"phase": "Converged"}},

		{name: "commitment while negotiating", msgs: []msg{
			commitPositive(notEligible),
			p1,
			commitPositive(notEligible),
		}},
		{name: "message types of other modes", msgs: []msg{
			{from: "seller", typ: "Vote", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
			{from: "seller", typ: "Approve", want: bad(rules.ReasonUnknownMessageType, rules.RankMode, rP)},
		}},
	})
}
