// Package tasks is MCP's decision, shared by the MCP sidecar (proxy/mcp)
// and ext_authz: whose the task a request names is, its status where a rule
// depends on it, the steer bound, then the policy. It decides on the core's
// Enforcer (proxy), which mints the decision, applies dry run and observes
// it.
package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

// Request is one MCP request to decide: a task method, tools/call or
// tasks/list.
type Request struct {
	// IDReason is why an id the request named is not one of the caller's
	// handles (handle.Cause), for the operator's log line and record.
	IDReason string
	// Principal is the caller, authenticated by the adapter (an HTTP request
	// is authenticated before its body is read).
	Principal authn.Principal
	Call      mcp.Call
	// TaskID is the upstream's task ID; Owner is set when the caller proved
	// the task is theirs (its handle verified for this principal).
	TaskID string
	Owner  bool
	// Support is the tool's execution.taskSupport for tools/call, "" unknown.
	Support string
	// Status reads the task as the upstream reports it now (Warden's own
	// tasks/get); nil when it cannot be read. A status-dependent rule is
	// decided on what it returns unless Warden knows the task terminal.
	Status StatusReader
	Limits mcp.Limits
	// Refused is a verdict the adapter reached from the transport (routing
	// headers that disagree with the body); when set it is the decision.
	Refused rules.Verdict
	// Arguments are a tools/call's arguments as the policy reads them,
	// when not as they came: each string the tool's inputSchema says holds
	// JSON replaced by the JSON it holds (mcp.CheckTypes); nil: as they
	// came.
	Arguments json.RawMessage
	// OwnershipUnknown is set by an adapter that cannot know who owns a
	// task (ext_authz): the caller of a task method gets the role
	// mcp.RoleOwnershipUnknown instead of none, so the policy decides
	// everything but ownership, operator rules included.
	OwnershipUnknown bool
}

// View is a task as the upstream reports it now.
type View struct {
	Status string
	// Updated is its lastUpdatedAt: a server passing a step (a safe point,
	// where it takes the queued steers) updates the task, whether or not
	// its status changes.
	Updated string
}

// Decider decides MCP requests on the core's Enforcer. It holds no state of
// its own (the owner table is the Enforcer's); safe for concurrent use.
type Decider struct {
	e      *proxy.Enforcer
	owners *owners.Table
}

// New returns the MCP decider on e. It starts no goroutines.
func New(e *proxy.Enforcer) *Decider { return &Decider{e: e, owners: e.OwnerTable()} }

// Enforce decides one MCP request: the rules (taskSupport, steer bounds),
// then the policy on {principal, method, roles, task status}. An error means
// Warden could not decide (the task's status could not be read); the adapter
// must refuse the request.
func (x *Decider) Enforce(ctx context.Context, req Request) (proxy.Decision, error) {
	return proxy.Observed(x.e, ctx, x, req, (*Decider).enforce)
}

func (x *Decider) enforce(ctx context.Context, req Request) (proxy.Decision, error) {
	e := x.e
	snap := e.Snapshot()
	c := req.Call
	d := e.Start(ctx, "mcp")
	d.Principal, d.Via, d.Type, d.Mode, d.SessionID = req.Principal.ID, req.Principal.Method, c.Method, "mcp", req.TaskID
	e.Learning(&d, Canon) // its answer is learned through it
	d.IDReason = req.IDReason

	if !req.Refused.OK() {
		return e.Finish(snap, d, req.Refused), nil
	}
	t, err := x.taskOf(ctx, req)
	if err != nil {
		return proxy.Decision{}, err
	}
	d.Roles = t.roles

	// A steer reserves its place in the task's queue now (in the shared
	// store atomically, so the bound holds across replicas), so concurrent
	// steers cannot overshoot the bound; the reservation is given back when
	// the decision or the upstream refuses the steer (not when its answer
	// is unknown: steer.Forget).
	reserved := false
	if c.Method == mcp.MethodSteer && t.owner {
		if reserved, t.steers, err = x.owners.Steer(ctx, t.key, req.Limits.MaxSteerQueue, t.mark); err != nil {
			return proxy.Decision{}, err
		}
	}
	// Made for a steer reserved only: a closure over req would move the
	// whole request to the heap on every call.
	var undo func()
	if reserved {
		key, id := t.key, req.TaskID
		undo = func() { x.unsteer(key, id) }
	}

	verdict, err := x.taskVerdict(ctx, snap, &d, req, t)
	if err != nil {
		if reserved {
			undo()
		}
		return proxy.Decision{}, err
	}
	if verdict.Reason == rules.ReasonNotOwner && !x.ownedByAnother(ctx, t.key, req.Principal.ID) {
		// The same answer on the wire (Task not found); in the log and the
		// metrics, the honest reason: Warden does not know this task (a
		// handle that does not open for the caller, a made-up id), which is
		// not the same as knowing it is someone else's.
		verdict.Reason = rules.ReasonUnknownTask
		if d.IDReason == "" {
			d.IDReason = proxy.IDUnknown
		}
	}
	d = e.Finish(snap, d, verdict)
	if reserved {
		if d.Allow && !d.DryRun {
			d.Hold(&steer{undo: undo})
		} else {
			undo()
		}
	}
	return d, nil
}

