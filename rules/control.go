package rules

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
		out.Verdict = deny(RankPre, CodeSessionNotFound, ReasonSessionUnknown, "session does not exist")
		return out
	}
	out.Roles = s.baseRoles(sender)
	expired := s.State == StateOpen && now > s.DeadlineMs
	next := s.clone()
	switch op {
	case OpCancel:
		if s.State != StateOpen && s.State != StateSuspended || expired {
			out.Verdict = deny(RankPre, CodeSessionNotOpen, ReasonSessionNotOpen, "session "+s.ID+" is "+s.State.String())
			return out
		}
		next.State = StateCancelled
	case OpSuspend:
		if s.State != StateOpen || expired {
			out.Verdict = deny(RankPre, CodeSessionNotOpen, ReasonSessionNotOpen, "only an open session can be suspended")
			return out
		}
		next.State, next.SuspendedAtMs = StateSuspended, now
	case OpResume:
		if s.State != StateSuspended {
			out.Verdict = deny(RankPre, CodeSessionNotOpen, ReasonSessionNotOpen, "only a suspended session can be resumed")
			return out
		}
		// The TTL is banked while suspended (RFC-MACP-0001 §7.5).
		next.State, next.DeadlineMs, next.SuspendedAtMs = StateOpen, s.DeadlineMs+(now-s.SuspendedAtMs), 0
	default:
		out.Verdict = invalid(RankPre, ReasonUnknownMessageType, "unknown control operation "+op)
		return out
	}
	out.Verdict.Reason = ReasonAllowed
	out.Next = next
	return out
}

// Expired reports whether the session can no longer accept messages because
// its TTL has elapsed or it reached a terminal state: such entries are the
// first a bounded session table evicts.
func (s *Session) Expired(now int64) bool {
	return s.State.Terminal() || s.State == StateOpen && now > s.DeadlineMs
}
