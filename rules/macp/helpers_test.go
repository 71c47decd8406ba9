package macp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Test fixtures shared by every test in the package.
const (
	sid = "3f1c2a4e-9b7d-4c1e-8a2b-5d6e7f809102" // a lowercase UUIDv4
	t0  = int64(1_700_000_000_000)               // session start, Unix ms
	ttl = int64(60_000)
	cfg = "cfg-1"
)

// Short role names for the tables.
const (
	rI = RoleInitiator
	rP = RoleParticipant
	rC = RoleCommitmentAuthority
	rE = RoleEligibleAssignee
	rA = RoleActiveAssignee
	rO = RoleOfferOwner
	rT = RoleOfferTarget
	rW = RoleProposalAuthor
)

// lead is the initiator who is also a declared participant: the roles it holds
// under the default policy.
var lead = []string{rI, rP, rC}

func with(base []string, extra ...string) []string {
	return append(slices.Clone(base), extra...)
}

// envelope builds a well-formed envelope.
func envelope(mode, typ, id, sender string, payload []byte) *macpv1.Envelope {
	return &macpv1.Envelope{
		MacpVersion: ProtocolVersion,
		Mode:        mode,
		MessageType: typ,
		MessageId:   id,
		SessionId:   sid,
		Sender:      sender,
		Payload:     payload,
	}
}

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func startPayload(participants ...string) *macpv1.SessionStartPayload {
	return &macpv1.SessionStartPayload{
		Participants:         participants,
		ModeVersion:          SupportedModeVer,
		ConfigurationVersion: cfg,
		TtlMs:                ttl,
	}
}

// commit returns a Commitment payload that echoes the default session's
// versions.
func commit(action string, positive bool) *macpv1.CommitmentPayload {
	return &macpv1.CommitmentPayload{
		CommitmentId:         "c-1",
		Action:               action,
		AuthorityScope:       "scope",
		Reason:               "because",
		ModeVersion:          SupportedModeVer,
		ConfigurationVersion: cfg,
		OutcomePositive:      positive,
	}
}

// rulesOf decodes a JSON rules document the way a registered policy's rules
// arrive (numbers as float64).
func rulesOf(js string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		panic(err)
	}
	return m
}

func descriptor(id, mode, rules string) PolicyDescriptor {
	return PolicyDescriptor{PolicyID: id, Mode: mode, SchemaVersion: 1, Rules: rulesOf(rules)}
}

// registry is a fake policy registry.
func registry(ds ...PolicyDescriptor) PolicyLookup {
	m := make(map[string]PolicyDescriptor, len(ds))
	for _, d := range ds {
		m[d.PolicyID] = d
	}
	return func(id string) (PolicyDescriptor, bool) {
		d, ok := m[id]
		return d, ok
	}
}

// setup describes a session to start.
type setup struct {
	mode         string
	initiator    string
	participants []string
	policy       *PolicyDescriptor // nil: the default policy
	ttl          int64             // 0: ttl
}

func (su setup) envelope() *macpv1.Envelope {
	p := startPayload(su.participants...)
	if su.ttl != 0 {
		p.TtlMs = su.ttl
	}
	if su.policy != nil {
		p.PolicyVersion = su.policy.PolicyID
	}
	env := envelope(su.mode, TypeSessionStart, "m-start", su.initiator, marshal(p))
	env.TimestampUnixMs = t0
	return env
}

func (su setup) lookup() PolicyLookup {
	if su.policy == nil {
		return nil
	}
	return registry(*su.policy)
}

func (su setup) start() (*Session, Outcome) {
	out := Start(nil, su.envelope(), su.initiator, su.lookup(), t0)
	return out.Next, out
}

// msg is one message of a scenario, and what the rules must answer.
type msg struct {
	from string
	typ  string
	body proto.Message // marshalled into the payload; nil: raw is the payload
	raw  []byte
	id   string // "": m-<index>
	at   int64  // ms after the session start; 0: 1 ms after the previous message
	mode string // "": the session's mode
	want expect
}

