// Package tenancy is A2A's decision, shared by the A2A sidecar (proxy/a2a)
// and ext_authz: whose each task and context is (the caller's roles), the
// task's state where the matrix restricts a method, then the policy. It
// decides on the core's Enforcer (proxy), which mints the decision, applies
// dry run and observes it.
package tenancy

import (
	"context"
	"fmt"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Request is one A2A request to decide.
type Request struct {
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
	Status StatusReader
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

// Decider decides A2A requests on the core's Enforcer. It holds no state of
// its own (the owner table is the Enforcer's); safe for concurrent use.
type Decider struct {
	e      *proxy.Enforcer
	owners *owners.Table
}

// New returns the A2A decider on e. It starts no goroutines.
func New(e *proxy.Enforcer) *Decider { return &Decider{e: e, owners: e.OwnerTable()} }

// Enforcer is the core Enforcer the decider decides on.
func (x *Decider) Enforcer() *proxy.Enforcer { return x.e }

// ownerRole is the roles of the owner of what a request names, one slice
// for every request: roles are read, never written (an append copies it,
// its capacity full).
var ownerRole = []string{"owner"}

// StatusReader reads a task's state from the upstream (Request.Status):
// an interface, so that the sidecar's exchange, made for the request
// anyway, is the reader, not a closure made for every request.
type StatusReader interface {
	ReadStatus(ctx context.Context) (string, error)
}

// StatusFunc is a function as a StatusReader.
type StatusFunc func(ctx context.Context) (string, error)

// ReadStatus calls f.
func (f StatusFunc) ReadStatus(ctx context.Context) (string, error) { return f(ctx) }

// Enforce decides one A2A request: the caller's roles (owner of what it
// names, or new), the task's state where the matrix restricts the method,
// then the policy. An error means Warden could not decide (the task's state
// could not be read); the adapter must refuse the request.
func (x *Decider) Enforce(ctx context.Context, req Request) (proxy.Decision, error) {
	return proxy.Observed(x.e, ctx, x, req, (*Decider).enforce)
}

func (x *Decider) enforce(ctx context.Context, req Request) (proxy.Decision, error) {
	e := x.e
	snap := e.Snapshot()
	d := e.Start(ctx, "a2a")
	d.Principal, d.Via, d.Type, d.Mode, d.SessionID = req.Principal.ID, req.Principal.Method, req.Method, "a2a", req.TaskID
	e.Learning(&d, Canon) // its answer is learned through it
	d.IDReason = req.IDReason
	if !req.Refused.OK() {
		return e.Finish(snap, d, req.Refused), nil
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
		if state, _, owner, err = x.owners.Claim(ctx, key, req.Principal.ID); err != nil {
			return proxy.Decision{}, err
		}
	}
	if owner {
		if roles == nil {
			roles = ownerRole
		} else {
			roles = append(roles, "owner")
		}
		if req.TaskID != "" {
			if state == "" && needsState(req.Method) && req.Status != nil {
				s, err := req.Status.ReadStatus(ctx)
				if err != nil {
					return proxy.Decision{}, fmt.Errorf("read the state of task %s: %w", req.TaskID, err)
				}
				if state = a2a.State(s); state != "" {
					err = x.owners.Observe(ctx, key, state)
				}
				if err != nil {
					return proxy.Decision{}, fmt.Errorf("record the state of task %s: %w", req.TaskID, err)
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
		return e.Finish(snap, d, verdict), nil
	}
	in := policies.Input{
		Protocol:  "a2a",
		Principal: policies.Principal{ID: req.Principal.ID, Method: req.Principal.Method, Scopes: proxy.Claims(req.Principal)},
		Message:   policies.Message{Type: req.Method, Sender: req.Principal.ID, SessionID: req.TaskID},
		Session:   policies.Session{State: state},
		Roles:     roles,
		A2A:       subject,
		Now:       e.Now(),
	}
	if e.RecordsInputs() {
		rec := in
		d.Recorded = &proxy.Recorded{Policy: &rec}
	}
	denials, err := snap.Engine().Evaluate(ctx, &in)
	if err != nil {
		return proxy.Decision{}, err
	}
	if len(denials) > 0 {
		verdict = denials[0]
	}
	if verdict.Reason == rules.ReasonNotOwner && !req.Owner {
		// The same answer on the wire; in the log and the metrics, what
		// Warden knew: an id that is not the caller's handle is unknown.
		verdict.Reason = rules.ReasonUnknownTask
		if d.IDReason == "" {
			d.IDReason = proxy.IDUnknown
		}
	}
	return e.Finish(snap, d, verdict), nil
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

// Canon reads an A2A task's state in its canonical spelling (a2a.State);
// other ids carry no status.
func Canon(kind owners.Kind, status string) string {
	if kind == owners.A2ATask {
		return a2a.State(status)
	}
	return ""
}

// Resumed is the decision of principal's request of type typ whose answer
// a resumed stream carries (proxy.Enforcer.Resumed), learning as A2A's.
func (x *Decider) Resumed(principal, typ string) *proxy.Decision {
	return x.e.Resumed("a2a", principal, typ, Canon)
}

// Observe is what an answer no decided request opened reports
// (proxy.Enforcer.Observe), learned as A2A's.
func (x *Decider) Observe(ctx context.Context, facts ...owners.Fact) ([]string, error) {
	return x.e.Observe(ctx, Canon, facts...)
}
