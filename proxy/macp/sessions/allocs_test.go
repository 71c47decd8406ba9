//go:build !race

// The race detector's sync.Pool drops what is put in it at random, so the
// counts hold only without it.

package sessions

import (
	"context"
	"testing"

	"github.com/agentwarden/warden/proxy"
)

// TestEnforceAllocs bounds the allocations of an allowed TaskUpdate, the
// hot MACP call (issue 28): its decision id, the session's next state and
// its grown id record, the roles, and the decision held until the upstream
// answers. Nothing else: the policy input, with the envelope's MACP part,
// stays on the decider's stack, and the payload is read in place
// (taskUpdateID), decoded only if a policy reads it. Fails on the old code
// (8: the input's MACP was a pointer, allocated per call; 7: the payload
// was decoded, a message and its strings).
func TestEnforceAllocs(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{}, nil)
	sc := benchScenarios[0]
	r := sc.prepare(t, e, 0)
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		d, err := e.Enforce(ctx, r)
		if err != nil || d.Allow != sc.allowed {
			t.Fatalf("%s: %v %+v", sc.name, err, d)
		}
		d.Settle(false)
	})
	if n > 5 {
		t.Errorf("%s: %v allocations per call, want at most 5", sc.name, n)
	}
}