// expect is what a Step must return.
type expect struct {
	code   rules.Code
	reason rules.Reason
	rank   rules.Rank
	roles  []string
	dup    bool
	facts  map[string]any // compared as JSON when non-nil
	mark   mark
}

// mark says what the policy does with a message the rules allow, and so
// whether play commits it. play checks the marks against authority, a fake
// of the policies package's authority matrices.
type mark uint8

const (
	// markAllowed: the sender holds the authority; committed.
	markAllowed mark = iota
	// markAuthz: the sender lacks the authority (the roles lack the one the
	// matrix needs); not committed, as the Enforcer would not.
	markAuthz
	// markGoverned: authority holds but a governance or consistency rule of
	// the policy refuses; not committed.
	markGoverned
	// markForced: committed whatever the policy says, to exercise the
	// rules' bookkeeping of senders the policy would refuse.
	markForced
)

func accepted(roles ...string) expect {
	return expect{reason: rules.ReasonAllowed, roles: roles}
}

// authz is a message the rules allow but the policy refuses for authority.
func authz(roles ...string) expect {
	return expect{reason: rules.ReasonAllowed, roles: roles, mark: markAuthz}
}

// governed is a message the rules allow and the sender may send, but the
// policy's governance refuses.
func governed(roles ...string) expect {
	return expect{reason: rules.ReasonAllowed, roles: roles, mark: markGoverned}
}

// forced is a message the rules allow, committed even though the policy
// would refuse it.
func forced(roles ...string) expect {
	return expect{reason: rules.ReasonAllowed, roles: roles, mark: markForced}
}

func duplicate(roles ...string) expect {
	return expect{reason: rules.ReasonDuplicate, roles: roles, dup: true}
}

func refused(code rules.Code, reason rules.Reason, rank rules.Rank, roles ...string) expect {
	return expect{code: code, reason: reason, rank: rank, roles: roles}
}

// bad is the common INVALID_ENVELOPE refusal.
func bad(reason rules.Reason, rank rules.Rank, roles ...string) expect {
	return refused(rules.CodeInvalidEnvelope, reason, rank, roles...)
}

func (e expect) withFacts(f map[string]any) expect {
	e.facts = f
	return e
}

func (m msg) payload() []byte {
	if m.body != nil {
		return marshal(m.body)
	}
	return m.raw
}

func (m msg) envelope(s *Session, i int) *macpv1.Envelope {
	mode := m.mode
	if mode == "" {
		mode = s.Mode
	}
	id := m.id
	if id == "" {
		id = fmt.Sprintf("m-%d", i)
	}
	return envelope(mode, m.typ, id, m.from, m.payload())
}

// dump renders every field of a session, exported or not, into a string that
// shares nothing with the session: comparing dumps taken before and after a
// call proves the call did not mutate the session.
// rareAddr is how a rare list (behind a pointer) prints in a mode state.
var rareAddr = regexp.MustCompile(`\{p:0x[0-9a-f]+\}`)

func dump(s *Session) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	v := s.Versions()
	fmt.Fprintf(&b, "id=%q mode=%q state=%v init=%q parts=%q mv=%q cv=%q pv=%q\n",
		s.ID, s.Mode, s.State, s.Initiator, s.Participants, v.Mode, v.Config, v.Policy)
	if s.Policy != nil {
		fmt.Fprintf(&b, "policy=%p %q\n", s.Policy, s.Policy.Canonical)
	}
	fmt.Fprintf(&b, "started=%d deadline=%d suspended=%d total=%d cap=%d key=%v\n",
		s.StartedAtMs, s.DeadlineMs, s.Suspension().AtMs, s.Suspension().TotalMs, s.Suspension().MaxMs, s.key)
	if s.Resolution() != nil {
		fmt.Fprintf(&b, "resolution=%+v\n", *s.Resolution())
	}
	fmt.Fprintf(&b, "seen=%v senders=%q\n", s.seen, s.outsiders())
	if s.modal != nil {
		// through clone, which the mode's empty state (a nil pointer) and an
		// empty state of its own pass alike
		// A rare list prints as its address: its elements are in the
		// summary below.
		fmt.Fprintf(&b, "%T=%s\n", s.modal, rareAddr.ReplaceAllString(fmt.Sprintf("%+v", s.modal.clone()), "{p:list}"))
	}
	ms, err := json.Marshal(s.ModeState())
	if err != nil {
		fmt.Fprintf(&b, "modestate error: %v", err)
	}
	b.Write(ms)
	return b.String()
}

