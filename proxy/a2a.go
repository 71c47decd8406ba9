package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
)

// A2ARequest is one A2A request to decide.
type A2ARequest struct {
	// Principal is the caller, authenticated by the adapter.
	Principal authn.Principal
	// Method is the JSON-RPC method; a message naming a task or context is
	// decided as a2a.MethodMessageContinue.
	Method string
	// TaskID is the upstream id of the task the request names ("" none).
	TaskID string
	// Owner is set when every task and context the request names is the
	// caller's (each handle verified for this principal); New when a message
	// names none.
	Owner, New bool
	// Status reads the task's state from the upstream when Warden does not
	// know it; nil when it cannot be read.
	Status func(ctx context.Context) (string, error)
	// Refused is a verdict the adapter reached from the request alone (a
	// webhook URL, an id that is not the caller's); when set it is the
	// decision.
	Refused rules.Verdict
	// OwnershipUnknown is set by an adapter that cannot know who owns a task
	// (ext_authz, which never sees the answers that create them): the
	// caller gets the role a2a.RoleOwnershipUnknown, so the policy decides
	// everything but ownership, operator rules included.
	OwnershipUnknown bool
}

// A2A tasks and contexts share the task table with MCP's, under keys of
// their own; with a shared store, their entries (a task's owner and state,
// a context's owner) are there under the same keys, so every replica tells
// whose an id an answer names.
const (
	a2aTaskKey    = "a2a:t:"
	a2aContextKey = "a2a:c:"
)

// A2ATaskSeen records a task the upstream answered about as owner's, the
// principal whose message created it, unless another owns it already, with
// its state when the answer gave one; it returns its owner afterwards. With
// a shared store the entry is written there, set if absent (of replicas
// that raced, the first owner stays and each is told it), unless this
// replica synced the same owner and state with it within syncedFor. With
// no shared store, an id this replica's table evicted (among the last it
// remembers, see forgotten) is nobody's: "" is returned and nothing
// recorded. An error means the store could not be written: whose the task
// is cannot be told.
func (e *Enforcer) A2ATaskSeen(ctx context.Context, taskID, owner, state string) (string, error) {
	return e.a2aSeen(ctx, a2aTaskKey, taskID, owner, a2a.State(state), false)
}

// A2AContextSeen is A2ATaskSeen for a context: one round trip to the shared
// store for a context this replica has not recorded.
func (e *Enforcer) A2AContextSeen(ctx context.Context, contextID, owner string) (string, error) {
	return e.a2aSeen(ctx, a2aContextKey, contextID, owner, "", false)
}

// A2AContextRecalled is A2AContextSeen for the context of a task owner
// owned already, which the adapter checked when the task was made: a
// context this replica evicted is owner's again.
func (e *Enforcer) A2AContextRecalled(ctx context.Context, contextID, owner string) (string, error) {
	return e.a2aSeen(ctx, a2aContextKey, contextID, owner, "", true)
}

func (e *Enforcer) a2aSeen(ctx context.Context, prefix, id, owner, state string, recall bool) (string, error) {
	if !recall && e.forgot(prefix+id) {
		// Known once, then evicted: whose it was is forgotten, so it is
		// nobody's to hand over (until its owner's handle proves it again).
		return "", nil
	}
	t := e.tasks.get(prefix+id, true)
	t.mu.Lock()
	if t.owner != "" && t.owner != owner {
		o := t.owner
		t.mu.Unlock()
		return o, nil
	}
	if e.store == nil {
		t.owner = owner
		t.setStatus(state)
		t.mu.Unlock()
		return owner, nil
	}
	fresh := t.owner == owner && (state == "" || state == t.status) && time.Since(t.synced) < syncedFor
	t.mu.Unlock()
	if fresh {
		return owner, nil
	}
	o, err := e.store.Create(ctx, prefix+id, owner, state)
	if err != nil {
		return "", fmt.Errorf("record the owner of %s%s: %w", prefix, id, err)
	}
	t.mu.Lock()
	t.owner = o // the store's: the first recorded
	if o == owner {
		t.setStatus(state)
		t.synced = time.Now()
	}
	t.mu.Unlock()
	return o, nil
}

// A2AContextOwner returns the principal an A2A context belongs to, "" when
// unknown: as this replica knows it, else from the shared store in one
// round trip. An error means the store could not be read.
func (e *Enforcer) A2AContextOwner(ctx context.Context, contextID string) (string, error) {
	if contextID == "" {
		return "", nil
	}
	o, err := e.TaskOwners(ctx, []string{a2aContextKey + contextID})
	if err != nil {
		return "", err
	}
	return o[0], nil
}

// A2AObserved records a task state the upstream reported; an unknown task
// is not added (its owner is unknown). A failed write to the shared store is
// logged; the next decision on the task reads its state again.
func (e *Enforcer) A2AObserved(taskID, state string) {
	if err := e.a2aObserve(context.Background(), taskID, a2a.State(state)); err != nil {
		e.log.Warn("could not record an A2A task state in the shared state", "task_id", taskID, "err", err)
	}
}

