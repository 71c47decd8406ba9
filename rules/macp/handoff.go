package macp

import (
	"fmt"
	"slices"

	"github.com/agentwarden/warden/rules"
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
	// offeredAtMs and offeredByMs bound when the runtime accepted the
	// offer, the time its implicit accept runs from (on Warden's clock,
	// taken as the runtime's): no earlier than offeredAtMs, no later than
	// offeredByMs. A live decision dates it (both are its time); a rebuild
	// knows it within bounds (Session.DatePendingOffer).
	offeredAtMs, offeredByMs int64
}

// Whether a pending offer's implicit accept is due (implicitDue).
const (
	notDue uint8 = iota
	due
	dueUnknown
)

// implicitDue is RFC-MACP-0010 §5.1(2)'s implicit accept of o, pending,
// under timeoutMs (none when not positive) at now: due once the timeout has
// run since the runtime accepted the offer, however late within o's dates
// it did; not due if not even from the earliest; unknown in between, where
// Warden cannot tell what the runtime decides (a rebuilt offer whose time
// the history does not show). The one rule Warden applies it by: the
// Commitment's, live or on a rebuilt session.
func implicitDue(o *offer, timeoutMs, now int64) uint8 {
	switch {
	case timeoutMs <= 0 || o.disposition != offerPending || now-o.offeredAtMs < timeoutMs:
		return notDue
	case now-o.offeredByMs >= timeoutMs:
		return due
	}
	return dueUnknown
}

// suspended moves the dates of h's pending offers by a suspension that
// lasted at least shortMs and at most longMs: time suspended does not count
// toward an implicit accept (RFC-MACP-0010 §5.1(1); the runtime subtracts
// the time suspended since the offer from semantics revision 2 on), so an
// offer pending across it is due that much later. The offer was made while
// the session was open: all of the suspension came after it.
func (h *handoffState) suspended(shortMs, longMs int64) {
	for i := range h.offers {
		if o := &h.offers[i]; o.disposition == offerPending {
			o.offeredAtMs, o.offeredByMs = o.offeredAtMs+shortMs, o.offeredByMs+longMs
		}
	}
}

// acceptImplicitly settles o, pending, as implicitly accepted: at the
// Commitment when implicitDue finds it due on Warden's clock, in a rebuild
// when the runtime's history records it (Synthesize).
func acceptImplicitly(o *offer) { o.disposition = offerAccepted }

// handoffState is RFC-MACP-0010's sequence of offers.
type handoffState struct {
	offers []offer
	// one holds the first offer when it is the only one, as in nearly
	// every session (another needs the first declined), so that the state
	// and its offer are one allocation (add, clone).
	one [1]offer
}

// add appends o to h's offers: the first into h's own storage.
func (h *handoffState) add(o offer) {
	if len(h.offers) == 0 {
		h.one[0] = o
		h.offers = h.one[:1:1]
		return
	}
	h.offers = append(h.offers, o)
}

