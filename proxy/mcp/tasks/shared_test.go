package tasks

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners/ownerstest"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

// errDown is what a store that is down answers.
var errDown = ownerstest.ErrDown

// replicas returns n Enforcers sharing store.

func TestSharedTaskOwners(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 3, store)
	taskCreated(r[0], "t1", alice, mcp.StatusWorking)
	taskCreated(r[1], "t2", bob, "")
	for i, e := range r {
		t.Run(fmt.Sprint("replica ", i), func(t *testing.T) {
			if o, ok := taskOwner(e, "t1"); !ok || o != alice {
				t.Errorf("owner of t1: %q %v", o, ok)
			}
			got, err := taskOwners(e, context.Background(), []string{"t2", "t-unknown", "t1", ""})
			if err != nil || fmt.Sprint(got) != "[bob  alice ]" {
				t.Errorf("owners: %q %v", got, err)
			}
		})
	}

	// Owners never change, so what a replica learned it answers alone; what
	// it does not know needs the store.
	store.Set(true)
	defer store.Set(false)
	if o, ok := taskOwner(r[2], "t1"); !ok || o != alice {
		t.Errorf("cached owner with the store down: %q %v", o, ok)
	}
	if _, err := taskOwners(r[2], context.Background(), []string{"t1", "t3"}); !errors.Is(err, errDown) {
		t.Errorf("owners of an unknown task with the store down: %v, want the store's error", err)
	}
	if o, ok := taskOwner(r[2], "t3"); ok {
		t.Errorf("owner of an unknown task with the store down: %q, want unknown", o)
	}
}

// TestSharedSteerBound: the bound holds over the replicas together, and an
// upstream refusal gives the place back wherever the next steer goes.
func TestSharedSteerBound(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 3, store)
	taskCreated(r[0], "s", alice, mcp.StatusWorking)
	var ds []proxy.Decision
	for i := range 4 {
		d := enforceTask(t, r[i%3], steerReq(alice, "s", 3))
		ds = append(ds, d)
		if want := i < 3; d.Allow != want {
			t.Fatalf("steer %d through replica %d: allow %v, want %v (%+v)", i, i%3, d.Allow, want, d)
		}
	}
	if d := ds[3]; d.Code != rules.CodeInvalidParams || d.Reason != rules.ReasonSteerQueueFull {
		t.Fatalf("steer over the bound: %+v", d)
	}
	ds[3].Settle(false)
	ds[1].Settle(false) // the upstream refused it
	if d := enforceTask(t, r[2], steerReq(alice, "s", 3)); !d.Allow {
		t.Fatalf("steer after a give-back: %+v", d)
	}
	if d := enforceTask(t, r[0], steerReq(alice, "s", 3)); d.Allow {
		t.Fatalf("steer over the bound again: %+v", d)
	}
	// A safe point seen by one replica frees the queue for all.
	taskObserved(r[1], "s", mcp.StatusInputRequired)
	if d := enforceTask(t, r[0], steerReq(alice, "s", 3)); !d.Allow {
		t.Fatalf("steer after the status changed: %+v", d)
	}
}

// TestSharedStatus: a terminal status one replica learned decides on
// another without asking the upstream (a terminal status is final).
func TestSharedStatus(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 2, store)
	taskCreated(r[0], "p", alice, mcp.StatusWorking)
	enforceTask(t, r[1], taskReq(mcp.MethodGet, alice, "p", true)).Settle(true) // r[1] knows it as working
	taskObserved(r[0], "p", mcp.StatusCompleted)
	s := &fakeStatus{status: mcp.StatusWorking}
	req := taskReq(mcp.MethodPause, alice, "p", true)
	req.Status = StatusFunc(s.read)
	if d := enforceTask(t, r[1], req); d.Allow || d.Reason != rules.ReasonTaskState {
		t.Fatalf("pause of a task another replica saw completed: %+v", d)
	}
	if s.n() != 0 {
		t.Error("a terminal status the store knows was read from the upstream")
	}
}

