package macp

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

func TestValidSessionID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"uuid v4 lowercase", "3f1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102", true},
		{"uuid v7 lowercase", "01890a5d-ac96-774b-bcce-b302099a8057", true},
		{"uuid v4 uppercase", "3F1C2A4E-9B7D-4C1E-8A2B-5D6E7F809102", false},
		{"uuid v4 mixed case", "3f1c2a4e-9b7d-4c1e-8A2b-5d6e7f809102", false},
		{"uuid v1", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", false},
		{"uuid v3", "a3bb189e-8bf9-3888-9912-ace4e6543002", false},
		{"uuid v5", "886313e1-3b8a-5372-9b90-0c9aee199e5d", false},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", false},
		{"max uuid", "ffffffff-ffff-ffff-ffff-ffffffffffff", false},
		{"uuid without hyphens is a short token", "3f1c2a4e9b7d4c1e8a2b5d6e7f809102", true},
		{"braced uuid", "{3f1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102}", false},
		{"urn uuid", "urn:uuid:3f1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102", false},
		// Shaped like a UUID but not hex: held to the UUID rule, as the
		// runtime 0.6 did (the newest runtime lets it fall through to the
		// base64url rule; see the report).
		{"uuid-shaped non-hex", "gggggggg-gggg-4ggg-gggg-gggggggggggg", false},
		// 36 characters with hyphens elsewhere: a base64url token.
		{"36 chars hyphen elsewhere", "abcdefghijklmnop-qrstuvwxyzABCDEFGHI", true},
		{"base64url 22", "abcdefghijklmnopqrstuv", true},
		{"base64url 21", "abcdefghijklmnopqrstu", false},
		{"base64url with - and _", "AbC-_dEf0123456789-_xyz", true},
		{"base64url long", strings.Repeat("aZ9_-", 40), true},
		{"base64 padding", "abcdefghijklmnopqrstuv==", false},
		{"base64 plus", "abcdefghijklmnopqrst+v", false},
		{"base64 slash", "abcdefghijklmnopqrst/v", false},
		{"dot", "abcdefghijklmnopqrst.uv", false},
		{"space", "abcdefghijklmnopqrst uv", false},
		{"non-ascii", "abcdefghijklmnopqrstüv", false},
		{"human readable", "sess-policy-demo-001", false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidSessionID(tc.id); got != tc.want {
				t.Errorf("ValidSessionID(%q) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}

func TestCheckEnvelope(t *testing.T) {
	ok := func() *macpv1.Envelope { return envelope(ModeTask, "TaskRequest", "m-1", "lead", nil) }
	tests := []struct {
		name   string
		env    func() *macpv1.Envelope
		code   rules.Code
		reason rules.Reason
	}{
		{"well formed", ok, rules.CodeOK, ""},
		{"nil", func() *macpv1.Envelope { return nil }, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"empty version", func() *macpv1.Envelope { e := ok(); e.MacpVersion = ""; return e }, rules.CodeUnsupportedVersion, rules.ReasonUnsupportedVersion},
		{"version 2.0", func() *macpv1.Envelope { e := ok(); e.MacpVersion = "2.0"; return e }, rules.CodeUnsupportedVersion, rules.ReasonUnsupportedVersion},
		{"version 1.0.0", func() *macpv1.Envelope { e := ok(); e.MacpVersion = "1.0.0"; return e }, rules.CodeUnsupportedVersion, rules.ReasonUnsupportedVersion},
		{"empty message_type", func() *macpv1.Envelope { e := ok(); e.MessageType = ""; return e }, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"empty message_id", func() *macpv1.Envelope { e := ok(); e.MessageId = ""; return e }, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"empty session_id", func() *macpv1.Envelope { e := ok(); e.SessionId = ""; return e }, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"empty mode", func() *macpv1.Envelope { e := ok(); e.Mode = ""; return e }, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"empty sender is filled in by the binding", func() *macpv1.Envelope { e := ok(); e.Sender = ""; return e }, rules.CodeOK, ""},
		{"ambient signal", func() *macpv1.Envelope { return envelopeNoSession(TypeSignal) }, rules.CodeOK, ""},
		{"signal with session_id", func() *macpv1.Envelope {
			e := envelopeNoSession(TypeSignal)
			e.SessionId = sid
			return e
		}, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"signal with mode", func() *macpv1.Envelope {
			e := envelopeNoSession(TypeSignal)
			e.Mode = ModeTask
			return e
		}, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"signal without message_id", func() *macpv1.Envelope {
			e := envelopeNoSession(TypeSignal)
			e.MessageId = ""
			return e
		}, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		// The runtime accepts a Progress outside any session and relays it
		// to signal watchers.
		{"ambient progress", func() *macpv1.Envelope { return envelopeNoSession(TypeProgress) }, rules.CodeOK, ""},
		{"progress with a mode but no session", func() *macpv1.Envelope {
			e := envelopeNoSession(TypeProgress)
			e.Mode = ModeTask
			return e
		}, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"client SessionCancel", func() *macpv1.Envelope { e := ok(); e.MessageType = TypeSessionCancel; return e }, rules.CodeInvalidEnvelope, rules.ReasonRuntimeOnly},
		{"client SessionSuspend", func() *macpv1.Envelope { e := ok(); e.MessageType = TypeSessionSuspend; return e }, rules.CodeInvalidEnvelope, rules.ReasonRuntimeOnly},
		{"client SessionResume", func() *macpv1.Envelope { e := ok(); e.MessageType = TypeSessionResume; return e }, rules.CodeInvalidEnvelope, rules.ReasonRuntimeOnly},
		{"client SessionCancel without session", func() *macpv1.Envelope { return envelopeNoSession(TypeSessionCancel) }, rules.CodeInvalidEnvelope, rules.ReasonRuntimeOnly},
		{"version checked before type", func() *macpv1.Envelope {
			e := ok()
			e.MacpVersion, e.MessageType = "0.9", TypeSessionCancel
			return e
		}, rules.CodeUnsupportedVersion, rules.ReasonUnsupportedVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckEnvelope(tc.env())
			if v.Code != tc.code || v.Reason != tc.reason || v.Rank != rules.RankPre {
				t.Errorf("CheckEnvelope = %+v, want code %q reason %q rank pre", v, tc.code, tc.reason)
			}
			if !v.OK() && v.Detail == "" {
				t.Errorf("a refusal carries no detail")
			}
			// Step and Start run the same checks first.
			if tc.code != rules.CodeOK {
				if out := Step(nil, tc.env(), "lead", t0); out.Verdict != v || out.Next != nil {
					t.Errorf("Step = %+v, want %+v", out.Verdict, v)
				}
				if out := Start(nil, tc.env(), "lead", nil, t0); out.Verdict != v || out.Next != nil {
					t.Errorf("Start = %+v, want %+v", out.Verdict, v)
				}
			}
		})
	}
}

func envelopeNoSession(typ string) *macpv1.Envelope {
	return &macpv1.Envelope{MacpVersion: ProtocolVersion, MessageType: typ, MessageId: "sig-1", Sender: "lead"}
}

// TestStepSignal: an ambient Signal is allowed by the rules, is not
// session-scoped (no session is needed) and changes no state.
func TestStepSignal(t *testing.T) {
	s, _ := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice"}}.start()
	for _, in := range []*Session{nil, s} {
		before := dump(in)
		out := Step(in, envelopeNoSession(TypeSignal), "anyone", t0)
		if !out.Verdict.OK() || out.Verdict.Reason != rules.ReasonAllowed || out.Next != nil || out.Duplicate || len(out.Roles) != 0 {
			t.Errorf("Step(Signal) = %+v", out)
		}
		if dump(in) != before {
			t.Errorf("Signal mutated the session")
		}
	}
}

func TestStart(t *testing.T) {
	participants := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("agent-%04d", i)
		}
		out[0] = "lead"
		return out
	}
	policies := registry(
		descriptor("policy.task.strict", ModeTask, `{"completion":{"require_output":true}}`),
		descriptor("policy.any", "*", `{}`),
		descriptor("policy.decision.majority", ModeDecision, `{"voting":{"algorithm":"majority"}}`),
		descriptor("policy.bad-authority", ModeTask, `{"commitment":{"authority":"everyone"}}`),
		descriptor("policy.empty-mode", "", `{}`),
	)
	type mutate func(env *macpv1.Envelope, p *macpv1.SessionStartPayload)
	tests := []struct {
		name   string
		mode   string
		parts  []string
		mut    mutate
		lookup PolicyLookup // nil: policies
		noReg  bool         // pass a nil PolicyLookup
		code   rules.Code
		reason rules.Reason
		policy string // expected bound policy id when allowed; "": policy.default
	}{
		// Every supported mode starts.
		{name: "task", mode: ModeTask},
		{name: "handoff", mode: ModeHandoff},
		{name: "decision", mode: ModeDecision},
		{name: "proposal", mode: ModeProposal},
		{name: "quorum", mode: ModeQuorum},
		{name: "multi_round", mode: ModeMultiRound},
		{name: "unsupported mode", mode: "macp.mode.auction.v1", code: rules.CodeModeNotSupported, reason: rules.ReasonModeNotSupported},
		{name: "mode id is case sensitive", mode: "MACP.MODE.TASK.V1", code: rules.CodeModeNotSupported, reason: rules.ReasonModeNotSupported},

		// Session ids.
		{name: "uuid v7 id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) {
			e.SessionId = "01890a5d-ac96-774b-bcce-b302099a8057"
		}},
		{name: "base64url id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.SessionId = "Zm9vYmFyYmF6cXV4cXV1eA" }},
		{name: "uppercase uuid id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.SessionId = strings.ToUpper(sid) }, code: rules.CodeInvalidSessionID, reason: rules.ReasonInvalidSessionID},
		{name: "uuid v1 id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) {
			e.SessionId = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
		}, code: rules.CodeInvalidSessionID, reason: rules.ReasonInvalidSessionID},
		{name: "short base64url id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.SessionId = "Zm9vYmFyYmF6cXV4cXV1e" }, code: rules.CodeInvalidSessionID, reason: rules.ReasonInvalidSessionID},
		{name: "human id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.SessionId = "sess-1" }, code: rules.CodeInvalidSessionID, reason: rules.ReasonInvalidSessionID},
		{name: "empty id", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.SessionId = "" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonMalformedEnvelope},
		// The mode is checked before the session id.
		{name: "unsupported mode and bad id", mode: "x.y", mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.SessionId = "sess-1" }, code: rules.CodeModeNotSupported, reason: rules.ReasonModeNotSupported},

		// Versions.
		{name: "empty mode_version", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.ModeVersion = "" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonVersionMismatch},
		{name: "wrong mode_version", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.ModeVersion = "2.0.0" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonVersionMismatch},
		{name: "short mode_version", mode: ModeDecision, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.ModeVersion = "1.0" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonVersionMismatch},
		{name: "empty configuration_version", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.ConfigurationVersion = "" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonVersionMismatch},
		{name: "any configuration_version", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.ConfigurationVersion = "profile/42" }},

		// TTL.
		{name: "ttl 0", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.TtlMs = 0 }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidTTL},
		{name: "ttl -1", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.TtlMs = -1 }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidTTL},
		{name: "ttl 1", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.TtlMs = 1 }},
		{name: "ttl 86_400_000", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.TtlMs = 86_400_000 }},
		{name: "ttl 86_400_001", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.TtlMs = 86_400_001 }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidTTL},
		{name: "max_suspend_ms negative", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.MaxSuspendMs = -1 }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidTTL},
		{name: "max_suspend_ms bound", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.MaxSuspendMs = 1 }},
		{name: "max_suspend_ms beyond the default", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.MaxSuspendMs = 30 * DefaultMaxSuspend }},

		// Participants.
		{name: "no participants", mode: ModeDecision, parts: []string{}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "blank participant", mode: ModeDecision, parts: []string{"lead", "  "}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "empty participant", mode: ModeQuorum, parts: []string{"", "alice"}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "duplicate participant", mode: ModeProposal, parts: []string{"lead", "alice", "lead"}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "1000 participants", mode: ModeQuorum, parts: participants(1000)},
		{name: "1001 participants", mode: ModeQuorum, parts: participants(1001), code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "initiator need not be listed", mode: ModeQuorum, parts: []string{"alice", "bob"}},
		{name: "task with only the initiator", mode: ModeTask, parts: []string{"lead"}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "task with another participant", mode: ModeTask, parts: []string{"lead", "alice"}},
		{name: "task without the initiator", mode: ModeTask, parts: []string{"alice"}},
		{name: "handoff with only the initiator", mode: ModeHandoff, parts: []string{"lead"}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "handoff without the initiator", mode: ModeHandoff, parts: []string{"alice", "bob"}, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "handoff initiator and one target", mode: ModeHandoff, parts: []string{"alice", "lead"}},
		{name: "decision with only the initiator", mode: ModeDecision, parts: []string{"lead"}},

		// Policies.
		{name: "empty policy_version binds the default", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "" }},
		{name: "policy.default binds the default", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = DefaultPolicyID }},
		{name: "policy.default needs no lookup", mode: ModeTask, lookup: registry(), mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = DefaultPolicyID }},
		{name: "mode policy", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.task.strict" }, policy: "policy.task.strict"},
		{name: "wildcard policy", mode: ModeHandoff, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.any" }, policy: "policy.any"},
		{name: "unknown policy", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.nope" }, code: rules.CodeUnknownPolicyVersion, reason: rules.ReasonUnknownPolicy},
		{name: "unknown policy without a registry", mode: ModeTask, noReg: true, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.any" }, code: rules.CodeUnknownPolicyVersion, reason: rules.ReasonUnknownPolicy},
		{name: "policy id is case sensitive", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "Policy.Default" }, code: rules.CodeUnknownPolicyVersion, reason: rules.ReasonUnknownPolicy},
		{name: "policy for another mode", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.decision.majority" }, code: rules.CodeInvalidPolicyDefinition, reason: rules.ReasonPolicyModeMismatch},
		{name: "policy without a mode", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.empty-mode" }, code: rules.CodeInvalidPolicyDefinition, reason: rules.ReasonPolicyModeMismatch},
		{name: "policy that does not bind", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) { p.PolicyVersion = "policy.bad-authority" }, code: rules.CodeInvalidPolicyDefinition, reason: rules.ReasonPolicyModeMismatch},

		// Payload.
		{name: "payload does not decode", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.Payload = []byte{0xff, 0xff} }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonMalformedPayload},
		{name: "empty payload", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.Payload = []byte{} }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonVersionMismatch},
		{name: "unknown extension keys are ignored", mode: ModeTask, mut: func(_ *macpv1.Envelope, p *macpv1.SessionStartPayload) {
			p.Extensions = map[string][]byte{"x-unknown": {1, 2}}
			p.ContextId = "ctx://anything"
		}},
		{name: "handoff under the runtime's id namespace", mode: ModeHandoff, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.MessageId = "implicit-accept:s" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonRuntimeOnly},
		{name: "handoff with the payload refused first", mode: ModeHandoff, parts: []string{"lead"}, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.MessageId = "implicit-accept:s" }, code: rules.CodeInvalidEnvelope, reason: rules.ReasonInvalidParticipants},
		{name: "task under the runtime's handoff id namespace", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.MessageId = "implicit-accept:s" }},
		{name: "bad version envelope", mode: ModeTask, mut: func(e *macpv1.Envelope, _ *macpv1.SessionStartPayload) { e.MacpVersion = "2" }, code: rules.CodeUnsupportedVersion, reason: rules.ReasonUnsupportedVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parts := tc.parts
			if parts == nil {
				parts = []string{"lead", "alice", "bob"}
			}
			p := startPayload(parts...)
			env := envelope(tc.mode, TypeSessionStart, "m-start", "lead", nil)
			env.TimestampUnixMs = t0
			if tc.mut != nil {
				tc.mut(env, p)
			}
			if env.Payload == nil {
				env.Payload = marshal(p)
			}
			lookup := policies
			if tc.lookup != nil {
				lookup = tc.lookup
			}
			if tc.noReg {
				lookup = nil
			}
			out := Start(nil, env, "lead", lookup, t0)
			v := out.Verdict
			if v.Code != tc.code || v.Rank != rules.RankPre {
				t.Fatalf("Start = %+v, want code %q", v, tc.code)
			}
			if tc.code != rules.CodeOK {
				if v.Reason != tc.reason {
					t.Errorf("reason = %q, want %q", v.Reason, tc.reason)
				}
				if out.Next != nil || out.Duplicate || out.Roles != nil {
					t.Errorf("a refused start returned %+v", out)
				}
				return
			}
			if v.Reason != rules.ReasonAllowed || out.Next == nil || out.Duplicate {
				t.Fatalf("allowed start = %+v", out)
			}
			s := out.Next
			want := tc.policy
			if want == "" {
				want = DefaultPolicyID
			}
			if s.Policy == nil || s.Policy.ID != want {
				t.Errorf("bound policy = %+v, want %s", s.Policy, want)
			}
			if s.Versions().Policy != p.PolicyVersion {
				t.Errorf("policy version = %q, want %q (as sent)", s.Versions().Policy, p.PolicyVersion)
			}
			if s.ID != env.SessionId || s.Mode != tc.mode || s.State != StateOpen || s.Initiator != "lead" ||
				s.Versions().Mode != p.ModeVersion || s.Versions().Config != p.ConfigurationVersion ||
				strings.Join(s.Participants, ",") != strings.Join(p.Participants, ",") || s.Resolution() != nil {
				t.Errorf("session = %s", dump(s))
			}
			wantCap := p.MaxSuspendMs
			if wantCap == 0 {
				wantCap = DefaultMaxSuspend
			}
			if s.Suspension().MaxMs != wantCap || s.Suspension().TotalMs != 0 || s.Suspension().AtMs != 0 {
				t.Errorf("suspension cap %d total %d at %d, want %d 0 0", s.Suspension().MaxMs, s.Suspension().TotalMs, s.Suspension().AtMs, wantCap)
			}
			if s.StartedAtMs != t0 || s.DeadlineMs != t0+p.TtlMs {
				t.Errorf("started %d deadline %d, want %d and %d", s.StartedAtMs, s.DeadlineMs, t0, t0+p.TtlMs)
			}
			if s.MessageCount("lead") != 1 {
				t.Errorf("MessageCount(initiator) = %d, want 1", s.MessageCount("lead"))
			}
			if !sameRoles(out.Roles, s.baseRoles("lead")) {
				t.Errorf("roles = %q, want %q", out.Roles, s.baseRoles("lead"))
			}
			if len(s.ModeState()) == 0 {
				t.Errorf("a started session has no mode state")
			}
		})
	}
}

