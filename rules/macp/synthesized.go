package macp

import (
	"strings"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// ImplicitAcceptPrefix begins the message_id of the implicit HandoffAccept
// the runtime synthesizes once an offer's implicit_accept_timeout_ms has
// elapsed (RFC-MACP-0010 §5.1(2)-(3)): the id is this prefix and the offer's
// handoff_id, a namespace the runtime refuses from clients.
const ImplicitAcceptPrefix = "implicit-accept:"

// reservedID refuses a client's envelope in a handoff session whose
// message_id is in the namespace the runtime keeps for the entries it
// synthesizes (ImplicitAcceptPrefix, case-sensitive), whatever its type: the
// runtime refuses it there INVALID_ENVELOPE (macp-modes 0.13.0,
// HandoffMode.validate_client_envelope, from semantics revision 2 on; every
// session macp-runtime 0.13.0 starts is at revision 4), after the sender's
// coarse authorization and before the mode reads the payload (a
// SessionStart's after its payload checks). Allowed, such an envelope is one
// the runtime refuses, which ext_authz commits on allow, and its id the one
// the runtime may publish its synthesized accept under. Other modes reserve
// nothing, and a Progress takes the runtime's signal path, which does not
// look (Step decides it before the mode). A rebuild applies the runtime's
// own entries with Synthesize, and a client's entry as the runtime's replay
// does, without this check (Replayed, StartBound). rank is the rank of the checks it comes
// after (a SessionStart's are all RankPre).
func reservedID(env *macpv1.Envelope, rank rules.Rank) rules.Verdict {
	if !strings.HasPrefix(env.GetMessageId(), ImplicitAcceptPrefix) {
		return rules.Verdict{}
	}
	return invalid(rank, rules.ReasonRuntimeOnly, "message_id "+env.GetMessageId()+
		" is in the namespace the runtime keeps for the implicit accepts it synthesizes ("+ImplicitAcceptPrefix+"): choose another")
}

// Synthesized reports whether env, read from a session's accepted history,
// is an entry the runtime wrote there itself rather than a client's
// submission: the implicit HandoffAccept. The client rules (Step) refuse it
// by design (a client may never send one); a rebuild applies it with
// Synthesize. The runtime counts no participant activity for it.
// It is told by its id and its payload's implicit flag together: the
// runtime refuses a client's accept marked implicit at every semantics
// revision (a session of revision 1 or less may hold a client's explicit
// accept under the reserved id: that one is the client's).
func Synthesized(env *macpv1.Envelope) bool {
	if env.GetMessageType() != "HandoffAccept" || !strings.HasPrefix(env.GetMessageId(), ImplicitAcceptPrefix) {
		return false
	}
	var f [4][]byte
	return handoffAcceptFlat.read(env.GetPayload(), f[:]) && isTrue(f[3])
}

// Synthesize applies to s a history entry the runtime synthesized
// (Synthesized), checked as the runtime checks it when it replays one: an
// implicit HandoffAccept of s's handoff mode, its payload marked implicit,
// sent as and naming the target of a pending offer, with the id the runtime
// derives from that offer, in a session whose governance (when Warden knows
// it) sets an implicit-accept timeout. The offer is then accepted and the id
// recorded, as the runtime's replay does. Anything else is refused: a rebuild
// that meets it has diverged.
func Synthesize(s *Session, env *macpv1.Envelope) Outcome {
	var out Outcome
	refuse := func(detail string) Outcome {
		out.Verdict = invalid(rules.RankMode, rules.ReasonMalformedPayload, "not an implicit accept the runtime synthesizes: "+detail)
		return out
	}
	if s == nil {
		out.Verdict = deny(rules.RankPre, rules.CodeSessionNotFound, rules.ReasonSessionUnknown, "session "+env.GetSessionId()+" does not exist")
		return out
	}
	h, ok := s.modal.(*handoffState)
	if !Synthesized(env) || s.Mode != ModeHandoff || env.GetMode() != s.Mode || !ok || h == nil {
		return refuse("not a HandoffAccept of a handoff session")
	}
	var f [4][]byte
	handoffAcceptFlat.read(env.GetPayload(), f[:]) // Synthesized read it
	id, by := f[0], f[1]
	o := h.find(id)
	switch {
	case o == nil:
		return refuse("handoff_id " + string(id) + " was not offered")
	case o.disposition != offerPending:
		return refuse("offer " + o.id + " is already " + dispositionNames[o.disposition])
	case env.GetSender() != o.target || string(by) != o.target:
		return refuse("it does not name the offer's target " + o.target)
	case env.GetMessageId() != ImplicitAcceptPrefix+o.id:
		return refuse("message_id " + env.GetMessageId() + " is not the offer's")
	}
	if g := s.policy(); !g.unknown && g.implicitAcceptTimeoutMs <= 0 {
		return refuse("the session's policy " + g.ID + " sets no implicit_accept_timeout_ms")
	}
	next := s.clone()
	acceptImplicitly(next.modal.(*handoffState).find([]byte(o.id)))
	next.recordID(env, env.GetSender())
	next.epoch++
	out.Verdict.Reason = rules.ReasonAllowed
	out.Next = next
	return out
}
