package tenancy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/owners/ownerstest"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
)

// TestA2ASeenFirstOwner: an answer teaches an owner only for ids nobody
// owns; it returns who owns them, so an adapter never hands a caller a
// handle to another's task or context.
func TestA2ASeenFirstOwner(t *testing.T) {
	e := newDecider(t)
	if to, co := seen(t, e, "t", "c", "alice", "TASK_STATE_WORKING"); to != "alice" || co != "alice" {
		t.Fatalf("first answer: owners %q %q, want alice", to, co)
	}
	if to, co := seen(t, e, "t", "c", "bob", ""); to != "alice" || co != "alice" {
		t.Fatalf("another's answer naming them: owners %q %q, want alice", to, co)
	}
	ctx := context.Background()
	if o, err := a2aContextOwner(e, ctx, "c"); err != nil || o != "alice" {
		t.Fatalf("context owner %q %v", o, err)
	}
	if o, err := a2aContextOwner(e, ctx, "unknown"); err != nil || o != "" {
		t.Fatalf("unknown context owner %q %v", o, err)
	}
	if o, err := a2aOwners(e, ctx, []string{"t"}); err != nil || o[0] != "alice" {
		t.Fatalf("task owner %v %v", o, err)
	}
}

// TestEnforceA2A: roles from what the adapter proved, task states read once
// when unknown, and a state that cannot be read fails closed.
func TestEnforceA2A(t *testing.T) {
	e := newDecider(t)
	alice := authn.Principal{ID: "alice", Method: string(authn.MethodDev)}
	seen(t, e, "done", "ctx", "alice", "TASK_STATE_COMPLETED")
	seen(t, e, "open", "ctx", "alice", "TASK_STATE_INPUT_REQUIRED")
	reads := 0
	status := func(s string, err error) StatusFunc {
		return func(context.Context) (string, error) { reads++; return s, err }
	}
	tests := []struct {
		name    string
		req     Request
		allow   bool
		code    rules.Code
		reason  rules.Reason
		wantErr bool
	}{
		{"owner reads", Request{Method: a2a.MethodGetTask, TaskID: "done", Owner: true}, true, "", "", false},
		{"not the owner", Request{Method: a2a.MethodGetTask, TaskID: "done"}, false, rules.CodeTaskNotFound, rules.ReasonUnknownTask, false},
		{"new message", Request{Method: a2a.MethodSend, New: true}, true, "", "", false},
		{"message to an input-required task", Request{Method: a2a.MethodMessageContinue, TaskID: "open", Owner: true}, true, "", "", false},
		{"message to a completed task", Request{Method: a2a.MethodMessageContinue, TaskID: "done", Owner: true}, false, rules.CodeInvalidTaskState, rules.ReasonTaskState, false},
		{"state read from the upstream", Request{Method: a2a.MethodSubscribe, TaskID: "fresh", Owner: true, Status: status("canceled", nil)}, false, rules.CodeInvalidTaskState, rules.ReasonTaskState, false},
		{"state known after one read", Request{Method: a2a.MethodSubscribe, TaskID: "fresh", Owner: true, Status: status("", errors.New("not asked"))}, false, rules.CodeInvalidTaskState, rules.ReasonTaskState, false},
		{"state unreadable", Request{Method: a2a.MethodSubscribe, TaskID: "gone", Owner: true, Status: status("", errors.New("down"))}, false, "", "", true},
		{"ownership unknown (ext_authz)", Request{Method: a2a.MethodCancelTask, TaskID: "x", OwnershipUnknown: true}, true, "", "", false},
		{"refused by the adapter", Request{Method: a2a.MethodCreatePush, TaskID: "open", Owner: true,
			Refused: rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonWebhookRefused, Detail: "loopback"}}, false, rules.CodeInvalidParams, rules.ReasonWebhookRefused, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Principal = alice
			d, err := e.Enforce(context.Background(), tc.req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			d.Settle(d.Allow)
			if d.Allow != tc.allow || d.Code != tc.code || (tc.reason != "" && d.Reason != tc.reason) || d.Protocol != "a2a" {
				t.Fatalf("decision %+v, want allow %v code %q reason %q", d, tc.allow, tc.code, tc.reason)
			}
		})
	}
	if reads != 2 {
		t.Errorf("the upstream was asked %d times, want 2 (fresh once, gone once)", reads)
	}
	if o, err := a2aOwners(e, context.Background(), []string{"open", "unknown"}); err != nil || o[0] != "alice" || o[1] != "" {
		t.Errorf("owners = %q, %v", o, err)
	}
}

