package macp

import (
	"github.com/agentwarden/warden/rules"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
	"slices"
)

type pProposal struct {
	id, proposer, supersedes string
	withdrawn                bool
}

type pAccept struct{ sender, proposal string }

// proposalState is RFC-MACP-0008's negotiation.
type proposalState struct {
	proposals       []pProposal
	accepts         []pAccept // the latest Accept of each participant
	terminalRejects []string  // proposal ids with a terminal rejection
	counters        int
}

func (n *proposalState) find(id string) *pProposal {
	for i := range n.proposals {
		if n.proposals[i].id == id {
			return &n.proposals[i]
		}
	}
	return nil
}

func (n *proposalState) live(id string) bool {
	p := n.find(id)
	return p != nil && !p.withdrawn
}

func (n *proposalState) acceptOf(sender string) string {
	for _, a := range n.accepts {
		if a.sender == sender {
			return a.proposal
		}
	}
	return ""
}

// phase is Negotiating, Converged or TerminalRejected.
func (n *proposalState) phase(s *Session) string {
	if len(n.terminalRejects) > 0 {
		return "TerminalRejected"
	}
	for _, p := range n.proposals {
		if !p.withdrawn && n.converged(s, p) {
			return "Converged"
		}
	}
	return "Negotiating"
}

// converged applies the acceptance criterion of the bound policy.
func (n *proposalState) converged(s *Session, p pProposal) bool {
	switch s.policy().acceptanceCriterion {
	case "counterparty":
		for _, id := range s.Participants {
			if id != p.proposer && n.acceptOf(id) != p.id {
				return false
			}
		}
		return true
	case "initiator":
		return n.acceptOf(s.Initiator) == p.id
	default: // all_parties
		for _, id := range s.Participants {
			if n.acceptOf(id) != p.id {
				return false
			}
		}
		return len(s.Participants) > 0
	}
}

func (n *proposalState) step(c *stepCtx) rules.Verdict {
	s := c.next
	switch c.env.GetMessageType() {
	case "Proposal":
		var p proposalv1.ProposalPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		if blank(p.GetProposalId()) || n.find(p.GetProposalId()) != nil {
			return invalid(rules.RankMode, rules.ReasonStateConflict, "proposal_id must be non-empty and unique")
		}
		n.proposals = append(n.proposals, pProposal{id: p.GetProposalId(), proposer: c.sender})
		return rules.Verdict{}

	case "CounterProposal":
		var p proposalv1.CounterProposalPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		switch {
		case blank(p.GetProposalId()) || blank(p.GetSupersedesProposalId()):
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "proposal_id and supersedes_proposal_id must be non-empty")
		case n.find(p.GetProposalId()) != nil:
			return invalid(rules.RankMode, rules.ReasonStateConflict, "proposal_id "+p.GetProposalId()+" is not unique")
		case n.find(p.GetSupersedesProposalId()) == nil:
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "supersedes_proposal_id "+p.GetSupersedesProposalId()+" does not exist")
		}
		if g, v := s.bound(); !v.OK() {
			return v
		} else if g.maxCounterRounds > 0 && n.counters >= g.maxCounterRounds {
			return invalid(rules.RankMode, rules.ReasonPolicyForbids, "counter-proposal round limit reached")
		}
		n.proposals = append(n.proposals, pProposal{id: p.GetProposalId(), proposer: c.sender, supersedes: p.GetSupersedesProposalId()})
		n.counters++
		return rules.Verdict{}

	case "Accept":
		var p proposalv1.AcceptPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		if !n.live(p.GetProposalId()) {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "proposal "+p.GetProposalId()+" is unknown or withdrawn")
		}
		for i := range n.accepts {
			if n.accepts[i].sender == c.sender {
				n.accepts[i].proposal = p.GetProposalId()
				return rules.Verdict{}
			}
		}
		n.accepts = append(n.accepts, pAccept{sender: c.sender, proposal: p.GetProposalId()})
		return rules.Verdict{}

	case "Reject":
		var p proposalv1.RejectPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		if !n.live(p.GetProposalId()) {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "proposal "+p.GetProposalId()+" is unknown or withdrawn")
		}
		terminal := p.GetTerminal()
		if !terminal {
			g, v := s.bound()
			if !v.OK() {
				return v
			}
			terminal = g.terminalOnAnyReject
		}
		if terminal {
			n.terminalRejects = append(n.terminalRejects, p.GetProposalId())
		}
		return rules.Verdict{}

	case "Withdraw":
		var p proposalv1.WithdrawPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		if blank(p.GetProposalId()) {
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "proposal_id is empty")
		}
		rec := n.find(p.GetProposalId())
		if rec == nil {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "proposal "+p.GetProposalId()+" does not exist")
		}
		if rec.proposer == c.sender {
			c.role(RoleProposalAuthor)
		}
		if rec.withdrawn {
			return invalid(rules.RankModePost, rules.ReasonStateConflict, "proposal "+p.GetProposalId()+" is already withdrawn")
		}
		rec.withdrawn = true
		kept := n.accepts[:0]
		for _, a := range n.accepts {
			if a.proposal != p.GetProposalId() {
				kept = append(kept, a)
			}
		}
		n.accepts = kept
		rejects := n.terminalRejects[:0]
		for _, id := range n.terminalRejects {
			if id != p.GetProposalId() {
				rejects = append(rejects, id)
			}
		}
		n.terminalRejects = rejects
		return rules.Verdict{}

	case TypeCommitment:
		if _, v := commitment(c); !v.OK() {
			return v
		}
		phase := n.phase(s)
		if phase == "Negotiating" {
			return invalid(rules.RankModePost, rules.ReasonNotEligible, "no live proposal has been accepted by the required parties and no terminal rejection exists")
		}
		c.fact("phase", phase)
		c.fact("counter_proposals", n.counters)
		return rules.Verdict{}
	}
	return unknownType(c)
}

func (n *proposalState) summary(s *Session, out map[string]any) {
	n = orZero(n)
	phase := n.phase(s)
	if s.State == StateResolved {
		phase = "Committed"
	}
	out["phase"] = phase
	accepts := map[string]any{}
	for _, a := range n.accepts {
		accepts[a.sender] = a.proposal
	}
	out["accepts"] = accepts
	props := map[string]any{}
	for _, p := range n.proposals {
		disp := "Live"
		if p.withdrawn {
			disp = "Withdrawn"
		}
		props[p.id] = map[string]any{"proposal_id": p.id, "proposer": p.proposer, "disposition": disp}
	}
	out["proposals"] = props
}

func (n *proposalState) clone() modal {
	if n == nil {
		return &proposalState{}
	}
	c := *n
	c.proposals = slices.Clone(n.proposals)
	c.accepts = slices.Clone(n.accepts)
	c.terminalRejects = slices.Clone(n.terminalRejects)
	return &c
}
