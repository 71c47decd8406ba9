package macp

import (
	"testing"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// quorumReady returns a quorum session, bound to policy when it is not "",
// whose approval request has been accepted: eligible for a Commitment.
func quorumReady(t *testing.T, policy string) *Session {
	t.Helper()
	su := setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice", "bob"}}
	env := su.envelope()
	var lookup PolicyLookup
	if policy != "" {
		p := startPayload("alice", "bob")
		p.PolicyVersion = policy
		env.Payload = marshal(p)
		lookup = registry(descriptor("policy.q", ModeQuorum, `{}`))
	}
	out := Start(nil, env, "lead", lookup, t0)
	if !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	out = Step(out.Next, envelope(ModeQuorum, "ApprovalRequest", "m-1", "lead", marshal(approvalRequest("r1", 1))), "lead", t0+1)
	if !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	return out.Next
}

func TestCommitmentValidation(t *testing.T) {
	type mut func(p *macpv1.CommitmentPayload)
	ok, malformed := rules.Reason(""), rules.ReasonMalformedPayload
	tests := []struct {
		name   string
		policy string // policy_version of the session
		action string // "": quorum.approved
		pos    *bool  // nil: true
		mut    mut
		reason rules.Reason // "": allowed
	}{
		{name: "valid"},

		// Required fields.
		{name: "blank commitment_id", mut: func(p *macpv1.CommitmentPayload) { p.CommitmentId = "" }, reason: malformed},
		{name: "whitespace commitment_id", mut: func(p *macpv1.CommitmentPayload) { p.CommitmentId = " \t" }, reason: malformed},
		{name: "blank action", action: " ", reason: malformed},
		{name: "blank authority_scope", mut: func(p *macpv1.CommitmentPayload) { p.AuthorityScope = "" }, reason: malformed},
		{name: "blank reason", mut: func(p *macpv1.CommitmentPayload) { p.Reason = "\n" }, reason: malformed},

		// Versions echo the session's.
		{name: "empty mode_version", mut: func(p *macpv1.CommitmentPayload) { p.ModeVersion = "" }, reason: rules.ReasonVersionMismatch},
		{name: "other mode_version", mut: func(p *macpv1.CommitmentPayload) { p.ModeVersion = "1.0" }, reason: rules.ReasonVersionMismatch},
		{name: "empty configuration_version", mut: func(p *macpv1.CommitmentPayload) { p.ConfigurationVersion = "" }, reason: rules.ReasonVersionMismatch},
		{name: "other configuration_version", mut: func(p *macpv1.CommitmentPayload) { p.ConfigurationVersion = "cfg-2" }, reason: rules.ReasonVersionMismatch},
		{name: "configuration_version is case sensitive", mut: func(p *macpv1.CommitmentPayload) { p.ConfigurationVersion = "CFG-1" }, reason: rules.ReasonVersionMismatch},
		{name: "default session, empty policy_version"},
		{name: "default session, policy.default", mut: func(p *macpv1.CommitmentPayload) { p.PolicyVersion = DefaultPolicyID }},
		{name: "default session, other policy", mut: func(p *macpv1.CommitmentPayload) { p.PolicyVersion = "policy.q" }, reason: rules.ReasonVersionMismatch},
		{name: "explicit default session, policy.default", policy: DefaultPolicyID, mut: func(p *macpv1.CommitmentPayload) { p.PolicyVersion = DefaultPolicyID }},
		{name: "explicit default session, empty policy_version", policy: DefaultPolicyID},
		{name: "bound session, its policy", policy: "policy.q", mut: func(p *macpv1.CommitmentPayload) { p.PolicyVersion = "policy.q" }},
		{name: "bound session, empty policy_version", policy: "policy.q"},
		{name: "bound session, policy.default", policy: "policy.q", mut: func(p *macpv1.CommitmentPayload) { p.PolicyVersion = DefaultPolicyID }, reason: rules.ReasonVersionMismatch},

		// Supersession is cross-session; only its shape is checked.
		{name: "supersedes well formed", mut: func(p *macpv1.CommitmentPayload) {
			p.Supersedes = &macpv1.CommitmentRef{SessionId: "prior-session", CommitmentHash: "sha256:ab"}
		}},
		{name: "supersedes the same session", mut: func(p *macpv1.CommitmentPayload) {
			p.Supersedes = &macpv1.CommitmentRef{SessionId: sid, CommitmentHash: "h"}
		}},
		{name: "supersedes without session_id", mut: func(p *macpv1.CommitmentPayload) {
			p.Supersedes = &macpv1.CommitmentRef{CommitmentHash: "h"}
		}, reason: malformed},
		{name: "supersedes with blank session_id", mut: func(p *macpv1.CommitmentPayload) {
			p.Supersedes = &macpv1.CommitmentRef{SessionId: "  ", CommitmentHash: "h"}
		}, reason: malformed},
		{name: "supersedes without hash", mut: func(p *macpv1.CommitmentPayload) {
			p.Supersedes = &macpv1.CommitmentRef{SessionId: "s"}
		}, reason: malformed},
		{name: "empty supersedes", mut: func(p *macpv1.CommitmentPayload) { p.Supersedes = &macpv1.CommitmentRef{} }, reason: malformed},

		// The action's suffix and outcome_positive agree.
		{name: "approved positive", action: "quorum.approved", pos: yes},
		{name: "approved negative", action: "quorum.approved", pos: no, reason: rules.ReasonOutcomeMismatch},
		{name: "selected negative", action: "decision.selected", pos: no, reason: rules.ReasonOutcomeMismatch},
		{name: "accepted negative", action: "proposal.accepted", pos: no, reason: rules.ReasonOutcomeMismatch},
		{name: "completed negative", action: "task.completed", pos: no, reason: rules.ReasonOutcomeMismatch},
		{name: "rejected negative", action: "quorum.rejected", pos: no},
		{name: "rejected positive", action: "quorum.rejected", pos: yes, reason: rules.ReasonOutcomeMismatch},
		{name: "failed positive", action: "task.failed", pos: yes, reason: rules.ReasonOutcomeMismatch},
		{name: "declined positive", action: "handoff.declined", pos: yes, reason: rules.ReasonOutcomeMismatch},
		{name: "bare suffix", action: "declined", pos: yes, reason: rules.ReasonOutcomeMismatch},
		{name: "suffix inside a word", action: "quorum.notapproved", pos: no, reason: rules.ReasonOutcomeMismatch},
		{name: "suffix not at the end", action: "quorum.approved.pending", pos: no},
		{name: "suffix is case sensitive", action: "quorum.REJECTED", pos: yes},
		{name: "custom action positive", action: "quorum.escalated", pos: yes},
		{name: "custom action negative", action: "quorum.escalated", pos: no},

		{name: "payload that does not decode", mut: nil, reason: "undecodable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := quorumReady(t, tc.policy)
			action := tc.action
			if action == "" {
				action = "quorum.approved"
			}
			positive := tc.pos == nil || *tc.pos
			p := commit(action, positive)
			if tc.mut != nil {
				tc.mut(p)
			}
			payload := marshal(p)
			want := tc.reason
			if want == "undecodable" {
				payload, want = []byte{0x0a, 0x10}, malformed
			}
			before := dump(s)
			out := Step(s, envelope(ModeQuorum, TypeCommitment, "m-c", "lead", payload), "lead", t0+2)
			if dump(s) != before {
				t.Fatal("Step mutated its input")
			}
			if want == ok {
				checkOutcome(t, "Commitment", out, accepted(rI, rC).withFacts(map[string]any{
					"outcome_positive": positive, "action": action, "approvals": 0, "rejections": 0, "abstentions": 0,
					"eligible": 2, "required_approvals": 1}))
				n := out.Next
				if n == nil {
					return
				}
				wantRes := Resolution{Action: action, OutcomePositive: positive, ModeVersion: p.ModeVersion,
					ConfigVersion: p.ConfigurationVersion, PolicyVersion: p.PolicyVersion}
				if n.State != StateResolved || n.Resolution() == nil || *n.Resolution() != wantRes {
					t.Errorf("next state %v resolution %+v, want Resolved %+v", n.State, n.Resolution(), wantRes)
				}
				if s.State != StateOpen || s.Resolution() != nil {
					t.Errorf("the input session changed")
				}
				return
			}
			checkOutcome(t, "Commitment", out, bad(want, rules.RankModePost, rI, rC))
		})
	}
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

// TestCommitmentResolvesOnce: after the first accepted Commitment the session
// is Resolved and takes nothing more, a second Commitment included.
func TestCommitmentResolvesOnce(t *testing.T) {
	s := quorumReady(t, "")
	out := Step(s, envelope(ModeQuorum, TypeCommitment, "m-c1", "lead", marshal(commit("quorum.approved", true))), "lead", t0+2)
	if !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	r := out.Next
	out = Step(r, envelope(ModeQuorum, TypeCommitment, "m-c2", "lead", marshal(commit("quorum.rejected", false))), "lead", t0+3)
	checkOutcome(t, "second Commitment", out, refused(rules.CodeSessionNotOpen, rules.ReasonSessionNotOpen, rules.RankPre))
	if r.Resolution().Action != "quorum.approved" {
		t.Errorf("resolution = %+v", r.Resolution())
	}
}
