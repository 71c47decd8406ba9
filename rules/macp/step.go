package macp

import (
	"fmt"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// ProtocolVersion is the only macp_version the runtime accepts.
const ProtocolVersion = "1.0"

// Message types with a meaning outside any mode.
const (
	TypeSessionStart   = "SessionStart"
	TypeCommitment     = "Commitment"
	TypeSignal         = "Signal"
	TypeProgress       = "Progress"
	TypeSessionCancel  = "SessionCancel"
	TypeSessionSuspend = "SessionSuspend"
	TypeSessionResume  = "SessionResume"
)

// Roles a sender can hold; the authority matrices in the policies package are
// written in these names.
const (
	RoleInitiator           = "initiator"
	RoleParticipant         = "participant"
	RoleCommitmentAuthority = "commitment_authority"
	RoleEligibleAssignee    = "eligible_assignee"
	RoleActiveAssignee      = "active_assignee"
	RoleOfferOwner          = "offer_owner"
	RoleOfferTarget         = "offer_target"
	RoleProposalAuthor      = "proposal_author"
)

// Outcome is the result of Step.
type Outcome struct {
	// Verdict is the rules' own verdict; see Rank for how it merges with the
	// policy's.
	Verdict rules.Verdict
	// Roles are the roles the sender holds for this message, sorted by the
	// order they were found.
	Roles []string
	// Facts are what a policy needs to decide this message beyond the roles:
	// set for Commitments (tallies, terminal reports), nil otherwise.
	Facts map[string]any
	// Next is the pending state if the message is accepted upstream; nil when
	// the verdict denies or the message is a duplicate.
	Next *Session
	// Duplicate marks a retransmission of an accepted message by its own
	// sender: answered by the upstream, never re-applied.
	Duplicate bool
	// RecordOnly marks an allowed message whose acceptance changes nothing
	// the rules read but the record of accepted message ids (Progress,
	// TaskUpdate, HandoffContext): Next is the session with its id recorded,
	// or for a Progress, whose id the runtime does not record, the session
	// itself.
	// Such messages of one session may be decided while others are in
	// flight (see proxy's pipelining).
	RecordOnly bool
	// Payload is the envelope's payload as these rules read it, the one
	// reading Warden makes of it (strictpb, or a Contribute's
	// contributeValue), with the values the runtime compares without regard
	// to case as the rules compare them (a Vote's vote and an Evaluation's
	// recommendation upper-cased, an Objection's severity lower-cased, ""
	// read as "medium"): what an operator policy reads as
	// input.macp.payload. None (the zero Payload) when the rules did not
	// read the payload: a Progress or a Signal, a duplicate, a message
	// refused before its payload was read or whose payload does not decode.
	Payload Payload
}

// stepCtx is the working set of one Step.
type stepCtx struct {
	next   *Session
	env    *macpv1.Envelope
	sender string
	now    int64
	out    Outcome
	// history marks an entry of the runtime's accepted history (Replayed):
	// the client boundary the runtime checks only on submission
	// (reservedID) is not checked again, as the runtime's replay does not.
	history bool
}

func (c *stepCtx) role(r string) { c.out.Roles = append(c.out.Roles, r) }

func (c *stepCtx) fact(k string, v any) {
	if c.out.Facts == nil {
		c.out.Facts = make(map[string]any, 8)
	}
	c.out.Facts[k] = v
}

// CheckEnvelope validates the fields every envelope must carry, whatever the
// session's state. sender is the authenticated sender the envelope is bound to.
func CheckEnvelope(env *macpv1.Envelope) rules.Verdict {
	switch {
	case env == nil:
		return invalid(rules.RankPre, rules.ReasonMalformedEnvelope, "missing envelope")
	case env.GetMacpVersion() != ProtocolVersion:
		return deny(rules.RankPre, rules.CodeUnsupportedVersion, rules.ReasonUnsupportedVersion,
			fmt.Sprintf("macp_version %q is not supported (want %q)", env.GetMacpVersion(), ProtocolVersion))
	case env.GetMessageType() == "":
		return invalid(rules.RankPre, rules.ReasonMalformedEnvelope, "message_type is empty")
	case env.GetMessageId() == "":
		return invalid(rules.RankPre, rules.ReasonMalformedEnvelope, "message_id is empty")
	}
	if Ambient(env) {
		return rules.Verdict{}
	}
	switch env.GetMessageType() {
	case TypeSignal:
		return invalid(rules.RankPre, rules.ReasonMalformedEnvelope, "an ambient Signal must carry an empty session_id and mode")
	case TypeSessionCancel, TypeSessionSuspend, TypeSessionResume:
		return invalid(rules.RankPre, rules.ReasonRuntimeOnly, env.GetMessageType()+" is emitted by the runtime only")
	default:
		if env.GetSessionId() == "" {
			return invalid(rules.RankPre, rules.ReasonMalformedEnvelope, "session_id is empty")
		}
		if env.GetMode() == "" {
			return invalid(rules.RankPre, rules.ReasonMalformedEnvelope, "mode is empty")
		}
	}
	return rules.Verdict{}
}

// Ambient reports whether env belongs to no session: a Signal, or a Progress
// with an empty session_id and mode, which the runtime accepts and relays to
// signal watchers.
func Ambient(env *macpv1.Envelope) bool {
	switch env.GetMessageType() {
	case TypeSignal, TypeProgress:
		return env.GetSessionId() == "" && env.GetMode() == ""
	}
	return false
}

// MaxClockSkewMs bounds how far ahead of Warden's clock a message's
// timestamp_unix_ms may be. The runtime takes a SessionStart's timestamp as
// the TTL base and keeps every timestamp in the history a rebuild replays, so
// a post-dated message would stretch the deadline or make the rebuilt
// session diverge; it is refused when first decided.
const MaxClockSkewMs = 60_000

// checkClock refuses a timestamp more than MaxClockSkewMs ahead of now.
func checkClock(env *macpv1.Envelope, now int64) rules.Verdict {
	if ts := env.GetTimestampUnixMs(); ts > now+MaxClockSkewMs {
		return invalid(rules.RankPre, rules.ReasonClockSkew, fmt.Sprintf("timestamp_unix_ms %d is more than %d ms ahead of Warden's clock", ts, MaxClockSkewMs))
	}
	return rules.Verdict{}
}

// Step decides one session-scoped envelope (not SessionStart, see Start)
// against session s, which is nil when the session is unknown. sender is the
// authenticated sender; now is the decision time in Unix milliseconds.
func Step(s *Session, env *macpv1.Envelope, sender string, now int64) Outcome {
	return step(s, env, sender, now, false)
}

// Replayed is Step for an entry of the history the runtime accepted, which
// a rebuild replays: the checks the runtime makes of a client's submission
// only (its client boundary: reservedID) are not made again, as the
// runtime's replay does not make them (a session of an earlier semantics
// revision may hold what a submission is refused now).
func Replayed(s *Session, env *macpv1.Envelope, sender string, now int64) Outcome {
	return step(s, env, sender, now, true)
}

func step(s *Session, env *macpv1.Envelope, sender string, now int64, history bool) Outcome {
	var out Outcome
	if v := CheckEnvelope(env); !v.OK() {
		out.Verdict = v
		return out
	}
	if v := checkClock(env, now); !v.OK() {
		out.Verdict = v
		return out
	}
	if Ambient(env) {
		out.Roles = []string{}
		out.Verdict.Reason = rules.ReasonAllowed
		return out
	}
	if s == nil {
		out.Verdict = deny(rules.RankPre, rules.CodeSessionNotFound, rules.ReasonSessionUnknown, "session "+env.GetSessionId()+" does not exist")
		return out
	}
	if env.GetMessageType() == TypeSessionStart {
		return Start(s, env, sender, nil, now)
	}
	// A retransmission is answered as a duplicate before the session's state
	// is checked, as the runtime does, except a Progress: the runtime's
	// signal path neither reads nor writes the session's accepted ids, it
	// relays every Progress to the signal watchers, so a Progress's id is
	// neither checked against the record nor recorded (see signal).
	if !signal(env) {
		if v, dup := s.duplicate(env, sender); dup || !v.OK() {
			out.Verdict = v
			if dup {
				out.Duplicate = true
				out.Roles = s.baseRoles(sender)
			}
			return out
		}
	}
	if env.GetMode() != s.Mode {
		out.Verdict = invalid(rules.RankPre, rules.ReasonModeMismatch, fmt.Sprintf("mode %q does not match the session's mode %q", env.GetMode(), s.Mode))
		return out
	}
	if s = s.Expire(now); s.State != StateOpen {
		out.Verdict = notOpen(s)
		return out
	}
	if env.GetMessageType() == TypeCommitment {
		if _, v := s.bound(); !v.OK() {
			out.Verdict, out.Roles = v, s.baseRoles(sender)
			return out
		}
	}

	// The outcome lives in the working set, which stays on the stack: a
	// pointer to a local would move it to the heap.
	// A record-only type's step only reads the session (FuzzStep checks that
	// no step changes its input): it is decided on s itself, and the next
	// state, which shares s's mode state, is copied only once it is allowed
	// (a refusal copies nothing). Any other type's step changes its next
	// state's mode state: a clone.
	next := s
	if !recordOnly(env.GetMessageType()) {
		next = s.clone()
	}
	c := &stepCtx{next: next, env: env, sender: sender, now: now, history: history}
	c.out.Roles = s.baseRoles(sender)
	var v rules.Verdict
	switch {
	case env.GetMessageType() == TypeProgress:
		v = rules.Verdict{} // informational; authority is the policy's
		c.out.RecordOnly = true
	case c.next.modal != nil:
		v = stepMode(c)
	default:
		v = deny(rules.RankPre, rules.CodeModeNotSupported, rules.ReasonModeNotSupported, "mode "+s.Mode+" is not supported")
	}
	if !v.OK() {
		c.out.Verdict, c.out.RecordOnly = v, false
		return c.out
	}
	if !signal(env) {
		if c.next == s {
			c.next = s.share()
		}
		c.next.recordID(env, sender)
	}
	if !c.out.RecordOnly {
		c.next.epoch++
	}
	if env.GetMessageType() == TypeCommitment && c.next.Resolution() != nil {
		c.next.State = StateResolved
	}
	c.out.Verdict.Reason = rules.ReasonAllowed
	c.out.Next = c.next
	return c.out
}

// baseRoles are the roles a sender holds in any mode.
func (s *Session) baseRoles(sender string) []string {
	roles := make([]string, 0, 4)
	if sender == s.Initiator {
		roles = append(roles, RoleInitiator)
	}
	if s.IsParticipant(sender) {
		roles = append(roles, RoleParticipant)
	}
	if s.commitmentAuthority(sender) {
		roles = append(roles, RoleCommitmentAuthority)
	}
	return roles
}

// unknownType is the verdict for a message type the mode does not define.
func unknownType(c *stepCtx) rules.Verdict {
	return invalid(rules.RankMode, rules.ReasonUnknownMessageType, fmt.Sprintf("message type %q is not defined by mode %s", c.env.GetMessageType(), c.next.Mode))
}

func badPayload(c *stepCtx, err error) rules.Verdict {
	return invalid(rules.RankMode, rules.ReasonMalformedPayload, fmt.Sprintf("%s payload does not decode: %v", c.env.GetMessageType(), err))
}

// stepMode decides a message of the session's mode on its next state. The
// calls are static: through the interface, the working set would escape to
// the heap.
func stepMode(c *stepCtx) rules.Verdict {
	// A record-only message is decided on the published state, which may be
	// the mode's empty state (a nil pointer): it is only read.
	switch m := c.next.modal.(type) {
	case *taskState:
		return orZero(m).step(c)
	case *handoffState:
		return orZero(m).step(c)
	case *decisionState:
		return orZero(m).step(c)
	case *proposalState:
		return orZero(m).step(c)
	case *quorumState:
		return orZero(m).step(c)
	case *multiRoundState:
		return orZero(m).step(c)
	}
	return deny(rules.RankPre, rules.CodeModeNotSupported, rules.ReasonModeNotSupported, "mode "+c.next.Mode+" is not supported")
}

// signal reports whether env takes macp-runtime 0.13.0's signal path
// (Runtime::process_signal): a session-scoped Progress, which the runtime
// relays to the signal watchers without reading or writing the session's
// accepted ids. Its id is therefore none of the record's: recorded, another
// sender's message under it would be refused DUPLICATE_MESSAGE while the
// runtime accepts it, and accepted once the session is rebuilt from the
// runtime's history, which holds no Progress. A Progress's next state is the
// session itself, unchanged.
func signal(env *macpv1.Envelope) bool { return env.GetMessageType() == TypeProgress }

// recordOnly reports whether a message of type typ is record-only when
// allowed (Outcome.RecordOnly): Progress in any mode, TaskUpdate in a task,
// HandoffContext in a handoff.
func recordOnly(typ string) bool {
	switch typ {
	case TypeProgress, "TaskUpdate", "HandoffContext":
		return true
	}
	return false
}
