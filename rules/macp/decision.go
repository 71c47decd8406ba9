package macp

import (
	"math"
	"slices"
	"strings"

	"github.com/agentwarden/warden/rules"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
)

// Decision phases, as the runtime names them.
const (
	phaseProposal uint8 = iota
	phaseEvaluation
	phaseVoting
	phaseCommitted
)

var decisionPhases = [...]string{"Proposal", "Evaluation", "Voting", "Committed"}

type dProposal struct{ id, sender string }
type dEvaluation struct {
	proposal, recommendation, sender string
	confidence                       float64
}
type dObjection struct{ proposal, severity, sender string }
type dVote struct{ proposal, voter, vote string }

// decisionState is RFC-MACP-0007's deliberation.
type decisionState struct {
	phase       uint8
	proposals   []dProposal
	evaluations []dEvaluation
	objections  []dObjection
	votes       []dVote
}

func (d *decisionState) known(id string) bool {
	for _, p := range d.proposals {
		if p.id == id {
			return true
		}
	}
	return false
}

func (d *decisionState) step(c *stepCtx) rules.Verdict {
	s := c.next
	switch c.env.GetMessageType() {
	case "Proposal":
		if d.phase == phaseVoting {
			return invalid(rules.RankMode, rules.ReasonStateConflict, "no new proposals once voting has started")
		}
		var p decisionv1.ProposalPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		switch {
		case blank(p.GetProposalId()) || blank(p.GetOption()):
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "proposal_id and option must be non-empty")
		case d.known(p.GetProposalId()):
			return invalid(rules.RankMode, rules.ReasonStateConflict, "proposal_id "+p.GetProposalId()+" is not unique")
		}
		d.proposals = append(d.proposals, dProposal{id: p.GetProposalId(), sender: c.sender})
		d.phase = phaseEvaluation
		return rules.Verdict{}

	case "Evaluation":
		var p decisionv1.EvaluationPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		rec := strings.ToUpper(p.GetRecommendation())
		switch rec {
		case "APPROVE", "REVIEW", "BLOCK", "REJECT":
		default:
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "recommendation "+p.GetRecommendation()+" is not APPROVE, REVIEW, BLOCK or REJECT")
		}
		p.Recommendation = rec // as compared: a policy reads what the rules read
		if c := p.GetConfidence(); math.IsNaN(c) || c < 0 || c > 1 {
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "confidence must be within [0, 1]")
		}
		if v := d.deliberating(p.GetProposalId()); !v.OK() {
			return v
		}
		d.evaluations = append(d.evaluations, dEvaluation{proposal: p.GetProposalId(), recommendation: rec, confidence: p.GetConfidence(), sender: c.sender})
		return rules.Verdict{}

	case "Objection":
		var p decisionv1.ObjectionPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		sev := strings.ToLower(p.GetSeverity())
		switch sev {
		case "":
			sev = "medium"
		case "critical", "high", "medium", "low":
		default:
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "severity "+p.GetSeverity()+" is not low, medium, high or critical")
		}
		p.Severity = sev
		if v := d.deliberating(p.GetProposalId()); !v.OK() {
			return v
		}
		d.objections = append(d.objections, dObjection{proposal: p.GetProposalId(), severity: sev, sender: c.sender})
		return rules.Verdict{}

	case "Vote":
		var p decisionv1.VotePayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		vote := strings.ToUpper(p.GetVote())
		switch vote {
		case "APPROVE", "REJECT", "ABSTAIN":
		default:
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "vote "+p.GetVote()+" is not APPROVE, REJECT or ABSTAIN")
		}
		p.Vote = vote
		if d.phase == phaseProposal {
			return invalid(rules.RankMode, rules.ReasonStateConflict, "no proposal to vote on yet")
		}
		if !d.known(p.GetProposalId()) {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "proposal_id "+p.GetProposalId()+" does not exist")
		}
		for _, v := range d.votes {
			if v.proposal == p.GetProposalId() && v.voter == c.sender {
				return invalid(rules.RankMode, rules.ReasonStateConflict, c.sender+" already voted on "+p.GetProposalId())
			}
		}
		d.votes = append(d.votes, dVote{proposal: p.GetProposalId(), voter: c.sender, vote: vote})
		d.phase = phaseVoting
		return rules.Verdict{}

	case TypeCommitment:
		if _, v := commitment(c); !v.OK() {
			return v
		}
		if len(d.proposals) == 0 {
			return invalid(rules.RankModePost, rules.ReasonNotEligible, "no proposal exists")
		}
		votes := make([]any, len(d.votes))
		for i, v := range d.votes {
			votes[i] = map[string]any{"proposal": v.proposal, "voter": v.voter, "vote": v.vote}
		}
		evals := make([]any, len(d.evaluations))
		for i, e := range d.evaluations {
			evals[i] = map[string]any{"proposal": e.proposal, "recommendation": e.recommendation, "confidence": e.confidence}
		}
		objs := make([]any, len(d.objections))
		for i, o := range d.objections {
			objs[i] = map[string]any{"proposal": o.proposal, "severity": o.severity, "sender": o.sender}
		}
		parts := make([]any, len(s.Participants))
		for i, p := range s.Participants {
			parts[i] = p
		}
		c.fact("votes", votes)
		c.fact("evaluations", evals)
		c.fact("objections", objs)
		c.fact("participants", parts)
		d.phase = phaseCommitted
		return rules.Verdict{}
	}
	return unknownType(c)
}

// deliberating checks that evaluations and objections are still accepted and
// refer to a known proposal.
func (d *decisionState) deliberating(proposal string) rules.Verdict {
	if d.phase != phaseEvaluation {
		return invalid(rules.RankMode, rules.ReasonStateConflict, "evaluations and objections are accepted only before voting starts, after a proposal")
	}
	if !d.known(proposal) {
		return invalid(rules.RankMode, rules.ReasonUnknownReference, "proposal_id "+proposal+" does not exist")
	}
	return rules.Verdict{}
}

func (d *decisionState) summary(s *Session, out map[string]any) {
	d = orZero(d)
	phase := decisionPhases[d.phase]
	if s.State == StateResolved {
		phase = "Committed"
	}
	out["phase"] = phase
	props := map[string]any{}
	for _, p := range d.proposals {
		props[p.id] = map[string]any{"proposal_id": p.id, "sender": p.sender}
	}
	out["proposals"] = props
	votes := map[string]any{}
	for _, v := range d.votes {
		per, _ := votes[v.proposal].(map[string]any)
		if per == nil {
			per = map[string]any{}
			votes[v.proposal] = per
		}
		per[v.voter] = map[string]any{"vote": v.vote}
	}
	out["votes"] = votes
}

func (d *decisionState) clone() modal {
	if d == nil {
		return &decisionState{}
	}
	c := *d
	c.proposals = slices.Clone(d.proposals)
	c.evaluations = slices.Clone(d.evaluations)
	c.objections = slices.Clone(d.objections)
	c.votes = slices.Clone(d.votes)
	return &c
}
