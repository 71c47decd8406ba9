package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

// TaskRequest is one MCP request to decide: a task method, tools/call or
// tasks/list.
type TaskRequest struct {
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
	Status func(ctx context.Context) (TaskView, error)
	Limits mcp.Limits
	// Refused is a verdict the adapter reached from the transport (routing
	// headers that disagree with the body); when set it is the decision.
	Refused rules.Verdict
	// OwnershipUnknown is set by an adapter that cannot know who owns a
	// task (ext_authz): the caller of a task method gets the role
	// mcp.RoleOwnershipUnknown instead of none, so the policy decides
	// everything but ownership, operator rules included.
	OwnershipUnknown bool
}

// TaskView is a task as the upstream reports it now.
type TaskView struct {
	Status string
	// Updated is its lastUpdatedAt: a server passing a step (a safe point,
	// where it takes the queued steers) updates the task, whether or not
	// its status changes.
	Updated string
}

// task is what Warden keeps of one MCP task: a few dozen bytes.
type task struct {
	mu     sync.Mutex
	owner  string
	status string
	steers int // accepted since the status or the mark last changed
	// mark is the task's lastUpdatedAt when the steer count began.
	mark string
	// synced is when status was last read from or written to the shared
	// store: an observation of the same status soon after is not written
	// again (a tasks/get pays one round trip to the store, not two).
	synced time.Time
}

// syncedFor is how long a status read from the shared store is taken as
// the store's without asking again.
const syncedFor = time.Second

// tasks is the bounded table of MCP tasks, keyed by the upstream's task ID
// (and of A2A tasks and contexts, under their prefixes); evicted remembers
// the keys it evicted.
type tasks struct {
	lru     *lru.Cache[string, *task]
	evicted *forgotten
}

func newTasks(size int) (*tasks, error) {
	ts := &tasks{}
	c, err := lru.NewWithEvict[string, *task](size, func(key string, _ *task) {
		ts.evicted.add(key)
	})
	if err != nil {
		return nil, err
	}
	ts.lru, ts.evicted = c, newForgotten(size)
	return ts, nil
}

// get returns the task's entry, creating it when create is set.
func (ts *tasks) get(id string, create bool) *task {
	if t, ok := ts.lru.Get(id); ok || !create {
		return t
	}
	t := &task{}
	if prev, ok, _ := ts.lru.PeekOrAdd(id, t); ok {
		return prev
	}
	return t
}

// owner returns the owner of the entry under key, "" when unknown.
func (ts *tasks) owner(key string) string {
	t := ts.get(key, false)
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owner
}

// forgot reports whether Warden knew the entry under key and forgot it:
// with no shared store, this replica's table evicted it (among the last
// evictions it remembers) and nobody has proven it theirs since. Whose it
// was is unknown, so it is nobody's to learn from an answer.
func (e *Enforcer) forgot(key string) bool {
	return e.store == nil && e.tasks.evicted.has(key) && e.tasks.owner(key) == ""
}

// TaskCreated records a task the upstream created for owner, unless Warden
// knows another owner of it (an owner never changes: the first recorded
// stays, here and, across replicas that raced, in the shared store) or knew
// it and forgot it (forgot: it stays unknown, so no answer hands it over
// until its owner's handle proves it again). With a shared store, a write
// that fails is logged and the task stays known here: its handle still
// proves its owner on every replica, and other replicas list it once its
// owner used it through them.
func (e *Enforcer) TaskCreated(id, owner, status string) {
	if e.forgot(id) {
		e.log.Warn("the upstream named as new a task this replica evicted; it stays unknown", "task_id", id)
		return
	}
	if e.store != nil {
		o, err := e.store.Create(context.Background(), id, owner, status)
		if err != nil {
			e.log.Warn("could not record a task in the shared state", "task_id", id, "err", err)
		} else if o != owner {
			e.log.Warn("a task the upstream created for a principal is another's in the shared state; it stays the other's", "task_id", id)
			owner, status = o, ""
		}
	}
	t := e.tasks.get(id, true)
	t.mu.Lock()
	if t.owner == "" {
		t.owner = owner
	}
	if t.owner == owner {
		t.setStatus(status)
	}
	t.mu.Unlock()
}

// TaskObserved records a status the upstream reported for a task; an
// unknown task is not added (its owner is unknown). A failed write to the
// shared store is logged; the next decision on the task reads its status
// again.
func (e *Enforcer) TaskObserved(id, status string) {
	if err := e.observe(context.Background(), id, status); err != nil {
		e.log.Warn("could not record a task status in the shared state", "task_id", id, "err", err)
	}
}

func (e *Enforcer) observe(ctx context.Context, id, status string) error {
	if !mcp.KnownStatus(status) {
		return nil
	}
	return e.observeKnown(ctx, id, status)
}

