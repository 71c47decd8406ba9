package policies

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/agentwarden/warden/rules/macp"
)

// benchInputs are a hot-path message (no facts) and a commitment (facts and
// governance), each allowed and denied.
func benchInputs(b *testing.B) map[string]*Input {
	g, err := macp.Bind(macp.PolicyDescriptor{PolicyID: "p", Mode: "*", SchemaVersion: 2, Rules: map[string]any{"voting": map[string]any{"algorithm": "majority"}}})
	if err != nil {
		b.Fatal(err)
	}
	facts := func(positive bool) map[string]any {
		return map[string]any{
			"outcome_positive": positive, "action": "decision.selected",
			"votes":        []any{map[string]any{"proposal": "p", "voter": "a", "vote": "APPROVE"}, map[string]any{"proposal": "p", "voter": "b", "vote": "REJECT"}, map[string]any{"proposal": "p", "voter": "c", "vote": "APPROVE"}},
			"evaluations":  []any{},
			"objections":   []any{},
			"participants": []any{"a", "b", "c"},
		}
	}
	commit := func(positive bool) *Input {
		return &Input{Protocol: "macp", Message: Message{Mode: macp.ModeDecision, Type: "Commitment"}, Roles: []string{"initiator", "participant", "commitment_authority"}, Facts: facts(positive), Governance: g}
	}
	return map[string]*Input{
		"TaskUpdate/allow": {Protocol: "macp", Message: Message{Mode: macp.ModeTask, Type: "TaskUpdate"}, Roles: []string{"participant", "active_assignee"}},
		"TaskUpdate/deny":  {Protocol: "macp", Message: Message{Mode: macp.ModeTask, Type: "TaskUpdate"}, Roles: []string{"initiator", "participant", "commitment_authority"}},
		"Commitment/allow": commit(true),
		// a majority passed, so a decline without allow_decline_over_approval is denied
		"Commitment/deny": commit(false),
	}
}

// BenchmarkPolicy compares the memoized evaluation (the hot path), a fresh
// evaluation of the same prepared query, and a plain prepared OPA query
// with a one-line policy as the floor of what any OPA evaluation costs.
func BenchmarkPolicy(b *testing.B) {
	ctx := context.Background()
	e, err := New(ctx, Config{})
	if err != nil {
		b.Fatal(err)
	}
	for name, in := range benchInputs(b) {
		b.Run("memo/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Evaluate(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("fresh/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Fresh(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("plain-opa-query", func(b *testing.B) {
		pq, err := rego.New(rego.Query("data.bench.allow"), rego.Module("bench.rego", `package bench
import rego.v1
default allow := false
allow if input.roles[_] == "active_assignee"
`)).PrepareForEval(ctx)
		if err != nil {
			b.Fatal(err)
		}
		in := benchInputs(b)["TaskUpdate/allow"].value(true)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pq.Eval(ctx, rego.EvalInput(in)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