// normal round-trips v through JSON so that values of different Go types but
// the same JSON meaning compare equal.
func normal(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %#v: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameJSON(t testing.TB, got, want any) bool {
	t.Helper()
	return reflect.DeepEqual(normal(t, got), normal(t, want))
}

func sameRoles(got, want []string) bool {
	if len(got) == 0 && len(want) == 0 {
		return true
	}
	return slices.Equal(got, want)
}

// checkOutcome compares an outcome with an expectation.
func checkOutcome(t testing.TB, label string, out Outcome, want expect) {
	t.Helper()
	v := out.Verdict
	if v.Code != want.code || v.Reason != want.reason || v.Rank != want.rank {
		t.Errorf("%s: verdict = {%q %q rank %d} (%s), want {%q %q rank %d}",
			label, v.Code, v.Reason, v.Rank, v.Detail, want.code, want.reason, want.rank)
	}
	if !sameRoles(out.Roles, want.roles) {
		t.Errorf("%s: roles = %q, want %q", label, out.Roles, want.roles)
	}
	if out.Duplicate != want.dup {
		t.Errorf("%s: duplicate = %v, want %v", label, out.Duplicate, want.dup)
	}
	switch {
	case v.OK() && !out.Duplicate && out.Next == nil:
		t.Errorf("%s: allowed but Next is nil", label)
	case (!v.OK() || out.Duplicate) && out.Next != nil:
		t.Errorf("%s: denied or duplicate but Next is set", label)
	}
	if want.facts != nil && !sameJSON(t, out.Facts, want.facts) {
		t.Errorf("%s: facts = %v, want %v", label, normal(t, out.Facts), normal(t, want.facts))
	}
}

// play starts the session of su and applies msgs one at a time, checking each
// outcome, committing Next when a message is allowed, and checking that no
// Step mutates the session it was given (nor, later, any earlier state). It
// returns the final state.
func play(t *testing.T, su setup, msgs []msg) *Session {
	t.Helper()
	s, out := su.start()
	if !out.Verdict.OK() {
		t.Fatalf("SessionStart: %+v", out.Verdict)
	}
	type snap struct {
		s    *Session
		dump string
	}
	history := []snap{{s, dump(s)}}
	at := int64(0)
	for i, m := range msgs {
		if m.at != 0 {
			at = m.at
		} else {
			at++
		}
		label := fmt.Sprintf("#%d %s %s", i, m.from, m.typ)
		before, clone := dump(s), s.clone()
		if s.modal != nil && reflect.ValueOf(s.modal).IsNil() {
			clone.modal = s.modal // the mode's empty state, which clone makes a state of its own
		}
		out := Step(s, m.envelope(s, i), m.from, t0+at)
		if after := dump(s); after != before {
			t.Fatalf("%s: Step mutated its input:\nbefore %s\nafter  %s", label, before, after)
		}
		if !reflect.DeepEqual(clone, s) {
			t.Fatalf("%s: Step mutated its input (deep compare)", label)
		}
		checkOutcome(t, label, out, m.want)
		if out.Verdict.OK() && !out.Duplicate {
			may := authority(s.Mode, m.typ, out.Roles)
			switch m.want.mark {
			case markAllowed, markGoverned:
				if !may {
					t.Errorf("%s: roles %q do not authorize %s: mark it authz", label, out.Roles, m.typ)
				}
			case markAuthz:
				if may {
					t.Errorf("%s: roles %q authorize %s: it is not an authority refusal", label, out.Roles, m.typ)
				}
			}
		}
		if out.Verdict.OK() && out.Next != nil && (m.want.mark == markAllowed || m.want.mark == markForced) {
			s = out.Next
			history = append(history, snap{s, dump(s)})
		}
	}
	for i, h := range history {
		if d := dump(h.s); d != h.dump {
			t.Fatalf("state %d changed after later steps:\nthen %s\nnow  %s", i, h.dump, d)
		}
	}
	return s
}

