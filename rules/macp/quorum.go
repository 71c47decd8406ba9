package macp

import (
	"github.com/agentwarden/warden/rules"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
	"slices"
)

type ballot struct{ sender, choice string }

// quorumState is RFC-MACP-0011's approval request and its ballots.
type quorumState struct {
	requested bool
	requestID string
	required  uint32
	ballots   []ballot
}

func (q *quorumState) count(choice string) int {
	n := 0
	for _, b := range q.ballots {
		if b.choice == choice {
			n++
		}
	}
	return n
}

func (q *quorumState) step(c *stepCtx) rules.Verdict {
	s := c.next
	switch typ := c.env.GetMessageType(); typ {
	case "ApprovalRequest":
		var p quorumv1.ApprovalRequestPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		switch {
		case q.requested:
			return invalid(rules.RankMode, rules.ReasonStateConflict, "the session already has an ApprovalRequest (one per session)")
		case p.GetRequestId() == "":
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "request_id is empty")
		case p.GetRequiredApprovals() == 0 || int(p.GetRequiredApprovals()) > len(s.Participants):
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "required_approvals must be within 1..participants")
		}
		q.requested, q.requestID, q.required = true, p.GetRequestId(), p.GetRequiredApprovals()
		return rules.Verdict{}

	case "Approve", "Reject", "Abstain":
		var id string
		switch typ {
		case "Approve":
			var p quorumv1.ApprovePayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			id = p.GetRequestId()
		case "Reject":
			var p quorumv1.RejectPayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			id = p.GetRequestId()
		default:
			var p quorumv1.AbstainPayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			id = p.GetRequestId()
		}
		if !q.requested {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "no ApprovalRequest has been accepted")
		}
		if id != q.requestID {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "request_id "+id+" is not the session's request "+q.requestID)
		}
		for _, b := range q.ballots {
			if b.sender == c.sender {
				return invalid(rules.RankMode, rules.ReasonStateConflict, c.sender+" already cast a ballot")
			}
		}
		q.ballots = append(q.ballots, ballot{sender: c.sender, choice: typ})
		return rules.Verdict{}

	case TypeCommitment:
		if _, v := commitment(c); !v.OK() {
			return v
		}
		if !q.requested {
			return invalid(rules.RankModePost, rules.ReasonNotEligible, "no ApprovalRequest has been accepted")
		}
		c.fact("approvals", q.count("Approve"))
		c.fact("rejections", q.count("Reject"))
		c.fact("abstentions", q.count("Abstain"))
		c.fact("eligible", len(s.Participants))
		c.fact("required_approvals", int(q.required))
		return rules.Verdict{}
	}
	return unknownType(c)
}

func (q *quorumState) summary(_ *Session, out map[string]any) {
	q = orZero(q)
	ballots := map[string]any{}
	for _, b := range q.ballots {
		ballots[b.sender] = b.choice
	}
	out["request_id"] = q.requestID
	out["ballots"] = ballots
}

func (q *quorumState) clone() modal {
	if q == nil {
		return &quorumState{}
	}
	c := *q
	c.ballots = slices.Clone(q.ballots)
	return &c
}