// TestSharedStoreFaults: a store that cannot be reached fails every task
// decision closed; one restarted empty rebuilds from what the handle proves
// and from the upstream's status.
func TestSharedStoreFaults(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 2, store)
	taskCreated(r[0], "f", alice, mcp.StatusWorking)
	store.Set(true)
	for _, m := range taskMethods {
		t.Run("down/"+m, func(t *testing.T) {
			req := taskReq(m, alice, "f", true)
			if m == mcp.MethodSteer {
				req = steerReq(alice, "f", 2)
			}
			d, err := r[1].Enforce(context.Background(), req)
			if !errors.Is(err, errDown) {
				t.Fatalf("EnforceTask with the store down: %+v %v, want the store's error", d, err)
			}
		})
	}
	// Not the caller's: refused as today, without the store.
	if d := enforceTask(t, r[1], taskReq(mcp.MethodGet, bob, "f", false)); d.Allow || d.Code != rules.CodeTaskNotFound {
		t.Fatalf("bob with the store down: %+v", d)
	}

	store.Set(false)
	store.Restart()
	s := &fakeStatus{status: mcp.StatusPaused}
	req := taskReq(mcp.MethodResume, alice, "f", true)
	req.Status = StatusFunc(s.read)
	d := enforceTask(t, r[1], req)
	d.Settle(true)
	if !d.Allow || s.n() != 1 {
		t.Fatalf("resume after the store lost the task: %+v (status read %d times)", d, s.n())
	}
	if o, err := store.Owners(context.Background(), "", []string{"f"}); err != nil || o[0] != alice {
		t.Fatalf("the handle's owner was not written back: %q %v", o, err)
	}
	if got, _, _, _ := store.Claim(context.Background(), "f", alice, 0); got != mcp.StatusPaused {
		t.Fatalf("the status read from the upstream was not written back: %q", got)
	}
}

// TestSharedStatusWrittenOnce: the status a decision just read from the
// store is not written back when the upstream's answer repeats it; a new
// one is.
func TestSharedStatusWrittenOnce(t *testing.T) {
	store := ownerstest.New()
	e := replicas(t, 1, store)[0]
	taskCreated(e, "w", alice, mcp.StatusWorking)
	ops := store.Ops
	for _, tc := range []struct {
		name, observed string
		writes         int
	}{
		{"same status", mcp.StatusWorking, 0},
		{"new status", mcp.StatusInputRequired, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enforceTask(t, e, taskReq(mcp.MethodGet, alice, "w", true)).Settle(true)
			before := ops()
			taskObserved(e, "w", tc.observed)
			if got := ops() - before; got != tc.writes {
				t.Fatalf("%d store operations, want %d", got, tc.writes)
			}
			if s, _, _, _ := store.Claim(context.Background(), "w", alice, 0); s != tc.observed {
				t.Fatalf("store status %q, want %q", s, tc.observed)
			}
		})
	}
}

// TestHandleOfAnothersTask: a handle for an id the shared store gives
// another (replicas raced to record it for two principals) proves nothing:
// the request is refused and the owner stays (MCP's half; A2A's is in
// proxy/a2a/tenancy).
func TestHandleOfAnothersTask(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 3, store)
	ctx := context.Background()
	bob := authn.Principal{ID: "bob", Method: string(authn.MethodDev)}
	taskCreated(r[0], "m", "alice", mcp.StatusWorking)
	taskCreated(r[1], "m", "bob", mcp.StatusWorking)
	if o, ok := taskOwner(r[1], "m"); !ok || o != "alice" {
		t.Fatalf("MCP task created for bob after alice: owner %q, want alice", o)
	}
	for i, e := range r {
		d, err := e.Enforce(ctx, Request{Principal: bob, Call: mcp.Call{Method: mcp.MethodGet}, TaskID: "m", Owner: true})
		if err != nil || d.Allow {
			t.Errorf("replica %d: bob's handle of alice's MCP task: %+v %v, want refused", i, d, err)
		}
	}
	if o, _ := store.Owners(ctx, "", []string{"m"}); fmt.Sprint(o) != "[alice]" {
		t.Errorf("owners after bob's attempts: %q, want alice's", o)
	}
}