// taskFacts is what Warden knows of the task a request names, for the
// caller: the caller's roles on it, its status, the steers queued on it
// and the mark of the server's last step.
type taskFacts struct {
	key    owners.Key
	roles  []string
	status string
	steers int
	owner  bool
	mark   string
}

// taskOf reads the task a request names: whether the caller owns it (a
// task method whose handle opened for the caller), and then its status,
// read from the upstream now when a status rule needs it and Warden does
// not know the task terminal.
func (x *Decider) taskOf(ctx context.Context, req Request) (taskFacts, error) {
	c := req.Call
	t := taskFacts{key: owners.Key{Kind: owners.MCPTask, ID: req.TaskID}}
	if mcp.TaskMethod(c.Method) && req.Owner {
		var err error
		if t.status, t.steers, t.owner, err = x.owners.Claim(ctx, t.key, req.Principal.ID); err != nil {
			return taskFacts{}, err
		}
	}
	if t.owner {
		t.roles = ownerRole
		if mcp.NeedsStatus(c.Method) && req.Status != nil && !mcp.Terminal(t.status) {
			var err error
			if t.status, t.mark, err = x.current(ctx, req); err != nil {
				return taskFacts{}, err
			}
		}
	}
	if mcp.TaskMethod(c.Method) && !req.Owner && req.OwnershipUnknown {
		t.roles = []string{mcp.RoleOwnershipUnknown}
	}
	return t, nil
}

// unsteer gives back a steer's place in the task's queue. Not the
// request's context: the upstream's refusal may come after the client
// left. A place not given back leaves the bound stricter, never looser.
func (x *Decider) unsteer(key owners.Key, taskID string) {
	if err := x.owners.Unsteer(context.Background(), key); err != nil {
		x.e.Logger().Warn("could not give back a steer place", "task_id", taskID, "err", err)
	}
}

// taskVerdict decides a request on the task t: the rules (taskSupport,
// steer bounds), then the policy, whose input d records when recording.
// An error means the policy could not decide.
func (x *Decider) taskVerdict(ctx context.Context, snap *proxy.Snapshot, d *proxy.Decision, req Request, t taskFacts) (rules.Verdict, error) {
	c := req.Call
	verdict := mcp.Check(mcp.Request{Call: c, Support: req.Support, Steers: t.steers, Limits: req.Limits})
	var subject *policies.MCP
	if verdict.OK() {
		subject, verdict = mcpSubject(c, req.Arguments)
	}
	if verdict.OK() {
		in := policies.Input{
			Protocol:  "mcp",
			Principal: policies.Principal{ID: req.Principal.ID, Method: req.Principal.Method, Scopes: proxy.Claims(req.Principal)},
			Message:   policies.Message{Type: c.Method, Sender: req.Principal.ID, SessionID: req.TaskID},
			Session:   policies.Session{State: t.status},
			Roles:     t.roles,
			MCP:       subject,
			Now:       x.e.Now(),
		}
		if x.e.RecordsInputs() {
			rec := in
			d.Recorded = &proxy.Recorded{Policy: &rec}
		}
		denials, err := snap.Engine().Evaluate(ctx, &in)
		if err != nil {
			return rules.Verdict{}, err
		}
		if len(denials) > 0 {
			verdict = denials[0]
		}
	}
	return verdict, nil
}

// mcpSubject is what an operator policy sees of what c names (input.mcp):
// the tool and its arguments (tools/call), the prompt and its arguments
// (prompts/get), the prompt and the argument completed (completion/complete
// on a prompt), the client's answers to the server's input requests
// (params.inputResponses, any method), the resource
// URI (resources/read, resources/subscribe, resources/unsubscribe,
// completion/complete on a resource template, with its argument). Arguments over the bounds of
// mcp.PolicyArguments, and a URI the server would read in another spelling
// (mcp.PolicyURI), refuse the request. A template URI is not a URL: servers
// find its template by the exact string, and it is given as it came. args,
// when set, are the tool's arguments as the policy reads them
// (Request.Arguments).
func mcpSubject(c mcp.Call, args json.RawMessage) (*policies.MCP, rules.Verdict) {
	responses, v := mcp.PolicyInputResponses(c.InputResponses)
	if !v.OK() {
		return &policies.MCP{}, v
	}
	if responses == nil && !names(c.Method) {
		return noSubject, rules.Verdict{}
	}
	m := &policies.MCP{InputResponses: responses}
	switch c.Method {
	case mcp.MethodToolsCall:
		m.Tool = c.Tool
	case mcp.MethodPromptsGet:
		m.Prompt = c.Tool
	case mcp.MethodResourcesRead, mcp.MethodSubscribe, mcp.MethodUnsubscribe:
		m.URI = c.URI
		return m, mcp.PolicyURI(c.URI)
	case mcp.MethodComplete:
		m.Prompt, m.URI = c.Tool, c.URI
		if c.HasArgument {
			m.Argument = &policies.CompletionArgument{Name: c.Argument.Name, Value: c.Argument.Value}
		}
		m.ContextArguments = c.ContextArguments
		return m, rules.Verdict{}
	default:
		return m, rules.Verdict{}
	}
	if args == nil || c.Method != mcp.MethodToolsCall {
		args = c.Arguments
	}
	m.Arguments, v = mcp.PolicyArguments(args)
	return m, v
}

