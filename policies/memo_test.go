package policies

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

var (
	modes = []string{macp.ModeTask, macp.ModeHandoff, macp.ModeDecision, macp.ModeProposal, macp.ModeQuorum, macp.ModeMultiRound, "x.unknown.v1"}
	types = []string{"SessionStart", "Commitment", "TaskRequest", "TaskAccept", "TaskReject", "TaskUpdate", "TaskComplete", "TaskFail",
		"HandoffOffer", "HandoffContext", "HandoffAccept", "HandoffDecline", "Proposal", "Evaluation", "Objection", "Vote",
		"CounterProposal", "Accept", "Reject", "Withdraw", "ApprovalRequest", "Approve", "Abstain", "Contribute", "Progress",
		"CancelSession", "Bogus"}
	roles = []string{macp.RoleInitiator, macp.RoleParticipant, macp.RoleCommitmentAuthority, macp.RoleEligibleAssignee,
		macp.RoleActiveAssignee, macp.RoleOfferOwner, macp.RoleOfferTarget, macp.RoleProposalAuthor}
	govs = []map[string]any{
		{},
		{"voting": map[string]any{"algorithm": "majority"}},
		{"voting": map[string]any{"algorithm": "unanimous"}, "commitment": map[string]any{"require_vote_quorum": true}},
		{"voting": map[string]any{"algorithm": "weighted", "weights": map[string]any{"a": 2.0, "b": 1.0}}},
		{"objection_handling": map[string]any{"critical_severity_vetoes": true, "critical_objection_action": "finalize_decline"}},
		{"threshold": map[string]any{"type": "percentage", "value": 50.0}},
		{"completion": map[string]any{"require_output": true}},
		{"counter_proposal": map[string]any{"max_rounds": 1.0}},
	}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// randomInput draws an input from a small vocabulary, so that inputs repeat
// (memo hits) and differ in every field the policies read.
func randomInput(r *rand.Rand) *Input {
	in := &Input{
		Protocol:  "macp",
		Principal: Principal{ID: pick(r, []string{"a", "b", "c"}), Method: "dev"},
		Message:   Message{Mode: pick(r, modes), Type: pick(r, types), Sender: pick(r, []string{"a", "b"}), ID: "m", SessionID: "s"},
		Session:   Session{State: "Open", Policy: "p"},
	}
	switch r.IntN(4) {
	case 0:
		in.Principal.Scopes = map[string]any{"can_start_sessions": false}
	case 1:
		in.Principal.Scopes = map[string]any{"allowed_modes": []any{pick(r, modes)}}
	}
	for _, role := range roles {
		if r.IntN(3) == 0 {
			in.Roles = append(in.Roles, role)
		}
	}
	if in.Message.Type == "Commitment" && r.IntN(4) > 0 {
		g, err := macp.Bind(macp.PolicyDescriptor{PolicyID: "p", Mode: "*", SchemaVersion: uint32(1 + r.IntN(3)), Rules: pick(r, govs)})
		if err != nil {
			panic(err)
		}
		in.Governance = g
		votes := []any{}
		for _, voter := range []string{"a", "b", "c"} {
			if r.IntN(2) == 0 {
				votes = append(votes, map[string]any{"proposal": "p1", "voter": voter, "vote": pick(r, []string{"APPROVE", "REJECT", "ABSTAIN"})})
			}
		}
		in.Facts = map[string]any{
			"outcome_positive": r.IntN(2) == 0, "action": "x",
			"report": pick(r, []string{"completed", "failed"}), "has_output": r.IntN(2) == 0,
			"accepted": r.IntN(2) == 0, "declined": r.IntN(2) == 0,
			"phase": pick(r, []string{"Converged", "TerminalRejected"}), "counter_proposals": r.IntN(3),
			"approvals": r.IntN(4), "rejections": r.IntN(2), "abstentions": r.IntN(2), "eligible": 4, "required_approvals": 1 + r.IntN(3),
			"votes": votes, "evaluations": []any{}, "participants": []any{"a", "b", "c"},
			"objections": []any{map[string]any{"proposal": "p1", "severity": pick(r, []string{"critical", "low"}), "sender": "b"}},
		}
	}
	return in
}

// TestMemoEquivalence checks that memoized decisions are exactly the ones a
// fresh evaluation gives, on inputs that repeat and inputs that differ only
// in fields the policies read.
func TestMemoEquivalence(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := e.Memoized(); !ok {
		t.Fatalf("default policies are not memoized: %s", why)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 3000
	denied := 0
	var seen []*Input
	for i := range n {
		in := randomInput(r)
		if i%2 == 1 {
			in = pick(r, seen) // a repeat: most of these are memo hits
		}
		seen = append(seen, in)
		memo, err := e.Evaluate(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := e.Fresh(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(memo, fresh) {
			t.Fatalf("input %d (%+v): memoized %+v, fresh %+v", i, in, memo, fresh)
		}
		if len(fresh) > 0 {
			denied++
		}
	}
	if got := e.memo.Len(); got >= n {
		t.Fatalf("memo holds %d entries for %d evaluations: no input was ever a hit", got, n)
	}
	if denied == 0 || denied == n {
		t.Fatalf("%d of %d inputs denied: the generator does not exercise both outcomes", denied, n)
	}
	t.Logf("%d inputs, %d distinct keys, %d denied", n, e.memo.Len(), denied)
}

// TestMemoKeyIgnoresUnreadFields checks that inputs differing only in fields
// no policy reads share a memo entry.
func TestMemoKeyIgnoresUnreadFields(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range e.Reads() {
		if strings.HasPrefix(p, "input.message.id") || strings.HasPrefix(p, "input.message.sender") || strings.HasPrefix(p, "input.principal.id") {
			t.Fatalf("default policies read %s: every message would miss the memo", p)
		}
	}
	for i := range 10 {
		in := &Input{Message: Message{Mode: macp.ModeTask, Type: "TaskUpdate", ID: string(rune('a' + i)), Sender: string(rune('a' + i))}, Roles: []string{"participant", "active_assignee"}}
		if _, err := e.Evaluate(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if e.memo.Len() != 1 {
		t.Fatalf("memo holds %d entries, want 1", e.memo.Len())
	}
}

func writeFile(t *testing.T, name, src string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOperatorPolicies(t *testing.T) {
	ctx := context.Background()
	extra := writeFile(t, "steer.rego", `package warden.macp
import rego.v1
deny contains {"code": "FORBIDDEN", "reason": "no_mallory", "msg": "mallory is blocked"} if input.principal.id == "mallory"
`)
	e, err := New(ctx, Config{Files: []string{extra}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(e.Reads(), "input.principal.id") {
		t.Fatalf("reads %v miss input.principal.id", e.Reads())
	}
	in := &Input{Principal: Principal{ID: "mallory"}, Message: Message{Mode: macp.ModeTask, Type: "TaskUpdate"}, Roles: []string{"participant", "active_assignee"}}
	d, err := e.Evaluate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := []rules.Verdict{{Code: rules.CodeForbidden, Reason: rules.ReasonOperatorPolicy, Rank: rules.RankOperator, Detail: "mallory is blocked"}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	in.Principal.ID = "alice"
	if d, _ := e.Evaluate(ctx, in); len(d) != 0 {
		t.Fatalf("alice denied: %+v", d)
	}

	clock := writeFile(t, "clock.rego", `package warden.macp
import rego.v1
deny contains "after hours" if time.now_ns() < 0
`)
	e, err = New(ctx, Config{Files: []string{clock}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := e.Memoized(); ok || !strings.Contains(why, "time.now_ns") {
		t.Fatalf("a policy reading the clock must not be memoized (memoized=%v, %q)", ok, why)
	}

	bad := writeFile(t, "bad.rego", "package warden.macp\ndeny contains x if {")
	if _, err := New(ctx, Config{Files: []string{bad}}); err == nil {
		t.Fatal("a policy that does not parse must fail New")
	}
	if _, err := New(ctx, Config{Files: []string{"policy.txt"}}); err == nil {
		t.Fatal("a non-.rego file must fail validation")
	}
}

func TestOperatorPolicyTests(t *testing.T) {
	test := writeFile(t, "extra_test.rego", `package warden.extra_test
import rego.v1
test_fails if false
`)
	results, err := Test(context.Background(), Config{Files: []string{test}})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, r := range results {
		if !r.Passed {
			failed = append(failed, r.Name)
		}
	}
	if !slices.Equal(failed, []string{"data.warden.extra_test.test_fails"}) {
		t.Fatalf("failed tests %v", failed)
	}
	if s := Summary(results); !strings.Contains(s, "1 failing") {
		t.Fatalf("summary %q", s)
	}
}