// modeCase is one scenario of a mode's table.
type modeCase struct {
	name  string
	setup *setup // nil: the table's default
	msgs  []msg
	state State          // expected final lifecycle state; 0: Open
	final map[string]any // keys of ModeState() to compare; nil: not checked
}

func runModeCases(t *testing.T, def setup, cases []modeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			su := def
			if tc.setup != nil {
				su = *tc.setup
			}
			s := play(t, su, tc.msgs)
			want := tc.state
			if want == StateUnspecified {
				want = StateOpen
			}
			if s.State != want {
				t.Errorf("final state = %v, want %v", s.State, want)
			}
			if tc.final != nil {
				got := s.ModeState()
				for k, v := range tc.final {
					if !sameJSON(t, got[k], v) {
						t.Errorf("ModeState()[%q] = %v, want %v", k, normal(t, got[k]), normal(t, v))
					}
				}
			}
		})
	}
}

// withPolicy returns su bound to a policy with the given rules.
func withPolicy(su setup, id, rules string) *setup {
	d := descriptor(id, su.mode, rules)
	su.policy = &d
	return &su
}

// matrices are the authority matrices of RFC-MACP-0007..0011 (section 2.1 of
// each) and the runtime's ext.multi_round.v1, in the roles the rules compute:
// a fake of the policies package, written from the RFCs.
var matrices = map[string]map[string][]string{
	"*": {
		TypeSessionStart: {"*"},
		TypeSignal:       {"*"},
		TypeProgress:     {RoleParticipant},
		TypeCommitment:   {RoleCommitmentAuthority},
	},
	ModeTask: {
		"TaskRequest":  {RoleInitiator},
		"TaskAccept":   {RoleEligibleAssignee},
		"TaskReject":   {RoleEligibleAssignee, RoleActiveAssignee},
		"TaskUpdate":   {RoleActiveAssignee},
		"TaskComplete": {RoleActiveAssignee},
		"TaskFail":     {RoleActiveAssignee},
	},
	ModeHandoff: {
		"HandoffOffer":   {RoleInitiator},
		"HandoffContext": {RoleOfferOwner},
		"HandoffAccept":  {RoleOfferTarget},
		"HandoffDecline": {RoleOfferTarget},
	},
	ModeDecision: {
		"Proposal":   {RoleParticipant},
		"Evaluation": {RoleParticipant},
		"Objection":  {RoleParticipant},
		"Vote":       {RoleParticipant},
	},
	ModeProposal: {
		"Proposal":        {RoleParticipant},
		"CounterProposal": {RoleParticipant},
		"Accept":          {RoleParticipant},
		"Reject":          {RoleParticipant},
		"Withdraw":        {RoleProposalAuthor},
	},
	ModeQuorum: {
		"ApprovalRequest": {RoleInitiator},
		"Approve":         {RoleParticipant},
		"Reject":          {RoleParticipant},
		"Abstain":         {RoleParticipant},
	},
	ModeMultiRound: {
		"Contribute":   {RoleParticipant},
		TypeCommitment: {RoleInitiator},
	},
}

// authority reports whether roles authorize a message of type typ in mode.
func authority(mode, typ string, roles []string) bool {
	need, ok := matrices[mode][typ]
	if !ok {
		need, ok = matrices["*"][typ]
	}
	if !ok {
		return false
	}
	for _, r := range need {
		if r == "*" || slices.Contains(roles, r) {
			return true
		}
	}
	return false
}