// TestSharedA2A: replicas on one store share A2A owners and states; with
// the store down, what needs it fails closed, and what a handle refuses is
// refused without it.
func TestSharedA2A(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 3, store)
	al := authn.Principal{ID: "alice", Method: string(authn.MethodDev)}
	seen(t, r[0], "t1", "c1", "alice", "TASK_STATE_WORKING")
	seen(t, r[1], "t2", "c2", "bob", "")
	for i, e := range r {
		if o, err := a2aOwners(e, context.Background(), []string{"t2", "unknown", "t1", ""}); err != nil || fmt.Sprint(o) != "[bob  alice ]" {
			t.Errorf("replica %d: owners %q %v", i, o, err)
		}
	}
	a2aObserved(r[0], "t1", "TASK_STATE_COMPLETED")
	reads := 0
	req := Request{Principal: al, Method: a2a.MethodMessageContinue, TaskID: "t1", Owner: true,
		Status: StatusFunc(func(context.Context) (string, error) { reads++; return "TASK_STATE_WORKING", nil })}
	for i, e := range r {
		d, err := e.Enforce(context.Background(), req)
		if err != nil || d.Allow || d.Reason != rules.ReasonTaskState {
			t.Errorf("replica %d: a message to a task another replica saw completed: %+v %v", i, d, err)
		}
	}
	if reads != 0 {
		t.Errorf("a state the store knows was read from the upstream %d times", reads)
	}

	store.Set(true)
	defer store.Set(false)
	for _, m := range []string{a2a.MethodGetTask, a2a.MethodMessageContinue, a2a.MethodCancelTask} {
		d, err := r[2].Enforce(context.Background(), Request{Principal: al, Method: m, TaskID: "t1", Owner: true})
		if !errors.Is(err, errDown) {
			t.Errorf("%s with the store down: %+v %v, want the store's error", m, d, err)
		}
	}
	if d, err := r[2].Enforce(context.Background(), Request{Principal: al, Method: a2a.MethodGetTask, TaskID: "t2",
		Refused: rules.Verdict{Code: rules.CodeTaskNotFound, Reason: rules.ReasonUnknownTask, Detail: a2a.TaskNotFound}}); err != nil || d.Allow {
		t.Errorf("another's task with the store down: %+v %v", d, err)
	}
	if _, err := a2aOwners(r[2], context.Background(), []string{"t1", "t3"}); !errors.Is(err, errDown) {
		t.Errorf("owners of an unknown task with the store down: %v, want the store's error", err)
	}
}

// TestA2ALearnPage: the states of a listed page reach the shared store in
// one write; states just synced are not written again; the store adds no
// task it does not know.
func TestA2ALearnPage(t *testing.T) {
	store := ownerstest.New()
	e := replicas(t, 1, store)[0]
	seen(t, e, "a", "", "alice", "TASK_STATE_WORKING")
	seen(t, e, "b", "", "alice", "TASK_STATE_WORKING")
	ops := store.Ops
	for _, tc := range []struct {
		name   string
		ids    []string
		states []string
		writes int
	}{
		{"states just synced", []string{"a", "b"}, []string{"TASK_STATE_WORKING", "TASK_STATE_WORKING"}, 0},
		{"a page with changes", []string{"a", "b"}, []string{"TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"}, 1},
		// Not held here: written with the rest (the store adds nothing),
		// then its owner read.
		{"a task this replica does not hold", []string{"unknown"}, []string{"TASK_STATE_WORKING"}, 2},
		{"no states", []string{"a"}, []string{""}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ops()
			a2aObservedAll(e, tc.ids, tc.states)
			if got := ops() - before; got != tc.writes {
				t.Fatalf("%d store operations, want %d", got, tc.writes)
			}
		})
	}
	for id, want := range map[string]string{"a": "TASK_STATE_COMPLETED", "b": "TASK_STATE_INPUT_REQUIRED"} {
		if s, _, _, _ := store.Claim(context.Background(), a2aTask(id).Name(), "alice", 0); s != want {
			t.Errorf("store state of %s: %q, want %q", id, s, want)
		}
	}
	if store.Has(owners.Key{Kind: owners.A2ATask, ID: "unknown"}.Name()) {
		t.Error("an unknown task was added to the store")
	}
}

