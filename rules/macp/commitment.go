package macp

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

var (
	negativeSuffixes = []string{"rejected", "failed", "declined"}
	positiveSuffixes = []string{"selected", "accepted", "completed", "approved"}
)

// commitment decodes and validates a Commitment payload against the session
// (RFC-MACP-0012 §6, the runtime's checks), records the facts every mode's
// governance reads, and stages the resolution on the next state.
func commitment(c *stepCtx) (*macpv1.CommitmentPayload, rules.Verdict) {
	var p macpv1.CommitmentPayload
	if err := strictpb.Unmarshal(c.env.GetPayload(), &p); err != nil {
		return nil, invalid(rules.RankModePost, rules.ReasonMalformedPayload, "Commitment payload does not decode: "+err.Error())
	}
	c.out.Payload = PayloadOf(&p)
	s := c.next
	switch {
	case blank(p.GetCommitmentId()), blank(p.GetAction()), blank(p.GetAuthorityScope()), blank(p.GetReason()):
		return nil, invalid(rules.RankModePost, rules.ReasonMalformedPayload, "commitment_id, action, authority_scope and reason must be non-empty")
	case p.GetModeVersion() != s.Versions().Mode:
		return nil, invalid(rules.RankModePost, rules.ReasonVersionMismatch, "mode_version "+p.GetModeVersion()+" does not echo the session's "+s.Versions().Mode)
	case p.GetConfigurationVersion() != s.Versions().Config:
		return nil, invalid(rules.RankModePost, rules.ReasonVersionMismatch, "configuration_version "+p.GetConfigurationVersion()+" does not echo the session's "+s.Versions().Config)
	}
	if pv := p.GetPolicyVersion(); pv != "" && pv != s.policy().ID {
		return nil, invalid(rules.RankModePost, rules.ReasonVersionMismatch, "policy_version "+pv+" does not echo the session's "+s.policy().ID)
	}
	if sup := p.GetSupersedes(); sup != nil && (blank(sup.GetSessionId()) || blank(sup.GetCommitmentHash())) {
		return nil, invalid(rules.RankModePost, rules.ReasonMalformedPayload, "supersedes needs a session_id and a commitment_hash")
	}
	action := p.GetAction()
	for _, suf := range negativeSuffixes {
		if strings.HasSuffix(action, suf) && p.GetOutcomePositive() {
			return nil, invalid(rules.RankModePost, rules.ReasonOutcomeMismatch, "action "+action+" is negative but outcome_positive is true")
		}
	}
	for _, suf := range positiveSuffixes {
		if strings.HasSuffix(action, suf) && !p.GetOutcomePositive() {
			return nil, invalid(rules.RankModePost, rules.ReasonOutcomeMismatch, "action "+action+" is positive but outcome_positive is false")
		}
	}
	c.fact("outcome_positive", p.GetOutcomePositive())
	c.fact("action", action)
	s.setResolution(&Resolution{
		Action:          action,
		OutcomePositive: p.GetOutcomePositive(),
		ModeVersion:     p.GetModeVersion(),
		ConfigVersion:   p.GetConfigurationVersion(),
		PolicyVersion:   p.GetPolicyVersion(),
	})
	return &p, rules.Verdict{}
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// decode unmarshals a mode payload, the outcome's Payload, or returns the
// verdict for a payload that does not decode.
func decode(c *stepCtx, m proto.Message) (rules.Verdict, bool) {
	if err := strictpb.Unmarshal(c.env.GetPayload(), m); err != nil {
		return badPayload(c, err), false
	}
	c.out.Payload = PayloadOf(m)
	return rules.Verdict{}, true
}