// TestStartTTLBase: the TTL runs from the SessionStart timestamp, unless it is
// unset or in the future (a client cannot stretch its TTL by post-dating).
func TestStartTTLBase(t *testing.T) {
	now := t0 + 5_000
	tests := []struct {
		name string
		ts   int64
		base int64
	}{
		{"zero", 0, now},
		{"negative", -1, now},
		{"in the future", now + 1, now},
		{"within the clock skew", now + MaxClockSkewMs, now},
		{"now", now, now},
		{"in the past", now - 4_000, now - 4_000},
		{"long past", 1, 1},
	}
	t.Run("beyond the clock skew", func(t *testing.T) {
		env := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead"}}.envelope()
		env.TimestampUnixMs = now + MaxClockSkewMs + 1
		if out := Start(nil, env, "lead", nil, now); out.Verdict.Reason != rules.ReasonClockSkew || out.Next != nil {
			t.Fatalf("a post-dated SessionStart: %+v", out.Verdict)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead"}}.envelope()
			env.TimestampUnixMs = tc.ts
			out := Start(nil, env, "lead", nil, now)
			if !out.Verdict.OK() {
				t.Fatal(out.Verdict)
			}
			if s := out.Next; s.StartedAtMs != tc.base || s.DeadlineMs != tc.base+ttl {
				t.Errorf("started %d deadline %d, want %d and %d", s.StartedAtMs, s.DeadlineMs, tc.base, tc.base+ttl)
			}
		})
	}
}