// observeKnown records a known status of the task under key id, here and,
// unless this replica synced it within syncedFor, in the shared store.
func (e *Enforcer) observeKnown(ctx context.Context, id, status string) error {
	t := e.tasks.get(id, false)
	if t != nil {
		t.mu.Lock()
		fresh := e.store != nil && t.status == status && time.Since(t.synced) < syncedFor
		t.setStatus(status)
		t.mu.Unlock()
		if fresh {
			return nil
		}
	}
	if e.store == nil {
		return nil
	}
	if err := e.store.Observe(ctx, id, status); err != nil {
		return err
	}
	if t != nil {
		t.sync(status)
	}
	return nil
}

// sync notes that the shared store holds status for the task.
func (t *task) sync(status string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == status {
		t.synced = time.Now()
	}
}

// TaskOwner returns the principal that created a task, when Warden knows it:
// from this replica's table, else from the shared store. A store that cannot
// be read is logged and the task is unknown (so it is nobody's).
func (e *Enforcer) TaskOwner(id string) (string, bool) {
	if t := e.tasks.get(id, false); t != nil {
		t.mu.Lock()
		o := t.owner
		t.mu.Unlock()
		if o != "" || e.store == nil {
			return o, o != ""
		}
	}
	if e.store == nil {
		return "", false
	}
	o, err := e.TaskOwners(context.Background(), []string{id})
	if err != nil {
		e.log.Warn("could not read a task owner from the shared state", "task_id", id, "err", err)
		return "", false
	}
	return o[0], o[0] != ""
}

// TaskOwners returns the owner of each task, "" when unknown: what this
// replica knows, the rest from the shared store in one round trip. An error
// means the store could not be read: the caller cannot tell whose the tasks
// are.
func (e *Enforcer) TaskOwners(ctx context.Context, ids []string) ([]string, error) {
	out := make([]string, len(ids))
	var miss []int
	for i, id := range ids {
		if t := e.tasks.get(id, false); t != nil {
			t.mu.Lock()
			out[i] = t.owner
			t.mu.Unlock()
		}
		if out[i] == "" && id != "" {
			miss = append(miss, i)
		}
	}
	if e.store == nil || len(miss) == 0 {
		return out, nil
	}
	ask := make([]string, len(miss))
	for j, i := range miss {
		ask[j] = ids[i]
	}
	got, err := e.store.Owners(ctx, ask)
	if err != nil {
		return nil, err
	}
	for j, i := range miss {
		if o := got[j]; o != "" {
			out[i] = o
			t := e.tasks.get(ids[i], true) // owners never change: cached here
			t.mu.Lock()
			t.owner = o
			t.mu.Unlock()
		}
	}
	return out, nil
}

// setStatus changes the status; a change means the task passed a safe point,
// so the steer messages queued before it count as delivered.
func (t *task) setStatus(s string) {
	if s == "" || s == t.status {
		return
	}
	t.status = s
	t.steers = 0
}

// EnforceTask decides one MCP request: the rules (taskSupport, steer bounds),
// then the policy on {principal, method, roles, task status}. An error means
// Warden could not decide (the task's status could not be read); the adapter
// must refuse the request.
func (e *Enforcer) EnforceTask(ctx context.Context, req TaskRequest) (Decision, error) {
	return observed(e, ctx, req, (*Enforcer).enforceTask)
}

