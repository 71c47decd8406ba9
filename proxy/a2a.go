package proxy

import (
	"context"
	"fmt"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// A2ARequest is one A2A request to decide.
type A2ARequest struct {
	// IDReason is why an id the request named is not one of the caller's
	// handles (handle.Cause), for the operator's log line and record.
	IDReason string
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
	// Content is what a message carries (a2a.Call.Content), for the
	// operator policy (input.a2a).
	Content a2a.Content
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
	d := e.newDecision(ctx, "a2a")
	d.Principal, d.Via, d.Type, d.Mode, d.SessionID = req.Principal.ID, req.Principal.Method, req.Method, "a2a", req.TaskID
	d.owners = e.owners // its answer is learned through it
	d.IDReason = req.IDReason
	if !req.Refused.OK() {
		return e.finish(snap, d, req.Refused), nil
	}
	var roles []string
	state := ""
	if req.New {
		roles = append(roles, "new")
	}
	owner := req.Owner
	key := owners.Key{Kind: owners.A2ATask, ID: req.TaskID}
	if owner && req.TaskID != "" {
		var err error
		if state, _, owner, err = e.owners.Claim(ctx, key, req.Principal.ID); err != nil {
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
				if state = a2a.State(s); state != "" {
					err = e.owners.Observe(ctx, key, state)
				}
				if err != nil {
					return Decision{}, fmt.Errorf("record the state of task %s: %w", req.TaskID, err)
				}
			}
		}
	}
	if req.OwnershipUnknown && !req.New {
		roles = append(roles, a2a.RoleOwnershipUnknown)
	}
	d.Roles = roles
	subject, verdict := a2aSubject(req.Content)
	if !verdict.OK() {
		return e.finish(snap, d, verdict), nil
	}
	in := policies.Input{
		Protocol:  "a2a",
		Principal: policies.Principal{ID: req.Principal.ID, Method: req.Principal.Method, Scopes: claims(req.Principal)},
		Message:   policies.Message{Type: req.Method, Sender: req.Principal.ID, SessionID: req.TaskID},
		Session:   policies.Session{State: state},
		Roles:     roles,
		A2A:       subject,
		Now:       e.now(),
	}
	if e.record {
		rec := in
		d.Recorded = &Recorded{Policy: &rec}
	}
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
		if d.IDReason == "" {
			d.IDReason = IDUnknown
		}
	}
	return e.finish(snap, d, verdict), nil
}

// a2aSubject is what an operator policy sees of what a message carries
// (input.a2a): its skill, part kinds and metadata. Metadata over the bounds
// of jsonrpc.PolicyValue, or with names a server could read otherwise,
// refuses the request.
func a2aSubject(c a2a.Content) (*policies.A2A, rules.Verdict) {
	s := &policies.A2A{Skill: c.Skill, Parts: c.Parts}
	var v rules.Verdict
	s.Metadata, v = jsonrpc.PolicyValue(c.Metadata, "params.message.metadata")
	return s, v
}

// needsState reports whether the matrix restricts method to task states.
func needsState(method string) bool {
	return method == a2a.MethodMessageContinue || method == a2a.MethodSubscribe
}
