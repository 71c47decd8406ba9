package macp

import (
	"github.com/agentwarden/warden/rules"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	"slices"
)

// Offer dispositions.
const (
	offerPending uint8 = iota
	offerAccepted
	offerDeclined
)

var dispositionNames = [...]string{"Offered", "Accepted", "Declined"}

type offer struct {
	id          string
	target      string
	owner       string
	disposition uint8
	offeredAtMs int64
}

// handoffState is RFC-MACP-0010's sequence of offers.
type handoffState struct {
	offers []offer
}

func (h *handoffState) find(id string) *offer {
	for i := range h.offers {
		if h.offers[i].id == id {
			return &h.offers[i]
		}
	}
	return nil
}

func (h *handoffState) any(d uint8) bool {
	for _, o := range h.offers {
		if o.disposition == d {
			return true
		}
	}
	return false
}

func (h *handoffState) step(c *stepCtx) rules.Verdict {
	s := c.next
	switch c.env.GetMessageType() {
	case "HandoffOffer":
		var p handoffv1.HandoffOfferPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		target := p.GetTargetParticipant()
		switch {
		case p.GetHandoffId() == "" || target == "":
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "handoff_id and target_participant must be non-empty")
		case h.find(p.GetHandoffId()) != nil:
			return invalid(rules.RankMode, rules.ReasonStateConflict, "handoff_id "+p.GetHandoffId()+" was already offered")
		case !s.IsParticipant(target):
			return invalid(rules.RankMode, rules.ReasonInvalidParticipants, "target "+target+" is not a participant")
		case target == c.sender:
			return invalid(rules.RankMode, rules.ReasonInvalidParticipants, "an offer cannot target its sender")
		case h.any(offerPending):
			return invalid(rules.RankMode, rules.ReasonStateConflict, "an offer is still outstanding")
		case h.any(offerAccepted):
			return invalid(rules.RankMode, rules.ReasonStateConflict, "an offer was already accepted; no further offers")
		}
		for _, o := range h.offers {
			if o.disposition == offerDeclined && o.target == target {
				// RFC-MACP-0010 3a; the runtime leaves this open.
				return invalid(rules.RankMode, rules.ReasonReofferDeclined, target+" declined an earlier offer; a new offer needs a different target")
			}
		}
		h.offers = append(h.offers, offer{id: p.GetHandoffId(), target: target, owner: c.sender, offeredAtMs: c.now})
		return rules.Verdict{}

	case "HandoffContext":
		var p handoffv1.HandoffContextPayload
		if v, ok := decode(c, &p); !ok {
			return v
		}
		o := h.find(p.GetHandoffId())
		if o == nil {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "handoff_id "+p.GetHandoffId()+" was not offered")
		}
		if o.owner == c.sender {
			c.role(RoleOfferOwner)
		}
		c.out.RecordOnly = true // the offer is unchanged
		return rules.Verdict{}  // late context is permitted (RFC-MACP-0010 §2.1)

	case "HandoffAccept", "HandoffDecline":
		accept := c.env.GetMessageType() == "HandoffAccept"
		var id, by string
		if accept {
			var p handoffv1.HandoffAcceptPayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			if p.GetImplicit() {
				return invalid(rules.RankMode, rules.ReasonMalformedPayload, "implicit accepts are synthesized by the runtime only")
			}
			id, by = p.GetHandoffId(), p.GetAcceptedBy()
		} else {
			var p handoffv1.HandoffDeclinePayload
			if v, ok := decode(c, &p); !ok {
				return v
			}
			id, by = p.GetHandoffId(), p.GetDeclinedBy()
		}
		o := h.find(id)
		if o == nil {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "handoff_id "+id+" was not offered")
		}
		if o.target == c.sender {
			c.role(RoleOfferTarget)
		}
		if by != "" && by != c.sender {
			return invalid(rules.RankModePost, rules.ReasonIdentityMismatch, c.env.GetMessageType()+" names "+by+", not the sender")
		}
		if o.disposition != offerPending {
			return invalid(rules.RankModePost, rules.ReasonStateConflict, "offer "+id+" is already "+dispositionNames[o.disposition])
		}
		if accept {
			o.disposition = offerAccepted
		} else {
			o.disposition = offerDeclined
		}
		return rules.Verdict{}

	case TypeCommitment:
		if _, v := commitment(c); !v.OK() {
			return v
		}
		if t := s.policy().implicitAcceptTimeoutMs; t > 0 {
			for i := range h.offers {
				if o := &h.offers[i]; o.disposition == offerPending && c.now-o.offeredAtMs >= t {
					o.disposition = offerAccepted // implicit accept, on Warden's clock
				}
			}
		}
		accepted, declined := h.any(offerAccepted), h.any(offerDeclined)
		if !accepted && !declined {
			return invalid(rules.RankModePost, rules.ReasonNotEligible, "no offer has been accepted or declined")
		}
		c.fact("accepted", accepted)
		c.fact("declined", declined)
		return rules.Verdict{}
	}
	return unknownType(c)
}

func (h *handoffState) summary(_ *Session, out map[string]any) {
	h = orZero(h)
	offers := map[string]any{}
	for _, o := range h.offers {
		offers[o.id] = map[string]any{"disposition": dispositionNames[o.disposition], "target": o.target}
	}
	out["offers"] = offers
}

func (h *handoffState) clone() modal {
	if h == nil {
		return &handoffState{}
	}
	c := *h
	c.offers = slices.Clone(h.offers)
	return &c
}
