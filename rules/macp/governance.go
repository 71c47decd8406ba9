package macp

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// DefaultPolicyID is the built-in policy every runtime pre-registers
// (RFC-MACP-0012 §5); an empty policy_version resolves to it.
const DefaultPolicyID = "policy.default"

// PolicyDescriptor is a governance policy as registered with the runtime
// (macp.v1.PolicyDescriptor, rules decoded from JSON).
type PolicyDescriptor struct {
	PolicyID      string         `json:"policy_id"`
	Mode          string         `json:"mode"`
	Description   string         `json:"description,omitempty"`
	SchemaVersion uint32         `json:"schema_version"`
	Rules         map[string]any `json:"rules"`
}

// DescriptorOf reads a policy descriptor as the runtime does
// (policy_descriptor_to_definition in macp-runtime 0.13.0): its rules JSON
// through serde_json, which reads as {} whatever it does not parse (an empty
// string, a lone surrogate, nesting 128 deep, a number out of range, not
// JSON at all). Go's encoding/json reads some of these as rules, so Warden
// would have decided on rules the runtime never bound. Rules that are JSON
// but not an object are an error (the runtime refuses such a definition).
func DescriptorOf(pd *macpv1.PolicyDescriptor) (PolicyDescriptor, error) {
	d := PolicyDescriptor{PolicyID: pd.GetPolicyId(), Mode: pd.GetMode(), Description: pd.GetDescription(), SchemaVersion: pd.GetSchemaVersion(), Rules: map[string]any{}}
	js := pd.GetRules()
	if p := (serde{b: []byte(js)}); js == "" || !p.document() {
		return d, nil
	}
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		return d, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return d, fmt.Errorf("policy %s: rules are not a JSON object", d.PolicyID)
	}
	d.Rules = m
	return d, nil
}

// Governance is a policy descriptor bound to a session at SessionStart:
// immutable, shared by every copy of the session. The few rule values the
// state machines themselves need are decoded once here; everything else in
// Rules is evaluated by the policies package.
type Governance struct {
	ID            string
	SchemaVersion uint32
	Rules         map[string]any // as registered; read-only
	// Canonical is the JSON encoding of the descriptor's identity and rules,
	// computed once; policy decisions may be memoized on it.
	Canonical string

	authority                 string // initiator_only | any_participant | designated_role
	designatedRoles           []string
	allowReassignmentOnReject bool
	requireOutput             bool
	implicitAcceptTimeoutMs   int64
	terminalOnAnyReject       bool
	maxCounterRounds          int
	acceptanceCriterion       string
	// unknown marks the governance of a session whose bound definition
	// Warden cannot know (UnknownPolicy): only its ID is.
	unknown bool
}

// UnknownPolicy is the governance of a session that bound policy id at
// SessionStart with a definition Warden cannot know: the session was
// rebuilt from the runtime (after a restart or an eviction, without shared
// state holding it), and the runtime shows which policy a session bound but
// not the definition; the one registered under the id now may have replaced
// it. What depends on the definition (a Commitment, a control call by anyone
// but the initiator, reassignment after a rejection, counter-proposal rounds,
// a non-terminal Reject) is refused with ReasonBoundPolicyUnknown, never
// decided on other rules; everything else is decided as usual.
func UnknownPolicy(id string) *Governance {
	return &Governance{ID: id, unknown: true, authority: "initiator_only", Rules: map[string]any{}}
}

// Known reports whether the governance's definition is known.
func (g *Governance) Known() bool { return !g.unknown }

// defaultGovernance is policy.default: no constraints beyond the modes' own.
var defaultGovernance = mustBind(PolicyDescriptor{PolicyID: DefaultPolicyID, Mode: "*", SchemaVersion: 1, Rules: map[string]any{}})

func mustBind(d PolicyDescriptor) *Governance {
	g, err := Bind(d)
	if err != nil {
		panic(err)
	}
	return g
}

// Bind validates a descriptor's rules and returns the governance to attach
// to sessions. It fails on rules that do not fit the mode's rule schema in
// the ways the state machines depend on.
func Bind(d PolicyDescriptor) (*Governance, error) {
	if d.Rules == nil {
		d.Rules = map[string]any{}
	}
	if d.SchemaVersion == 0 {
		d.SchemaVersion = 1
	}
	canon, err := json.Marshal(struct {
		ID    string         `json:"id"`
		SV    uint32         `json:"sv"`
		Rules map[string]any `json:"rules"`
	}{d.PolicyID, d.SchemaVersion, d.Rules}) // map keys are sorted: canonical
	if err != nil {
		return nil, fmt.Errorf("encode policy %q: %w", d.PolicyID, err)
	}
	g := &Governance{ID: d.PolicyID, SchemaVersion: d.SchemaVersion, Rules: d.Rules, Canonical: string(canon), authority: "initiator_only"}
	if v, ok := path(d.Rules, "commitment", "authority").(string); ok {
		switch v {
		case "initiator_only", "any_participant", "designated_role":
			g.authority = v
		default:
			return nil, fmt.Errorf("policy %q: commitment.authority %q is not initiator_only, any_participant or designated_role", d.PolicyID, v)
		}
	}
	if roles, ok := path(d.Rules, "commitment", "designated_roles").([]any); ok {
		for _, r := range roles {
			if s, ok := r.(string); ok {
				g.designatedRoles = append(g.designatedRoles, s)
			}
		}
	}
	g.allowReassignmentOnReject, _ = path(d.Rules, "assignment", "allow_reassignment_on_reject").(bool)
	g.requireOutput, _ = path(d.Rules, "completion", "require_output").(bool)
	if f, ok := path(d.Rules, "acceptance", "implicit_accept_timeout_ms").(float64); ok && f > 0 {
		g.implicitAcceptTimeoutMs = int64(f)
	}
	g.terminalOnAnyReject, _ = path(d.Rules, "rejection", "terminal_on_any_reject").(bool)
	if f, ok := path(d.Rules, "counter_proposal", "max_rounds").(float64); ok && f > 0 {
		g.maxCounterRounds = int(f)
	}
	g.acceptanceCriterion, _ = path(d.Rules, "acceptance", "criterion").(string)
	return g, nil
}

// path walks nested JSON objects.
func path(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[k]
	}
	return cur
}

// designated reports whether id is one of the policy's designated committers.
func (g *Governance) designated(id string) bool {
	return slices.Contains(g.designatedRoles, id)
}

// policy returns the bound governance; policy.default for a session built
// without one.
func (s *Session) policy() *Governance {
	if s.Policy == nil {
		return defaultGovernance
	}
	return s.Policy
}

// bound returns the session's governance for a decision that reads its
// definition, or the refusal when Warden does not know it (UnknownPolicy).
func (s *Session) bound() (*Governance, rules.Verdict) {
	g := s.policy()
	if !g.unknown {
		return g, rules.Verdict{}
	}
	return g, deny(rules.RankPre, rules.CodeUnknownPolicyVersion, rules.ReasonBoundPolicyUnknown, "session "+s.ID+" bound governance policy "+g.ID+
		" at SessionStart, and Warden does not hold that definition (the session was rebuilt from the runtime after a restart or eviction without shared state):"+
		" what depends on it is not decided on whatever is registered under the id now")
}

// commitmentAuthority reports whether sender may emit a Commitment (and, as
// the runtime applies the same rule, cancel, suspend or resume the session).
func (s *Session) commitmentAuthority(sender string) bool {
	switch s.policy().authority {
	case "any_participant":
		return sender == s.Initiator || s.IsParticipant(sender)
	case "designated_role":
		return s.policy().designated(sender)
	default:
		return sender == s.Initiator
	}
}