func (e *Enforcer) a2aObserve(ctx context.Context, taskID, state string) error {
	if state == "" {
		return nil
	}
	return e.observeKnown(ctx, a2aTaskKey+taskID, state)
}

// A2AObservedAll is A2AObserved for the tasks of a list (states[i] of
// taskIDs[i]): the shared store is written once for all of them, leaving
// out what this replica synced within syncedFor. A failed write is logged.
func (e *Enforcer) A2AObservedAll(taskIDs, states []string) {
	var keys, changed []string
	var entries []*task
	for i, id := range taskIDs {
		s := a2a.State(states[i])
		if s == "" {
			continue
		}
		t := e.tasks.get(a2aTaskKey+id, false)
		if t == nil {
			continue
		}
		t.mu.Lock()
		fresh := t.status == s && time.Since(t.synced) < syncedFor
		t.setStatus(s)
		t.mu.Unlock()
		if !fresh {
			keys, changed, entries = append(keys, a2aTaskKey+id), append(changed, s), append(entries, t)
		}
	}
	if e.store == nil || len(keys) == 0 {
		return
	}
	if err := e.store.ObserveAll(context.Background(), keys, changed); err != nil {
		e.log.Warn("could not record A2A task states in the shared state", "tasks", len(keys), "err", err)
		return
	}
	for i, t := range entries {
		t.sync(changed[i])
	}
}

// A2AOwners returns the principal each A2A task belongs to, "" when
// unknown: what this replica knows, the rest from the shared store in one
// round trip. An error means the store could not be read: the caller cannot
// tell whose the tasks are.
func (e *Enforcer) A2AOwners(ctx context.Context, taskIDs []string) ([]string, error) {
	keys := make([]string, len(taskIDs))
	for i, id := range taskIDs {
		if id != "" {
			keys[i] = a2aTaskKey + id
		}
	}
	return e.TaskOwners(ctx, keys)
}

// EnforceA2A decides one A2A request: the caller's roles (owner of what it
// names, or new), the task's state where the matrix restricts the method,
// then the policy. An error means Warden could not decide (the task's state
// could not be read); the adapter must refuse the request.
func (e *Enforcer) EnforceA2A(ctx context.Context, req A2ARequest) (Decision, error) {
	return observed(e, ctx, req, (*Enforcer).enforceA2A)
}

func (e *Enforcer) enforceA2A(ctx context.Context, req A2ARequest) (Decision, error) {
	snap := e.snap.Load()
	d := e.newDecision("a2a")
	d.Principal, d.Via, d.Type, d.Mode, d.SessionID = req.Principal.ID, req.Principal.Method, req.Method, "a2a", req.TaskID
	if !req.Refused.OK() {
		return e.finish(snap, d, req.Refused), nil
	}
	var roles []string
	state := ""
	if req.New {
		roles = append(roles, "new")
	}
	owner := req.Owner
	if owner && req.TaskID != "" {
		var err error
		if _, state, owner, err = e.own(ctx, a2aTaskKey+req.TaskID, req.TaskID, req.Principal.ID); err != nil {
			return Decision{}, err
		}
	}
	if owner {
		roles = append(roles, "owner")
		if req.TaskID != "" {
			if state == "" && needsState(req.Method) && req.Status != nil {
				s, err := req.Status(ctx)
				if err != nil {
					return Decision{}, fmt.Errorf("read the state of task %s: %w", req.TaskID, err)
				}
				state = a2a.State(s)
				if err := e.a2aObserve(ctx, req.TaskID, state); err != nil {
					return Decision{}, fmt.Errorf("record the state of task %s: %w", req.TaskID, err)
				}
			}
		}
	}
	if req.OwnershipUnknown && !req.New {
		roles = append(roles, a2a.RoleOwnershipUnknown)
	}
	d.Roles = roles
	in := policies.Input{
		Protocol:  "a2a",
		Principal: policies.Principal{ID: req.Principal.ID, Method: req.Principal.Method, Scopes: claims(req.Principal)},
		Message:   policies.Message{Type: req.Method, Sender: req.Principal.ID, SessionID: req.TaskID},
		Session:   policies.Session{State: state},
		Roles:     roles,
	}
	if e.record {
		rec := in
		d.Recorded = &Recorded{Policy: &rec}
	}
	var verdict rules.Verdict
	denials, err := snap.engine.Evaluate(ctx, &in)
	if err != nil {
		return Decision{}, err
	}
	if len(denials) > 0 {
		verdict = denials[0]
	}
	if verdict.Reason == rules.ReasonNotOwner && !req.Owner {
		// The same answer on the wire; in the log and the metrics, what
		// Warden knew: an id that is not the caller's handle is unknown.
		verdict.Reason = rules.ReasonUnknownTask
	}
	return e.finish(snap, d, verdict), nil
}

// needsState reports whether the matrix restricts method to task states.
func needsState(method string) bool {
	return method == a2a.MethodMessageContinue || method == a2a.MethodSubscribe
}
