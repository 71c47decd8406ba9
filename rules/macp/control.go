package macp

import (
	"github.com/agentwarden/warden/rules"
)

// Control operations: the runtime's session control-plane RPCs. They are not
// envelopes; the policies' matrices name them like message types.
const (
	OpCancel  = "CancelSession"
	OpSuspend = "SuspendSession"
	OpResume  = "ResumeSession"
)

// Control decides a control-plane operation on session s (nil when unknown)
// requested by sender at time now.
func Control(s *Session, op, sender string, now int64) Outcome {
	var out Outcome
	if s == nil {
		out.Verdict = deny(rules.RankPre, rules.CodeSessionNotFound, rules.ReasonSessionUnknown, "session does not exist")
		return out
	}
	s = s.Expire(now)
	out.Roles = s.baseRoles(sender)
	if sender != s.Initiator { // the initiator may always; others as the policy says
		if _, v := s.bound(); !v.OK() {
			out.Verdict = v
			return out
		}
	}
	next := s.clone()
	next.epoch++
	switch op {
	case OpCancel:
		if s.State != StateOpen && s.State != StateSuspended {
			out.Verdict = notOpen(s)
			return out
		}
		next.State = StateCancelled
	case OpSuspend:
		if s.State != StateOpen {
			out.Verdict = notOpen(s)
			return out
		}
		sp := s.Suspension()
		sp.AtMs = now
		next.State = StateSuspended
		next.SetSuspension(sp)
	case OpResume:
		if s.State != StateSuspended {
			out.Verdict = notOpen(s)
			return out
		}
		// The TTL is banked while suspended (RFC-MACP-0001 §7.5).
		sp := s.Suspension()
		paused := max(now-sp.AtMs, 0) // a clock behind the suspension banks nothing
		banked := paused
		if sp.FromMs > 0 { // undated: bank the longest it can have lasted, within the cap
			banked = max(now-sp.FromMs, paused)
			if sp.MaxMs > 0 {
				banked = max(min(banked, sp.MaxMs-sp.TotalMs), paused)
			}
		}
		next.State, next.DeadlineMs = StateOpen, s.DeadlineMs+banked
		sp.AtMs, sp.FromMs, sp.TotalMs = 0, 0, sp.TotalMs+paused
		next.SetSuspension(sp)
		if h, ok := next.modal.(*handoffState); ok && h != nil {
			h.suspended(paused, banked)
		}
	default:
		out.Verdict = invalid(rules.RankPre, rules.ReasonUnknownMessageType, "unknown control operation "+op)
		return out
	}
	out.Verdict.Reason = rules.ReasonAllowed
	out.Next = next
	return out
}

// notOpen is the verdict for a session that is not in the state an operation
// needs.
func notOpen(s *Session) rules.Verdict {
	if s.State == StateExpired {
		return deny(rules.RankPre, rules.CodeSessionNotOpen, rules.ReasonSessionExpired, "session "+s.ID+" expired")
	}
	return deny(rules.RankPre, rules.CodeSessionNotOpen, rules.ReasonSessionNotOpen, "session "+s.ID+" is "+s.State.String())
}

// Expire returns the session as time now finds it: a copy in state Expired
// when its TTL has elapsed while open, or its suspensions exceeded
// its cap (Suspension.MaxMs); otherwise s itself. Expiry needs no message: time alone
// moves the session, as the runtime's lazy expiry does.
func (s *Session) Expire(now int64) *Session {
	if !s.timedOut(now) {
		return s
	}
	c := s.clone()
	c.State, c.epoch = StateExpired, s.epoch+1
	return c
}

// timedOut reports whether time alone has expired the session.
func (s *Session) timedOut(now int64) bool {
	if s.State == StateOpen {
		return now > s.DeadlineMs
	}
	if s.State != StateSuspended {
		return false
	}
	sp := s.Suspension()
	return sp.MaxMs > 0 && sp.TotalMs+max(now-sp.AtMs, 0) > sp.MaxMs
}

// Expired reports whether the session can no longer accept messages: it
// reached a terminal state or time has expired it. Such entries are the first
// a bounded session table evicts.
func (s *Session) Expired(now int64) bool {
	return s.State.Terminal() || s.timedOut(now)
}
