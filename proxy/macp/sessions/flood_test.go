package sessions

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestFloodKeepsUsedSessions: another agent floods a table of 64 sessions
// (that may evict live ones: a runtime rebuilds them) with sessions of its
// own while the planner's session keeps being used, once every 63 of the
// other's messages. The planner's committed state stays in the table,
// never rebuilt, whatever the other does between her messages: starts
// only, or starts and messages on its own sessions that make them recently
// used too. This is what the least-recently-used table promises (a session
// leaves only after 63 others were used or made since its last use) and
// what any cheaper table must keep: it fails on a first-in-first-out table
// (both rows), and the second row fails on a second-chance (CLOCK) table,
// whose reference bits forget when each session was used, so that the
// other, keeping its own sessions' bits set, makes the sweep pass every
// session once and evict them in the order they came, the planner's too.
func TestFloodKeepsUsedSessions(t *testing.T) {
	const size = 64
	for _, tc := range []struct {
		name string
		// touches is how many of its own most recent sessions the other
		// sends a message on before each start.
		touches int
	}{
		{"starts only", 0},
		{"starts and touches of its own", size - 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb := &fakeRebuilder{bound: map[string]*macp.Governance{}}
			e, _ := newEnforcer(t, proxy.Config{Sessions: size}, rb)
			ctx := context.Background()
			victim := sessionID(1)
			startTask(t, e, victim, true)
			want, err := e.Session(ctx, victim)
			if err != nil || want == nil {
				t.Fatal(err)
			}
			update := mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
			use := func(n int) { // the planner's session used; the runtime refuses it, so its state stays
				t.Helper()
				d, err := e.Enforce(ctx, req(env(victim, worker, "TaskUpdate", fmt.Sprint("u", n), update)))
				if err != nil || !d.Allow {
					t.Fatalf("the planner's TaskUpdate after %d of the other's messages: %v %+v", n, err, d)
				}
				d.Settle(false)
			}
			request := mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker})
			var ops, started int
			op := func(sid, typ string, payload []byte, settle bool) {
				d, err := e.Enforce(ctx, req(env(sid, other, typ, typ, payload)))
				if err != nil {
					t.Fatal(err)
				}
				d.Settle(settle && d.Allow)
				if ops++; ops%(size-1) == 0 {
					use(ops)
				}
			}
			for ops < 200*size {
				for i := max(0, started-tc.touches); i < started; i++ {
					op(sessionID(1000+i), "TaskRequest", request, false) // refused by the runtime: used, not moved
				}
				op(sessionID(1000+started), "SessionStart", mustMarshal(t, &macpv1.SessionStartPayload{
					Participants: []string{other, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000}), true)
				started++
			}
			if _, ok := rb.bound[victim]; ok {
				t.Errorf("the planner's session was evicted and rebuilt during %d of the other's messages (%d starts)", ops, started)
			}
			if got, _ := e.Session(ctx, victim); got != want {
				t.Errorf("the planner's state is %p after the flood, want %p, the one committed", got, want)
			}
			if n := e.table.len(); n > size {
				t.Errorf("the table holds %d sessions, want at most %d", n, size)
			}
		})
	}
}