func (e *Enforcer) enforceTask(ctx context.Context, req TaskRequest) (Decision, error) {
	snap := e.snap.Load()
	c := req.Call
	d := e.newDecision("mcp")
	d.Principal, d.Via, d.Type, d.Mode, d.SessionID = req.Principal.ID, req.Principal.Method, c.Method, "mcp", req.TaskID

	if !req.Refused.OK() {
		return e.finish(snap, d, req.Refused), nil
	}
	var t *task
	var roles []string
	status, steers := "", 0
	owner := false
	if mcp.TaskMethod(c.Method) && req.Owner {
		var err error
		t, status, owner, err = e.own(ctx, req.TaskID, req.TaskID, req.Principal.ID)
		if err != nil {
			return Decision{}, err
		}
		if !owner {
			t, status = nil, "" // no steer place reserved for another's task
		}
	}
	mark := ""
	if owner {
		roles = []string{"owner"}
		t.mu.Lock()
		steers = t.steers
		t.mu.Unlock()
		if mcp.NeedsStatus(c.Method) && req.Status != nil && !mcp.Terminal(status) {
			var err error
			if status, mark, err = e.current(ctx, req); err != nil {
				return Decision{}, err
			}
		}
	}
	if mcp.TaskMethod(c.Method) && !req.Owner && req.OwnershipUnknown {
		roles = []string{mcp.RoleOwnershipUnknown}
	}
	d.Roles = roles

	// A steer reserves its place in the task's queue now, under the task's
	// lock (in the shared store: atomically there, so the bound holds across
	// replicas), so concurrent steers cannot overshoot the bound; the
	// reservation is given back when the decision or the upstream refuses
	// the steer.
	reserved := false
	if c.Method == mcp.MethodSteer && t != nil {
		if e.store != nil {
			ok, n, err := e.store.Steer(ctx, req.TaskID, req.Limits.MaxSteerQueue, mark)
			if err != nil {
				return Decision{}, fmt.Errorf("reserve a steer of task %s: %w", req.TaskID, err)
			}
			reserved, steers = ok, n
		} else {
			t.mu.Lock()
			if mark != "" && mark != t.mark {
				t.mark, t.steers = mark, 0 // the server passed a step: the queue was taken
			}
			steers = t.steers
			if req.Limits.MaxSteerQueue <= 0 || steers < req.Limits.MaxSteerQueue {
				t.steers++
				reserved = true
			}
			t.mu.Unlock()
		}
	}
	undo := func() {
		if e.store != nil {
			// Not the request's context: the upstream's refusal may come
			// after the client left.
			if err := e.store.Unsteer(context.Background(), req.TaskID); err != nil {
				e.log.Warn("could not give back a steer place in the shared state", "task_id", req.TaskID, "err", err)
			}
			return
		}
		t.mu.Lock()
		if t.steers > 0 {
			t.steers--
		}
		t.mu.Unlock()
	}

	verdict := mcp.Check(mcp.Request{Call: c, Support: req.Support, Steers: steers, Limits: req.Limits})
	if verdict.OK() {
		in := policies.Input{
			Protocol:  "mcp",
			Principal: policies.Principal{ID: req.Principal.ID, Method: req.Principal.Method, Scopes: claims(req.Principal)},
			Message:   policies.Message{Type: c.Method, Sender: req.Principal.ID, SessionID: req.TaskID},
			Session:   policies.Session{State: status},
			Roles:     roles,
		}
		if e.record {
			rec := in
			d.Recorded = &Recorded{Policy: &rec}
		}
		denials, err := snap.engine.Evaluate(ctx, &in)
		if err != nil {
			if reserved {
				undo()
			}
			return Decision{}, err
		}
		if len(denials) > 0 {
			verdict = denials[0]
		}
	}
	if verdict.Reason == rules.ReasonNotOwner && !e.ownedByAnother(req) {
		// The same answer on the wire (Task not found); in the log and the
		// metrics, the honest reason: Warden does not know this task (a
		// handle that does not open for the caller, a made-up id), which is
		// not the same as knowing it is someone else's.
		verdict.Reason = rules.ReasonUnknownTask
	}
	d = e.finish(snap, d, verdict)
	if reserved {
		if d.Allow && !d.DryRun {
			d.pending = &steer{undo: undo}
		} else {
			undo()
		}
	}
	return d, nil
}

// current reads the request's task as the upstream reports it now, for a
// rule that depends on its status: a status Warden saw may be stale (a task
// completes on its own; a server passes a step without changing status), and
// only a terminal one is final. It records the status read and returns it
// ("" when the server names none: unknown, the server answers for itself)
// and the task's lastUpdatedAt. An error means the status cannot be told:
// Warden cannot decide, the request is refused.
func (e *Enforcer) current(ctx context.Context, req TaskRequest) (status, mark string, err error) {
	v, err := req.Status(ctx)
	if err != nil {
		return "", "", fmt.Errorf("read status of task %s: %w", req.TaskID, err)
	}
	if !mcp.KnownStatus(v.Status) {
		return "", v.Updated, nil
	}
	if err := e.observe(ctx, req.TaskID, v.Status); err != nil {
		return "", "", fmt.Errorf("record status of task %s: %w", req.TaskID, err)
	}
	return v.Status, v.Updated, nil
}

// own records that principal owns the entry under key of task id (the
// caller verified a handle that proves it; the entry is rebuilt when this
// replica or the store lost it) unless another owns it already, and returns
// the entry and its status, in the shared store the one every replica sees,
// which the entry caches. ok is false when the entry is another's: the
// handle was given for an id that turned out another's (replicas that
// raced to record it), and proves nothing.
func (e *Enforcer) own(ctx context.Context, key, id, principal string) (t *task, status string, ok bool, err error) {
	t = e.tasks.get(key, true)
	t.mu.Lock()
	if t.owner == "" {
		t.owner = principal
	}
	ok, status = t.owner == principal, t.status
	t.mu.Unlock()
	if !ok || e.store == nil {
		return t, status, ok, nil
	}
	s, o, err := e.store.Claim(ctx, key, principal)
	if err != nil {
		return nil, "", false, fmt.Errorf("read the shared state of task %s: %w", id, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if o != principal {
		t.owner = o
		return t, "", false, nil
	}
	t.status, t.synced = s, time.Now()
	return t, s, true, nil
}

// ownedByAnother reports whether Warden knows the request's task to belong
// to another principal.
func (e *Enforcer) ownedByAnother(req TaskRequest) bool {
	if req.TaskID == "" {
		return false
	}
	o, ok := e.TaskOwner(req.TaskID)
	return ok && o != req.Principal.ID
}

// claims returns what an MCP policy sees of the credential: a JWT's claims
// or a static token's attributes.
func claims(p authn.Principal) map[string]any {
	if s := scopes(p); s != nil {
		return s
	}
	return p.Claims
}