// names reports whether requests of method name a subject mcpSubject reads
// (a tool, a prompt, a resource).
func names(method string) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodSubscribe, mcp.MethodUnsubscribe, mcp.MethodComplete:
		return true
	}
	return false
}

// noSubject is input.mcp of a request that names no subject and carries no
// input responses (a task method, tools/list): every member empty, one
// value for every such request, read, never written (as ownerRole).
var noSubject = &policies.MCP{}

// ownerRole is the roles of a task's owner, one slice for every request:
// roles are read, never written (an append copies it, its capacity full).
var ownerRole = []string{"owner"}

// StatusReader reads a task as the upstream reports it now
// (Request.Status): an interface, so that the sidecar's exchange, made for
// the request anyway, is the reader, not a closure made for every request.
type StatusReader interface {
	ReadStatus(ctx context.Context) (View, error)
}

// StatusFunc is a function as a StatusReader.
type StatusFunc func(ctx context.Context) (View, error)

// ReadStatus calls f.
func (f StatusFunc) ReadStatus(ctx context.Context) (View, error) { return f(ctx) }

// current reads the request's task as the upstream reports it now, for a
// rule that depends on its status: a status Warden saw may be stale (a task
// completes on its own; a server passes a step without changing status), and
// only a terminal one is final. It records the status read and returns it
// ("" when the server names none: unknown, the server answers for itself)
// and the task's lastUpdatedAt. An error means the status cannot be told:
// Warden cannot decide, the request is refused.
func (x *Decider) current(ctx context.Context, req Request) (status, mark string, err error) {
	v, err := req.Status.ReadStatus(ctx)
	if err != nil {
		return "", "", fmt.Errorf("read status of task %s: %w", req.TaskID, err)
	}
	if !mcp.KnownStatus(v.Status) {
		return "", v.Updated, nil
	}
	if err := x.owners.Observe(ctx, owners.Key{Kind: owners.MCPTask, ID: req.TaskID}, v.Status); err != nil {
		return "", "", fmt.Errorf("record status of task %s: %w", req.TaskID, err)
	}
	return v.Status, v.Updated, nil
}

// ownedByAnother reports whether Warden knows the entry under key to belong
// to another principal than principal (for the log's reason only: a store
// that cannot be read says nothing).
func (x *Decider) ownedByAnother(ctx context.Context, key owners.Key, principal string) bool {
	if key.ID == "" {
		return false
	}
	o, err := x.owners.Owners(ctx, principal, key)
	return err == nil && o[0] != "" && o[0] != principal
}

// steer is an MCP steer's place in its task's queue, given back when the
// upstream refuses the steer.
type steer struct {
	done atomic.Bool
	undo func()
}

func (s *steer) Settle(accepted bool) {
	if s.done.CompareAndSwap(false, true) && !accepted {
		s.undo()
	}
}

// Forget keeps the place: the steer reached the server, or may have, with
// its answer unseen (the caller hung up, the answer was lost), and the
// server may have queued it; the count restarts at the server's next step.
// Giving it back let a caller that hangs up before each answer queue past
// the bound (security.md U2).
func (s *steer) Forget() { s.done.Store(true) }

// Canon reads an MCP task's status, "" when it is not one of MCP's; other
// ids carry no status.
func Canon(kind owners.Kind, status string) string {
	if kind == owners.MCPTask && mcp.KnownStatus(status) {
		return status
	}
	return ""
}

// Resumed is the decision of principal's request of type typ whose answer
// a resumed stream carries (proxy.Enforcer.Resumed), learning as MCP's.
func (x *Decider) Resumed(principal, typ string) *proxy.Decision {
	return x.e.Resumed("mcp", principal, typ, Canon)
}

// Observe is what a message no decided request opened reports (an MCP
// standalone stream; proxy.Enforcer.Observe), learned as MCP's.
func (x *Decider) Observe(ctx context.Context, facts ...owners.Fact) ([]string, error) {
	return x.e.Observe(ctx, Canon, facts...)
}
