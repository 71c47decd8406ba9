package macp

import (
	"fmt"
	"slices"
	"strings"
	"unique"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// Session limits, as the reference runtime enforces them.
const (
	MaxTTLMs           = 86_400_000
	DefaultMaxSuspend  = 7 * 24 * 3_600_000 // MAX_SUSPEND_MS of the reference runtime
	MaxParticipants    = 1000
	SupportedModeVer   = "1.0.0"
	minBase64SessionID = 22
)

// PolicyLookup resolves a policy_version to its registered descriptor.
type PolicyLookup func(id string) (PolicyDescriptor, bool)

// Start decides a SessionStart envelope. existing is the session already known
// under that session_id, or nil; lookup resolves a non-default policy_version.
func Start(existing *Session, env *macpv1.Envelope, sender string, lookup PolicyLookup, now int64) Outcome {
	return start(existing, env, sender, lookup, nil, now)
}

// StartBound is Start for the SessionStart of a history the runtime
// replays (a rebuild): the session binds g, the governance it bound when it
// started (UnknownPolicy when Warden cannot know it), never the definition a
// lookup finds registered now, which may have been replaced or withdrawn
// since. g names the policy_version the runtime reports for the session;
// policy.default needs none (nil).
func StartBound(existing *Session, env *macpv1.Envelope, sender string, g *Governance, now int64) Outcome {
	if g == nil {
		g = defaultGovernance
	}
	return start(existing, env, sender, nil, g, now)
}

func start(existing *Session, env *macpv1.Envelope, sender string, lookup PolicyLookup, bound *Governance, now int64) Outcome {
	var out Outcome
	if v := CheckEnvelope(env); !v.OK() {
		out.Verdict = v
		return out
	}
	if v := checkClock(env, now); !v.OK() {
		out.Verdict = v
		return out
	}
	if existing != nil {
		if v, dup := existing.duplicate(env, sender); dup {
			out.Duplicate = true
			out.Verdict = v
			out.Roles = existing.baseRoles(sender)
			return out
		}
		out.Verdict = deny(rules.RankPre, rules.CodeSessionAlreadyExists, rules.ReasonSessionExists, "session "+env.GetSessionId()+" already exists")
		return out
	}
	if !supportedMode(env.GetMode()) {
		out.Verdict = deny(rules.RankPre, rules.CodeModeNotSupported, rules.ReasonModeNotSupported, "mode "+env.GetMode()+" is not supported")
		return out
	}
	if !ValidSessionID(env.GetSessionId()) {
		out.Verdict = deny(rules.RankPre, rules.CodeInvalidSessionID, rules.ReasonInvalidSessionID,
			"session_id must be a lowercase UUIDv4/v7 or a base64url token of at least 22 characters")
		return out
	}
	var p macpv1.SessionStartPayload
	if err := strictpb.Unmarshal(env.GetPayload(), &p); err != nil {
		out.Verdict = invalid(rules.RankPre, rules.ReasonMalformedPayload, "SessionStart payload does not decode: "+err.Error())
		return out
	}
	out.Payload = PayloadOf(&p)
	if v := checkStartPayload(&p, env.GetMode(), sender); !v.OK() {
		out.Verdict = v
		return out
	}
	gov := defaultGovernance
	if id := p.GetPolicyVersion(); bound != nil {
		if id == "" {
			id = DefaultPolicyID
		}
		if bound.ID != id {
			out.Verdict = deny(rules.RankPre, rules.CodeUnknownPolicyVersion, rules.ReasonUnknownPolicy, "policy "+id+" is not the one the session bound ("+bound.ID+")")
			return out
		}
		gov = bound
	} else if id != "" && id != DefaultPolicyID {
		var d PolicyDescriptor
		var ok bool
		if lookup != nil {
			d, ok = lookup(id)
		}
		if !ok {
			out.Verdict = deny(rules.RankPre, rules.CodeUnknownPolicyVersion, rules.ReasonUnknownPolicy, "policy "+id+" is not registered")
			return out
		}
		if d.Mode != "*" && d.Mode != env.GetMode() {
			out.Verdict = deny(rules.RankPre, rules.CodeInvalidPolicyDefinition, rules.ReasonPolicyModeMismatch,
				fmt.Sprintf("policy %s is for mode %s, not %s", id, d.Mode, env.GetMode()))
			return out
		}
		g, err := Bind(d)
		if err != nil {
			out.Verdict = deny(rules.RankPre, rules.CodeInvalidPolicyDefinition, rules.ReasonPolicyModeMismatch, err.Error())
			return out
		}
		gov = g
	}
	if env.GetMode() == ModeHandoff && bound == nil { // a replayed start (StartBound) passed it
		if v := reservedID(env, rules.RankPre); !v.OK() {
			out.Verdict = v
			return out
		}
	}

	base := env.GetTimestampUnixMs()
	if base <= 0 || base > now {
		base = now // a client cannot stretch its TTL by post-dating its start
	}
	s := &Session{
		ID:           env.GetSessionId(),
		Mode:         canonical(env.GetMode(), ModeTask, ModeHandoff, ModeDecision, ModeProposal, ModeQuorum, ModeMultiRound),
		State:        StateOpen,
		Initiator:    unique.Make(sender).Value(),
		Participants: shareNames(p.GetParticipants()),
		versions:     unique.Make(Versions{Mode: p.GetModeVersion(), Config: p.GetConfigurationVersion(), Policy: p.GetPolicyVersion()}),
		Policy:       gov,
		StartedAtMs:  base,
		DeadlineMs:   base + p.GetTtlMs(),
		key:          newKey(),
	}
	if c := p.GetMaxSuspendMs(); c != 0 {
		s.SetSuspension(Suspension{MaxMs: c})
	}
	// The mode's empty state, as a nil pointer of its kind (see modal): the
	// first message that changes it clones it into one of its own.
	switch s.Mode {
	case ModeTask:
		s.modal = (*taskState)(nil)
	case ModeHandoff:
		s.modal = (*handoffState)(nil)
	case ModeDecision:
		s.modal = (*decisionState)(nil)
	case ModeProposal:
		s.modal = (*proposalState)(nil)
	case ModeQuorum:
		s.modal = (*quorumState)(nil)
	case ModeMultiRound:
		s.modal = (*multiRoundState)(nil)
	}
	s.recordID(env, sender)
	out.Roles = s.baseRoles(sender)
	out.Verdict.Reason = rules.ReasonAllowed
	out.Next = s
	return out
}

// canonical returns the one of known that equals s, so that a session holds
// the program's copy of a mode or version name and not one per session; s
// when none does.
func canonical(s string, known ...string) string {
	for _, k := range known {
		if s == k {
			return k
		}
	}
	return s
}

// shareNames returns the participants in a slice of their own length, every
// name the process's canonical copy (unique.Make), so that agents taking part
// in many sessions cost one copy of their name.
func shareNames(parts []string) []string {
	out := make([]string, len(parts))
	for i, id := range parts {
		out[i] = unique.Make(id).Value()
	}
	return out
}

// name returns the session's copy of a participant's name: the one in
// Participants when id is a participant, else id.
func (s *Session) name(id string) string {
	if i := slices.Index(s.Participants, id); i >= 0 {
		return s.Participants[i]
	}
	return id
}

func supportedMode(mode string) bool {
	switch mode {
	case ModeTask, ModeHandoff, ModeDecision, ModeProposal, ModeQuorum, ModeMultiRound:
		return true
	}
	return false
}

func checkStartPayload(p *macpv1.SessionStartPayload, mode, initiator string) rules.Verdict {
	switch {
	case p.GetModeVersion() == "":
		return invalid(rules.RankPre, rules.ReasonVersionMismatch, "mode_version is empty")
	case p.GetModeVersion() != SupportedModeVer:
		return invalid(rules.RankPre, rules.ReasonVersionMismatch, fmt.Sprintf("mode_version %q is not supported (want %q)", p.GetModeVersion(), SupportedModeVer))
	case p.GetConfigurationVersion() == "":
		return invalid(rules.RankPre, rules.ReasonVersionMismatch, "configuration_version is empty")
	case p.GetTtlMs() < 1 || p.GetTtlMs() > MaxTTLMs:
		return invalid(rules.RankPre, rules.ReasonInvalidTTL, fmt.Sprintf("ttl_ms %d is outside 1..%d", p.GetTtlMs(), MaxTTLMs))
	case p.GetMaxSuspendMs() < 0:
		return invalid(rules.RankPre, rules.ReasonInvalidTTL, "max_suspend_ms is negative")
	}
	parts := p.GetParticipants()
	if len(parts) == 0 || len(parts) > MaxParticipants {
		return invalid(rules.RankPre, rules.ReasonInvalidParticipants, fmt.Sprintf("%d participants; want 1..%d", len(parts), MaxParticipants))
	}
	seen := make(map[string]struct{}, len(parts))
	hasOther, hasInitiator := false, false
	for _, id := range parts {
		if strings.TrimSpace(id) == "" {
			return invalid(rules.RankPre, rules.ReasonInvalidParticipants, "a participant id is blank")
		}
		if _, dup := seen[id]; dup {
			return invalid(rules.RankPre, rules.ReasonInvalidParticipants, "participant "+id+" is listed twice")
		}
		seen[id] = struct{}{}
		hasOther = hasOther || id != initiator
		hasInitiator = hasInitiator || id == initiator
	}
	switch mode {
	case ModeTask:
		if !hasOther {
			return invalid(rules.RankPre, rules.ReasonInvalidParticipants, "a task session needs a participant other than the initiator")
		}
	case ModeHandoff:
		if len(parts) < 2 || !hasInitiator {
			return invalid(rules.RankPre, rules.ReasonInvalidParticipants, "a handoff session needs the initiator and at least one target among its participants")
		}
	}
	return rules.Verdict{}
}

// ValidSessionID reports whether id is a lowercase hyphenated UUID of version
// 4 or 7, or a base64url token of at least 22 characters, as the reference
// runtime requires.
func ValidSessionID(id string) bool {
	if len(id) == 36 && id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-' {
		for i := 0; i < len(id); i++ {
			ch := id[i]
			if i == 8 || i == 13 || i == 18 || i == 23 {
				continue
			}
			if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
				return false
			}
		}
		return id[14] == '4' || id[14] == '7'
	}
	if len(id) < minBase64SessionID {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			return false
		}
	}
	return true
}