func (h *handoffState) find(id []byte) *offer {
	for i := range h.offers {
		if h.offers[i].id == string(id) {
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
	if !c.history {
		if v := reservedID(c.env, rules.RankMode); !v.OK() {
			return v
		}
	}
	switch c.env.GetMessageType() {
	case "HandoffOffer":
		var f [4][]byte
		if v, ok := readPayload(c, handoffOfferFlat, f[:]); !ok {
			return v
		}
		id, target := f[0], f[1]
		name, member := s.participant(target)
		switch {
		case len(id) == 0 || len(target) == 0:
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "handoff_id and target_participant must be non-empty")
		case h.find(id) != nil:
			return invalid(rules.RankMode, rules.ReasonStateConflict, "handoff_id "+string(id)+" was already offered")
		case !member:
			return invalid(rules.RankMode, rules.ReasonInvalidParticipants, "target "+string(target)+" is not a participant")
		case string(target) == c.sender:
			return invalid(rules.RankMode, rules.ReasonInvalidParticipants, "an offer cannot target its sender")
		case h.any(offerPending):
			return invalid(rules.RankMode, rules.ReasonStateConflict, "an offer is still outstanding")
		case h.any(offerAccepted):
			return invalid(rules.RankMode, rules.ReasonStateConflict, "an offer was already accepted; no further offers")
		}
		for _, o := range h.offers {
			if o.disposition == offerDeclined && o.target == name {
				// RFC-MACP-0010 3a; the runtime leaves this open.
				return invalid(rules.RankMode, rules.ReasonReofferDeclined, string(target)+" declined an earlier offer; a new offer needs a different target")
			}
		}
		h.add(offer{id: string(id), target: name, owner: c.sender, offeredAtMs: c.now, offeredByMs: c.now})
		return rules.Verdict{}

	case "HandoffContext":
		var f [3][]byte
		if v, ok := readPayload(c, handoffContextFlat, f[:]); !ok {
			return v
		}
		o := h.find(f[0])
		if o == nil {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "handoff_id "+string(f[0])+" was not offered")
		}
		if o.owner == c.sender {
			c.role(RoleOfferOwner)
		}
		c.out.RecordOnly = true // the offer is unchanged
		return rules.Verdict{}  // late context is permitted (RFC-MACP-0010 §2.1)

	case "HandoffAccept", "HandoffDecline":
		accept := c.env.GetMessageType() == "HandoffAccept"
		var f [4][]byte
		read := handoffDeclineFlat
		if accept {
			read = handoffAcceptFlat
		}
		if v, ok := readPayload(c, read, f[:len(read.kinds)]); !ok {
			return v
		}
		if accept && isTrue(f[3]) {
			return invalid(rules.RankMode, rules.ReasonMalformedPayload, "implicit accepts are synthesized by the runtime only")
		}
		id, by := f[0], f[1]
		o := h.find(id)
		if o == nil {
			return invalid(rules.RankMode, rules.ReasonUnknownReference, "handoff_id "+string(id)+" was not offered")
		}
		if o.target == c.sender {
			c.role(RoleOfferTarget)
		}
		if len(by) > 0 && string(by) != c.sender {
			return invalid(rules.RankModePost, rules.ReasonIdentityMismatch, c.env.GetMessageType()+" names "+string(by)+", not the sender")
		}
		if o.disposition != offerPending {
			return invalid(rules.RankModePost, rules.ReasonStateConflict, "offer "+string(id)+" is already "+dispositionNames[o.disposition])
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
		t := s.policy().implicitAcceptTimeoutMs
		for i := range h.offers {
			switch o := &h.offers[i]; implicitDue(o, t, c.now) {
			case due:
				acceptImplicitly(o) // on Warden's clock
			case dueUnknown:
				// Accepted or not decides which Commitments may pass (a
				// positive one needs it, a negative one contradicts it):
				// neither is decided on a guess.
				return invalid(rules.RankModePost, rules.ReasonNotEligible, fmt.Sprintf(
					"whether offer %s was implicitly accepted is not known before %d (Unix ms): the session was rebuilt, and the runtime accepted the offer between %d and %d; retry then",
					o.id, o.offeredByMs+t, o.offeredAtMs, o.offeredByMs))
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

// DatePendingOffer returns s with its pending handoff offer, when it has
// one, dated as a rebuild knows it, on the runtime's clock (taken as
// Warden's): the runtime accepted the offer no earlier than fromMs and no
// later than byMs, and at notDueAtMs (when positive) it accepted a later
// message without finding the offer's implicit accept due, which it would
// have recorded first (RFC-MACP-0010 §5.1(2)): so the offer is younger than
// the session's implicit-accept timeout, and the suspended time banked, at
// notDueAtMs. A live decision dates an offer by its own time; a rebuild has
// only the history, whose client timestamps the runtime does not time the
// implicit accept by, and the runtime's stamps in the session's metadata.
// A notDueAtMs that contradicts byMs is ignored, and fromMs and byMs given
// the other way round are swapped. The time the session was suspended, which
// an implicit accept does not count, may have come after the offer: the
// latest date is moved by all of it. s is returned unchanged when no offer
// is pending.
func (s *Session) DatePendingOffer(fromMs, byMs, notDueAtMs int64) *Session {
	h, ok := s.modal.(*handoffState)
	if !ok || h == nil || !h.any(offerPending) {
		return s
	}
	if t := s.policy().implicitAcceptTimeoutMs; t > 0 && notDueAtMs > 0 {
		if younger := notDueAtMs - t - s.Suspension().TotalMs + 1; younger <= byMs {
			fromMs = max(fromMs, younger)
		}
	}
	next := s.clone()
	for i := range next.modal.(*handoffState).offers {
		if o := &next.modal.(*handoffState).offers[i]; o.disposition == offerPending {
			o.offeredAtMs, o.offeredByMs = min(fromMs, byMs), max(fromMs, byMs)
		}
	}
	// The time suspended since the offer runs the implicit accept later
	// (suspended); all the session's suspended time bounds it.
	next.modal.(*handoffState).suspended(0, s.Suspension().TotalMs)
	return next
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
	c := new(handoffState)
	*c = *h
	if len(h.offers) == 1 && &h.offers[0] == &h.one[0] {
		c.offers = c.one[:1:1] // the offer in c's own storage
	} else {
		c.offers = slices.Clone(h.offers)
	}
	return c
}