// TestSharedA2AContexts: a context's owner is in the shared store, so a
// replica that never saw it tells it (an answer putting bob's task in
// alice's context is refused there too); replicas that record one id for
// different principals at once agree on the first; with the store down
// whose a context is cannot be told.
func TestSharedA2AContexts(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 3, store)
	ctx := context.Background()
	seen(t, r[0], "", "c-alice", "alice", "")
	for i, e := range r {
		if o, err := a2aContextOwner(e, ctx, "c-alice"); err != nil || o != "alice" {
			t.Errorf("replica %d: owner of alice's context %q %v", i, o, err)
		}
		if o, err := a2aContextSeen(e, ctx, "c-alice", "bob"); err != nil || o != "alice" {
			t.Errorf("replica %d: bob's answer naming alice's context: owner %q %v, want alice", i, o, err)
		}
	}
	// Two replicas that both have not seen an id record it for two
	// principals: the second is told the first's.
	if o, err := a2aTaskSeen(r[1], ctx, "t-race", "alice", "TASK_STATE_WORKING"); err != nil || o != "alice" {
		t.Fatalf("first: %q %v", o, err)
	}
	if o, err := a2aTaskSeen(r[2], ctx, "t-race", "bob", "TASK_STATE_COMPLETED"); err != nil || o != "alice" {
		t.Fatalf("second replica, bob: %q %v, want alice", o, err)
	}
	if s, o, _, _ := store.Claim(ctx, a2aTask("t-race").Name(), "bob", 0); o != "alice" || s != "TASK_STATE_WORKING" {
		t.Fatalf("store after the race: owner %q state %q, want alice's working", o, s)
	}

	store.Set(true)
	defer store.Set(false)
	if _, err := a2aContextSeen(r[1], ctx, "c-new", "bob"); !errors.Is(err, errDown) {
		t.Errorf("a new context with the store down: %v, want the store's error", err)
	}
	if _, err := a2aContextOwner(r[2], ctx, "c-unknown"); !errors.Is(err, errDown) {
		t.Errorf("owner of an unknown context with the store down: %v, want the store's error", err)
	}
}

// TestHandleOfAnothersTask: a handle for an id the shared store gives
// another (replicas raced to record it for two principals) proves nothing:
// the request is refused and the owner stays (A2A's half; MCP's is in
// proxy/mcp/tasks).
func TestHandleOfAnothersTask(t *testing.T) {
	store := ownerstest.New()
	r := replicas(t, 3, store)
	ctx := context.Background()
	bob := authn.Principal{ID: "bob", Method: string(authn.MethodDev)}
	seen(t, r[0], "a", "", "alice", "TASK_STATE_WORKING")
	for i, e := range r {
		d, err := e.Enforce(ctx, Request{Principal: bob, Method: a2a.MethodCancelTask, TaskID: "a", Owner: true})
		if err != nil || d.Allow {
			t.Errorf("replica %d: bob's handle of alice's A2A task: %+v %v, want refused", i, d, err)
		}
	}
	if o, _ := store.Owners(ctx, "", []string{a2aTask("a").Name()}); fmt.Sprint(o) != "[alice]" {
		t.Errorf("owners after bob's attempts: %q, want alice's", o)
	}
}