// TestStartExisting: a second SessionStart for a known session.
func TestStartExisting(t *testing.T) {
	su := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice"}}
	s, _ := su.start()
	// Advance the session so that the existing state is not trivial.
	out := Step(s, envelope(ModeTask, "TaskRequest", "m-1", "lead", marshal(taskRequest("t1", ""))), "lead", t0+1)
	if !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	s = out.Next
	resolved := s.clone()
	resolved.State = StateResolved

	restart := func(id string) *macpv1.Envelope {
		e := su.envelope()
		e.MessageId = id
		return e
	}
	tests := []struct {
		name     string
		existing *Session
		env      *macpv1.Envelope
		sender   string
		want     expect
	}{
		{"retransmitted start", s, restart("m-start"), "lead", duplicate(lead...)},
		{"retransmitted start after resolution", resolved, restart("m-start"), "lead", duplicate(lead...)},
		{"new message id", s, restart("m-start-2"), "lead", refused(rules.CodeSessionAlreadyExists, rules.ReasonSessionExists, rules.RankPre)},
		{"same id other sender", s, restart("m-start"), "alice", refused(rules.CodeSessionAlreadyExists, rules.ReasonSessionExists, rules.RankPre)},
		// The id of an accepted later message is not a retransmission of
		// this SessionStart: a duplicate is the same message.
		{"id of a later message", s, restart("m-1"), "lead", refused(rules.CodeSessionAlreadyExists, rules.ReasonSessionExists, rules.RankPre)},
		{"different mode", s, func() *macpv1.Envelope { e := restart("m-start-3"); e.Mode = ModeDecision; return e }(), "lead", refused(rules.CodeSessionAlreadyExists, rules.ReasonSessionExists, rules.RankPre)},
		// Existence is checked before the payload.
		{"garbage payload", s, func() *macpv1.Envelope { e := restart("m-start-4"); e.Payload = []byte{0xff}; return e }(), "lead", refused(rules.CodeSessionAlreadyExists, rules.ReasonSessionExists, rules.RankPre)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(tc.existing)
			out := Start(tc.existing, tc.env, tc.sender, nil, t0+2)
			checkOutcome(t, "Start", out, tc.want)
			// Step routes a SessionStart on a known session to the same rules.
			out = Step(tc.existing, tc.env, tc.sender, t0+2)
			checkOutcome(t, "Step", out, tc.want)
			if dump(tc.existing) != before {
				t.Errorf("the existing session was mutated")
			}
		})
	}
	// Step without a session never creates one.
	out = Step(nil, su.envelope(), "lead", t0)
	checkOutcome(t, "Step(nil, SessionStart)", out, refused(rules.CodeSessionNotFound, rules.ReasonSessionUnknown, rules.RankPre))
}

