//go:build !race

// The race detector's sync.Pool drops what is put in it at random, so the
// counts hold only without it.

package sessions

import (
	"context"
	"slices"
	"testing"

	"github.com/agentwarden/warden/proxy"
)

// TestEnforceAllocs bounds the allocations of the hot MACP calls (issue
// 28). An allowed TaskUpdate: its decision id, the session's next state and
// its grown id record, the roles, and the decision held until the upstream
// answers. Nothing else: the policy input, with the envelope's MACP part,
// stays on the decider's stack, and the payload is read in place (flat),
// decoded only if a policy reads it. Fails on the old code (8: the input's
// MACP was a pointer, allocated per call; 7: the payload was decoded, a
// message and its strings). An allowed HandoffAccept: the same and the
// offers' next state, its payload read in place too (9 on the old code: the
// payload decoded, a message and its two strings; 7 with the offers' state
// and their array apart, one allocation since the first offer lives in the
// state). An allowed HandoffOffer: the same, its offer added in the state
// (7 on 86daa10: the offers' array grown apart).
func TestEnforceAllocs(t *testing.T) {
	for _, c := range []struct {
		scenario string
		max      float64
	}{
		{"task/TaskUpdate/allow", 5},
		{"handoff/HandoffOffer/allow", 6},
		{"handoff/HandoffAccept/allow", 6},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			i := slices.IndexFunc(benchScenarios, func(sc scenario) bool { return sc.name == c.scenario })
			if i < 0 {
				t.Fatalf("no scenario %s", c.scenario)
			}
			sc := benchScenarios[i]
			e, _ := newEnforcer(t, proxy.Config{}, nil)
			r := sc.prepare(t, e, 0)
			ctx := context.Background()
			n := testing.AllocsPerRun(200, func() {
				d, err := e.Enforce(ctx, r)
				if err != nil || d.Allow != sc.allowed {
					t.Fatalf("%s: %v %+v", sc.name, err, d)
				}
				d.Settle(false)
			})
			if n > c.max {
				t.Errorf("%s: %v allocations per call, want at most %v", sc.name, n, c.max)
			}
		})
	}
}