func TestBind(t *testing.T) {
	tests := []struct {
		name      string
		d         PolicyDescriptor
		err       bool
		authority string
		check     func(t *testing.T, g *Governance)
	}{
		{name: "empty", d: PolicyDescriptor{PolicyID: "p"}, authority: "initiator_only", check: func(t *testing.T, g *Governance) {
			if g.SchemaVersion != 1 || g.Rules == nil || g.Canonical != `{"id":"p","sv":1,"rules":{}}` {
				t.Errorf("governance = %+v", g)
			}
		}},
		{name: "schema version kept", d: PolicyDescriptor{PolicyID: "p", SchemaVersion: 2}, authority: "initiator_only", check: func(t *testing.T, g *Governance) {
			if g.SchemaVersion != 2 {
				t.Errorf("schema version = %d", g.SchemaVersion)
			}
		}},
		{name: "canonical is key-sorted", d: descriptor("p", "*", `{"b":{"y":1,"x":2},"a":true}`), authority: "initiator_only", check: func(t *testing.T, g *Governance) {
			if g.Canonical != `{"id":"p","sv":1,"rules":{"a":true,"b":{"x":2,"y":1}}}` {
				t.Errorf("canonical = %s", g.Canonical)
			}
		}},
		{name: "any_participant", d: descriptor("p", "*", `{"commitment":{"authority":"any_participant"}}`), authority: "any_participant"},
		{name: "designated_role", d: descriptor("p", "*", `{"commitment":{"authority":"designated_role","designated_roles":["alice",7,"bob"]}}`), authority: "designated_role", check: func(t *testing.T, g *Governance) {
			if strings.Join(g.designatedRoles, ",") != "alice,bob" {
				t.Errorf("designated = %q", g.designatedRoles)
			}
		}},
		{name: "unknown authority", d: descriptor("p", "*", `{"commitment":{"authority":"everyone"}}`), err: true},
		{name: "authority of another type is ignored", d: descriptor("p", "*", `{"commitment":{"authority":3}}`), authority: "initiator_only"},
		{name: "mode rules", d: descriptor("p", "*", `{
			"assignment":{"allow_reassignment_on_reject":true},
			"completion":{"require_output":true},
			"acceptance":{"implicit_accept_timeout_ms":2500,"criterion":"counterparty"},
			"rejection":{"terminal_on_any_reject":true},
			"counter_proposal":{"max_rounds":3}}`), authority: "initiator_only", check: func(t *testing.T, g *Governance) {
			if !g.allowReassignmentOnReject || !g.requireOutput || g.implicitAcceptTimeoutMs != 2500 ||
				g.acceptanceCriterion != "counterparty" || !g.terminalOnAnyReject || g.maxCounterRounds != 3 {
				t.Errorf("governance = %+v", g)
			}
		}},
		{name: "zero and negative limits are off", d: descriptor("p", "*", `{"acceptance":{"implicit_accept_timeout_ms":-5},"counter_proposal":{"max_rounds":0}}`), authority: "initiator_only", check: func(t *testing.T, g *Governance) {
			if g.implicitAcceptTimeoutMs != 0 || g.maxCounterRounds != 0 {
				t.Errorf("governance = %+v", g)
			}
		}},
		{name: "unencodable rules", d: PolicyDescriptor{PolicyID: "p", Rules: map[string]any{"x": func() {}}}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Bind(tc.d)
			if tc.err {
				if err == nil {
					t.Fatalf("Bind = %+v, want an error", g)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.ID != tc.d.PolicyID || g.authority != tc.authority {
				t.Errorf("id %q authority %q, want %q %q", g.ID, g.authority, tc.d.PolicyID, tc.authority)
			}
			if tc.check != nil {
				tc.check(t, g)
			}
		})
	}
}

// TestCommitmentAuthorityRoles: the commitment_authority role follows the
// bound policy's commitment.authority.
func TestCommitmentAuthorityRoles(t *testing.T) {
	tests := []struct {
		rules string
		roles map[string][]string
	}{
		{`{}`, map[string][]string{"lead": {rI, rC}, "alice": {rP}, "mallory": nil}},
		{`{"commitment":{"authority":"initiator_only"}}`, map[string][]string{"lead": {rI, rC}, "alice": {rP}, "mallory": nil}},
		{`{"commitment":{"authority":"any_participant"}}`, map[string][]string{"lead": {rI, rC}, "alice": {rP, rC}, "mallory": nil}},
		{`{"commitment":{"authority":"designated_role","designated_roles":["bob","mallory"]}}`,
			map[string][]string{"lead": {rI}, "alice": {rP}, "bob": {rP, rC}, "mallory": {rC}}},
		{`{"commitment":{"authority":"designated_role"}}`, map[string][]string{"lead": {rI}, "alice": {rP}}},
	}
	for _, tc := range tests {
		t.Run(tc.rules, func(t *testing.T) {
			// The initiator is not a participant in a quorum session.
			su := withPolicy(setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice", "bob"}}, "policy.q", tc.rules)
			s, out := su.start()
			if !out.Verdict.OK() {
				t.Fatal(out.Verdict)
			}
			for who, want := range tc.roles {
				if got := s.baseRoles(who); !sameRoles(got, want) {
					t.Errorf("roles of %s = %q, want %q", who, got, want)
				}
				if got := Control(s, OpCancel, who, t0).Roles; !sameRoles(got, want) {
					t.Errorf("Control roles of %s = %q, want %q", who, got, want)
				}
			}
		})
	}
}

// TestStartPayloadFieldsIgnored: the fields Warden does not read do not change
// the decision; fields outside the schema refuse it.
func TestStartPayloadFieldsIgnored(t *testing.T) {
	p := startPayload("lead", "alice")
	p.Intent = "anything"
	p.Roots = []*macpv1.Root{{Uri: "file:///x", Name: "x"}}
	p.MaxSuspendMs = 5
	env := envelope(ModeTask, TypeSessionStart, "m", "lead", marshal(p))
	if out := Start(nil, env, "lead", nil, t0); !out.Verdict.OK() {
		t.Fatal(out.Verdict)
	}
	// A field outside the payload's schema is refused, as prost refuses a
	// known field of the wrong wire type (issue 24 item 2): Warden never
	// decides on a reading the runtime does not share.
	for _, extra := range [][]byte{
		{0xf8, 0x07, 0x01},                         // field 127, varint 1
		{0x30, 0x01, 0x30, 0x02, 0x35, 0, 0, 0, 0}, // ttl_ms (6) again as a fixed32
	} {
		b := append(marshal(p), extra...)
		var probe macpv1.SessionStartPayload
		if err := proto.Unmarshal(b, &probe); err != nil {
			t.Fatal(err) // protobuf-go alone reads it
		}
		env.Payload = b
		if out := Start(nil, env, "lead", nil, t0); out.Verdict.Reason != rules.ReasonMalformedPayload {
			t.Fatalf("payload + % x: %v, want malformed_payload", extra, out.Verdict)
		}
	}
}
