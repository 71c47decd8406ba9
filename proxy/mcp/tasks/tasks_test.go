package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/owners/ownerstest"
	"github.com/agentwarden/warden/proxy/proxytest"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
)

const (
	alice = "alice"
	bob   = "bob"
)

var taskMethods = []string{mcp.MethodGet, mcp.MethodResult, mcp.MethodCancel, mcp.MethodUpdate, mcp.MethodSteer, mcp.MethodPause, mcp.MethodResume}

// taskReq is a request from principal on task id; owner says whether the
// adapter verified the caller's handle for it.
func taskReq(method, principal, id string, owner bool) Request {
	return Request{
		Principal: authn.Principal{ID: principal, Method: string(authn.MethodDev)},
		Call:      mcp.Call{Kind: mcp.KindRequest, ID: []byte(`1`), Method: method, TaskID: "wt1.handle-of-" + id, HasTaskID: true},
		TaskID:    id,
		Owner:     owner,
	}
}

func steerReq(principal, id string, queue int) Request {
	r := taskReq(mcp.MethodSteer, principal, id, true)
	r.Call.SteerBytes = 4
	r.Limits = mcp.Limits{MaxSteerBytes: 64, MaxSteerQueue: queue}
	return r
}

func enforceTask(t *testing.T, e *Decider, r Request) proxy.Decision {
	t.Helper()
	d, err := e.Enforce(context.Background(), r)
	if err != nil {
		t.Fatalf("Enforce %s: %v", r.Call.Method, err)
	}
	if d.ID == "" {
		t.Fatal("decision without an id")
	}
	return d
}

// fakeStatus is a Status func that counts its calls.
type fakeStatus struct {
	mu      sync.Mutex
	status  string
	updated string // lastUpdatedAt
	err     error
	calls   int
}

func (f *fakeStatus) read(context.Context) (View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return View{Status: f.status, Updated: f.updated}, f.err
}

func (f *fakeStatus) set(status, updated string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.updated = status, updated
}

func (f *fakeStatus) n() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

func TestEnforceTaskOwnership(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "t-alice", alice, "") // no status known: only ownership decides
	var refusals []proxy.Decision
	for _, m := range taskMethods {
		t.Run(m+" by the owner", func(t *testing.T) {
			d := enforceTask(t, e, taskReq(m, alice, "t-alice", true))
			defer d.Settle(true)
			if !d.Allow || d.DryRun || d.Reason != rules.ReasonAllowed {
				t.Fatalf("refused: %+v", d)
			}
			if d.Mode != "mcp" || d.Type != m || d.Principal != alice || d.SessionID != "t-alice" {
				t.Errorf("decision fields: %+v", d)
			}
			if len(d.Roles) != 1 || d.Roles[0] != "owner" {
				t.Errorf("roles %v", d.Roles)
			}
		})
		// The same answer on the wire; the reason says what Warden knows:
		// another's task, or one it cannot place (no proof, unknown id).
		for _, tc := range []struct {
			name, principal, id string
			reason              rules.Reason
		}{
			{"another principal", bob, "t-alice", rules.ReasonNotOwner},
			{"the creator without a handle", alice, "t-alice", rules.ReasonUnknownTask},
			{"an unknown task", bob, "t-nobody", rules.ReasonUnknownTask},
			{"no task id", bob, "", rules.ReasonUnknownTask},
		} {
			t.Run(m+" by "+tc.name, func(t *testing.T) {
				s := &fakeStatus{status: mcp.StatusCompleted}
				r := taskReq(m, tc.principal, tc.id, false)
				r.Status = StatusFunc(s.read)
				d := enforceTask(t, e, r)
				d.Settle(false)
				if d.Allow || d.Code != rules.CodeTaskNotFound || d.Reason != tc.reason || d.Message != "Task not found" {
					t.Fatalf("got %+v, want TASK_NOT_FOUND", d)
				}
				if len(d.Roles) != 0 {
					t.Errorf("roles %v", d.Roles)
				}
				if s.n() != 0 {
					t.Error("the status of a task that is not the caller's was read")
				}
				refusals = append(refusals, d)
			})
		}
	}
	// Every refusal looks the same on the wire (code and message), whatever
	// the method and whether the task exists: task IDs cannot be probed. Only
	// the reason, for the log and metrics, says what Warden knew.
	for _, d := range refusals[1:] {
		if d.Code != refusals[0].Code || d.Message != refusals[0].Message || d.Allow {
			t.Errorf("refusals differ: %+v vs %+v", d, refusals[0])
		}
	}
	if owner, ok := taskOwner(e, "t-alice"); !ok || owner != alice {
		t.Errorf("owner = %q, %v after refused attempts", owner, ok)
	}
}

func TestEnforceTaskListAndToolsCall(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	for _, m := range []string{mcp.MethodList, mcp.MethodToolsCall} {
		t.Run(m, func(t *testing.T) {
			r := Request{Principal: authn.Principal{ID: bob, Method: "dev"}, Call: mcp.Call{Kind: mcp.KindRequest, Method: m, Tool: "slow"}}
			d := enforceTask(t, e, r)
			d.Settle(true)
			if !d.Allow || len(d.Roles) != 0 {
				t.Fatalf("%+v", d)
			}
		})
	}
	t.Run("tools/call with a task on a forbidden tool", func(t *testing.T) {
		r := Request{Principal: authn.Principal{ID: bob, Method: "dev"}, Support: mcp.SupportForbidden,
			Call: mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall, Tool: "fast", TaskRequested: true}}
		d := enforceTask(t, e, r)
		if d.Allow || d.Code != rules.CodeMethodNotFound || d.Reason != rules.ReasonTaskSupport {
			t.Fatalf("%+v", d)
		}
	})
}

func TestEnforceTaskOwnerAfterRestart(t *testing.T) {
	// A verified handle proves ownership on its own: a fresh Enforcer (a
	// restart, another replica) learns the owner from it.
	e := newDecider(t, proxy.Config{})
	if _, ok := taskOwner(e, "t1"); ok {
		t.Fatal("a fresh enforcer knows an owner")
	}
	d := enforceTask(t, e, taskReq(mcp.MethodGet, alice, "t1", true))
	d.Settle(true)
	if !d.Allow {
		t.Fatalf("%+v", d)
	}
	if owner, ok := taskOwner(e, "t1"); !ok || owner != alice {
		t.Fatalf("owner = %q, %v", owner, ok)
	}
}

func TestLearnStatusOfUnknownTask(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskObserved(e, "unknown", mcp.StatusWorking)
	if _, ok := taskOwner(e, "unknown"); ok {
		t.Fatal("a status learned added a task with no owner")
	}
	if _, _, _, ok := e.owners.Peek(owners.Key{ID: "unknown"}); ok {
		t.Fatal("a status learned added an entry")
	}
	taskCreated(e, "t1", alice, "")
	// Unknown statuses are ignored: resume (paused only) is still decided
	// without a status.
	taskObserved(e, "t1", "bogus")
	d := enforceTask(t, e, taskReq(mcp.MethodResume, alice, "t1", true))
	if !d.Allow {
		t.Fatalf("resume with no known status: %+v", d)
	}
}

func TestEnforceTaskStatuses(t *testing.T) {
	statuses := []string{mcp.StatusWorking, mcp.StatusInputRequired, mcp.StatusPaused, mcp.StatusCompleted, mcp.StatusFailed, mcp.StatusCancelled}
	allowed := map[string][]string{
		mcp.MethodGet:    statuses,
		mcp.MethodResult: statuses,
		mcp.MethodCancel: statuses,
		mcp.MethodSteer:  {mcp.StatusWorking, mcp.StatusInputRequired, mcp.StatusPaused},
		mcp.MethodPause:  {mcp.StatusWorking, mcp.StatusInputRequired},
		mcp.MethodResume: {mcp.StatusPaused},
		mcp.MethodUpdate: {mcp.StatusWorking, mcp.StatusInputRequired},
	}
	e := newDecider(t, proxy.Config{})
	n := 0
	for _, m := range taskMethods {
		for _, st := range statuses {
			want := false
			for _, a := range allowed[m] {
				want = want || a == st
			}
			for _, how := range []string{"created", "observed"} {
				t.Run(fmt.Sprintf("%s while %s (%s)", m, st, how), func(t *testing.T) {
					n++
					id := fmt.Sprintf("t%d", n)
					if how == "created" {
						taskCreated(e, id, alice, st)
					} else {
						taskCreated(e, id, alice, mcp.StatusWorking)
						taskObserved(e, id, st)
					}
					s := &fakeStatus{status: st} // the server agrees
					r := taskReq(m, alice, id, true)
					r.Status = StatusFunc(s.read)
					d := enforceTask(t, e, r)
					defer d.Settle(false)
					// A status rule is decided on the status now, read
					// unless Warden knows the task terminal (final).
					if reads := map[bool]int{true: 1}[mcp.NeedsStatus(m) && !mcp.Terminal(st)]; s.n() != reads {
						t.Errorf("status read %d times, want %d", s.n(), reads)
					}
					if d.Allow != want {
						t.Fatalf("allow = %v, want %v: %+v", d.Allow, want, d)
					}
					if !want && (d.Code != rules.CodeInvalidTaskState || d.Reason != rules.ReasonTaskState || d.Message == "") {
						t.Fatalf("refusal %+v, want INVALID_TASK_STATE", d)
					}
				})
			}
		}
	}
}

func TestEnforceTaskStatusRead(t *testing.T) {
	e := newDecider(t, proxy.Config{})

	t.Run("read once and cached", func(t *testing.T) {
		taskCreated(e, "r1", alice, "")
		s := &fakeStatus{status: mcp.StatusCompleted}
		r := taskReq(mcp.MethodResume, alice, "r1", true)
		r.Status = StatusFunc(s.read)
		d := enforceTask(t, e, r)
		if d.Allow || d.Code != rules.CodeInvalidTaskState {
			t.Fatalf("resume of a completed task: %+v", d)
		}
		if s.n() != 1 {
			t.Fatalf("Status called %d times", s.n())
		}
		r = taskReq(mcp.MethodPause, alice, "r1", true)
		r.Status = StatusFunc(s.read)
		d = enforceTask(t, e, r)
		if d.Allow || s.n() != 1 {
			t.Fatalf("second decision: %+v, %d reads", d, s.n())
		}
	})
	t.Run("answer used", func(t *testing.T) {
		s := &fakeStatus{status: mcp.StatusPaused}
		r := taskReq(mcp.MethodResume, alice, "r2", true) // a task Warden never saw
		r.Status = StatusFunc(s.read)
		d := enforceTask(t, e, r)
		if !d.Allow || s.n() != 1 {
			t.Fatalf("resume of a paused task: %+v, %d reads", d, s.n())
		}
		r = taskReq(mcp.MethodUpdate, alice, "r2", true)
		r.Status = StatusFunc(s.read)
		if d := enforceTask(t, e, r); d.Allow || d.Code != rules.CodeInvalidTaskState {
			t.Fatalf("update while paused: %+v", d)
		}
	})
	t.Run("unknown answer not cached", func(t *testing.T) {
		s := &fakeStatus{status: "submitted"}
		r := taskReq(mcp.MethodPause, alice, "r3", true)
		r.Status = StatusFunc(s.read)
		if d := enforceTask(t, e, r); !d.Allow {
			t.Fatalf("%+v", d)
		}
		if d := enforceTask(t, e, r); !d.Allow || s.n() != 2 {
			t.Fatalf("%+v, %d reads", d, s.n())
		}
	})
	t.Run("not read for methods without status rules", func(t *testing.T) {
		for _, m := range []string{mcp.MethodGet, mcp.MethodResult, mcp.MethodCancel} {
			s := &fakeStatus{status: mcp.StatusCompleted}
			r := taskReq(m, alice, "r4", true)
			r.Status = StatusFunc(s.read)
			if d := enforceTask(t, e, r); !d.Allow || s.n() != 0 {
				t.Fatalf("%s: %+v, %d reads", m, d, s.n())
			}
		}
	})
	t.Run("no Status func", func(t *testing.T) {
		if d := enforceTask(t, e, taskReq(mcp.MethodResume, alice, "r5", true)); !d.Allow {
			t.Fatalf("%+v", d)
		}
	})
	t.Run("error", func(t *testing.T) {
		boom := errors.New("upstream down")
		s := &fakeStatus{err: boom}
		r := taskReq(mcp.MethodSteer, alice, "r6", true)
		r.Status = StatusFunc(s.read)
		d, err := e.Enforce(context.Background(), r)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		if d.Allow || d.ID != "" {
			t.Fatalf("a decision with the error: %+v", d)
		}
	})
}

// TestEnforceTaskStaleStatus: a task that completed on its own, with nobody
// asking, is still working to Warden; a status rule is decided on the
// status read now (issue 24 item 5: the old code forwarded the pause and
// the steer of a completed task). A read that fails refuses.
func TestEnforceTaskStaleStatus(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	for _, m := range []string{mcp.MethodPause, mcp.MethodSteer, mcp.MethodUpdate, mcp.MethodResume} {
		t.Run(m, func(t *testing.T) {
			id := "stale-" + m
			taskCreated(e, id, alice, mcp.StatusWorking)
			s := &fakeStatus{status: mcp.StatusCompleted}
			r := steerReq(alice, id, 32)
			r.Call.Method = m
			r.Status = StatusFunc(s.read)
			if d := enforceTask(t, e, r); d.Allow || d.Code != rules.CodeInvalidTaskState {
				t.Fatalf("%s of a task completed since Warden saw it working: %+v", m, d)
			}
			// Known terminal now: final, decided without asking again.
			if d := enforceTask(t, e, r); d.Allow || s.n() != 1 {
				t.Fatalf("again: %+v, %d reads, want 1", d, s.n())
			}
		})
	}
	t.Run("read fails", func(t *testing.T) {
		taskCreated(e, "stale-down", alice, mcp.StatusWorking)
		r := taskReq(mcp.MethodPause, alice, "stale-down", true)
		r.Status = StatusFunc((&fakeStatus{err: errors.New("upstream down")}).read)
		if d, err := e.Enforce(context.Background(), r); err == nil {
			t.Fatalf("decided on a status that could not be read: %+v", d)
		}
	})
}

// TestEnforceTaskSteerSafePoints: the server takes the queued steers at its
// steps without changing the task's status, and says so in lastUpdatedAt;
// the bound counts the steers since the last update it reports (issue 24
// item 8: the old code counted from the last status change, so a working
// task could be steered MaxSteerQueue times in its life).
func TestEnforceTaskSteerSafePoints(t *testing.T) {
	for _, store := range []proxy.TaskStore{nil, ownerstest.New()} {
		t.Run(fmt.Sprintf("store %v", store != nil), func(t *testing.T) {
			e := replicas(t, 1, store)[0]
			taskCreated(e, "long", alice, mcp.StatusWorking)
			s := &fakeStatus{status: mcp.StatusWorking, updated: "2026-11-27T10:00:00.000Z"}
			steer := func() proxy.Decision {
				r := steerReq(alice, "long", 2)
				r.Status = StatusFunc(s.read)
				d := enforceTask(t, e, r)
				d.Settle(true)
				return d
			}
			for i := range 40 {
				if i%2 == 0 {
					s.set(mcp.StatusWorking, fmt.Sprintf("2026-11-27T10:00:%02d.000Z", i/2+1)) // a step passed
				}
				if d := steer(); !d.Allow {
					t.Fatalf("steer %d, two between steps: %+v", i, d)
				}
			}
			if d := steer(); d.Allow || d.Reason != rules.ReasonSteerQueueFull {
				t.Fatalf("a third steer with no step between: %+v", d)
			}
		})
	}
}

func TestEnforceTaskRefused(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "t1", alice, mcp.StatusWorking)
	s := &fakeStatus{status: mcp.StatusWorking}
	r := taskReq(mcp.MethodSteer, alice, "t1", true)
	r.Status = StatusFunc(s.read)
	r.Refused = rules.Verdict{Code: rules.CodeHeaderMismatch, Reason: rules.ReasonHeaderMismatch, Detail: "Mcp-Name header does not match params.taskId"}
	d := enforceTask(t, e, r)
	d.Settle(true)
	if d.Allow || d.Code != rules.CodeHeaderMismatch || d.Reason != rules.ReasonHeaderMismatch || d.Message != r.Refused.Detail {
		t.Fatalf("%+v", d)
	}
	if d.Type != mcp.MethodSteer || d.Principal != alice || d.Mode != "mcp" {
		t.Errorf("decision fields: %+v", d)
	}
	if s.n() != 0 {
		t.Error("status read for a refused request")
	}
	if n := steersOf(e, "t1"); n != 0 {
		t.Errorf("a refused steer reserved a slot: %d", n)
	}
}

func TestEnforceTaskSteerBound(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "s1", alice, mcp.StatusWorking)
	steer := func() proxy.Decision { return enforceTask(t, e, steerReq(alice, "s1", 2)) }
	full := func(t *testing.T, d proxy.Decision) {
		t.Helper()
		d.Settle(true)
		if d.Allow || d.Code != rules.CodeInvalidParams || d.Reason != rules.ReasonSteerQueueFull {
			t.Fatalf("got %+v, want steer_queue_full", d)
		}
	}
	allowed := func(t *testing.T, d proxy.Decision) {
		t.Helper()
		if !d.Allow {
			t.Fatalf("refused: %+v", d)
		}
	}

	d1 := steer()
	allowed(t, d1)
	d1.Settle(true)
	d2 := steer()
	allowed(t, d2) // not settled yet: its reservation counts already
	full(t, steer())

	// The upstream refuses the second steer: its slot is given back, once.
	d2.Settle(false)
	d2.Settle(false)
	d3 := steer()
	allowed(t, d3)
	d3.Settle(true)
	d3.Settle(false) // a second Settle changes nothing
	full(t, steer())

	// Another status, or the same one again, or an unknown one.
	taskObserved(e, "s1", mcp.StatusWorking)
	full(t, steer())
	taskObserved(e, "s1", "bogus")
	full(t, steer())
	taskObserved(e, "s1", mcp.StatusInputRequired) // a safe point: the queue was delivered
	for range 2 {
		d := steer()
		allowed(t, d)
		d.Settle(true)
	}
	full(t, steer())
	taskCreated(e, "s1", alice, mcp.StatusPaused)
	d := steer()
	allowed(t, d)
	d.Settle(true)

	// The bound is per task.
	taskCreated(e, "s2", alice, mcp.StatusWorking)
	d = enforceTask(t, e, steerReq(alice, "s2", 2))
	allowed(t, d)

	// A give-back after the status changed does not go below zero.
	taskCreated(e, "s3", alice, mcp.StatusWorking)
	d = enforceTask(t, e, steerReq(alice, "s3", 1))
	allowed(t, d)
	taskObserved(e, "s3", mcp.StatusPaused)
	d.Settle(false)
	if n := steersOf(e, "s3"); n != 0 {
		t.Fatalf("steers = %d", n)
	}
}

// TestEnforceTaskSteerUnknown: a steer whose answer is unknown (the
// caller hung up, the answer was lost: Unknown) keeps its place, and a
// later Settle does not give it back; the server may have queued it.
// Before, Unknown gave it back like a refusal (the next steer allowed).
func TestEnforceTaskSteerUnknown(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "s1", alice, mcp.StatusWorking)
	d := enforceTask(t, e, steerReq(alice, "s1", 1))
	if !d.Allow {
		t.Fatalf("refused: %+v", d)
	}
	if !d.Unknown() {
		t.Fatal("the steer held nothing")
	}
	d.Settle(false)
	if n := steersOf(e, "s1"); n != 1 {
		t.Fatalf("steers = %d, want the unanswered one counted", n)
	}
	if d := enforceTask(t, e, steerReq(alice, "s1", 1)); d.Allow || d.Reason != rules.ReasonSteerQueueFull {
		t.Fatalf("got %+v, want steer_queue_full", d)
	}
}

func TestEnforceTaskSteerTooLarge(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "s1", alice, mcp.StatusWorking)
	r := steerReq(alice, "s1", 2)
	r.Call.SteerBytes = 65
	d := enforceTask(t, e, r)
	if d.Allow || d.Code != rules.CodeInvalidParams || d.Reason != rules.ReasonSteerTooLarge {
		t.Fatalf("%+v", d)
	}
	if n := steersOf(e, "s1"); n != 0 {
		t.Fatalf("steers = %d", n)
	}
}

func TestEnforceTaskOtherMethodsReserveNothing(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "t1", alice, mcp.StatusWorking)
	for _, m := range []string{mcp.MethodGet, mcp.MethodUpdate, mcp.MethodPause, mcp.MethodCancel} {
		r := taskReq(m, alice, "t1", true)
		r.Limits = mcp.Limits{MaxSteerQueue: 1}
		d := enforceTask(t, e, r)
		d.Settle(false)
		if !d.Allow {
			t.Fatalf("%s: %+v", m, d)
		}
	}
	d := enforceTask(t, e, steerReq(alice, "t1", 1))
	if !d.Allow {
		t.Fatalf("%+v", d)
	}
}

// TestEnforceTaskSteerBoundConcurrent runs two steers for one task whose
// status Warden does not know yet, with a bound of one: the first reads the
// status from the upstream and, while it waits, the second is decided and
// allowed. The bound must still hold when the first one's answer comes.
func TestEnforceTaskSteerBoundConcurrent(t *testing.T) {
	e := newDecider(t, proxy.Config{})
	taskCreated(e, "c1", alice, "") // owner known, status not yet
	reading, release := make(chan struct{}), make(chan struct{})
	first := steerReq(alice, "c1", 1)
	first.Status = StatusFunc(func(context.Context) (View, error) {
		close(reading)
		<-release
		return View{Status: mcp.StatusWorking}, nil
	})
	type result struct {
		d   proxy.Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := e.Enforce(context.Background(), first)
		done <- result{d, err}
	}()
	<-reading
	second := steerReq(alice, "c1", 1)
	second.Status = StatusFunc(func(context.Context) (View, error) { return View{Status: mcp.StatusWorking}, nil })
	d2 := enforceTask(t, e, second)
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.d.Settle(true)
	defer d2.Settle(true)
	if r.d.Allow && d2.Allow {
		t.Errorf("both steers allowed with MaxSteerQueue 1 (steers now %d)", steersOf(e, "c1"))
	}
}

func TestEnforceTaskDryRun(t *testing.T) {
	e := newDecider(t, proxy.Config{DryRun: true})
	taskCreated(e, "t1", alice, mcp.StatusCompleted)
	tests := []struct {
		name string
		req  Request
		code rules.Code
	}{
		{"not owner", taskReq(mcp.MethodCancel, bob, "t1", false), rules.CodeTaskNotFound},
		{"status", taskReq(mcp.MethodResume, alice, "t1", true), rules.CodeInvalidTaskState},
		{"steer on a completed task", steerReq(alice, "t1", 1), rules.CodeInvalidTaskState},
		{"header mismatch", func() Request {
			r := taskReq(mcp.MethodGet, alice, "t1", true)
			r.Refused = rules.Verdict{Code: rules.CodeHeaderMismatch, Reason: rules.ReasonHeaderMismatch}
			return r
		}(), rules.CodeHeaderMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := enforceTask(t, e, tc.req)
			defer d.Settle(false)
			if !d.Allow || !d.DryRun || d.Code != tc.code {
				t.Fatalf("%+v", d)
			}
		})
	}
	// A dry-run allowance reserves no steer.
	if n := steersOf(e, "t1"); n != 0 {
		t.Fatalf("steers = %d", n)
	}
	// What is allowed anyway is not marked.
	d := enforceTask(t, e, taskReq(mcp.MethodGet, alice, "t1", true))
	if !d.Allow || d.DryRun || d.Code != "" {
		t.Fatalf("%+v", d)
	}
}

// countObserver is a fake Observer.
type countObserver = proxytest.Decisions[proxy.Decision]

func TestEnforceTaskObserved(t *testing.T) {
	o := &countObserver{}
	e := newDecider(t, proxy.Config{}, func(o2 *proxy.Options) { o2.Observer = o })
	d := enforceTask(t, e, taskReq(mcp.MethodGet, bob, "t1", false))
	r := taskReq(mcp.MethodPause, alice, "t2", true)
	r.Status = StatusFunc((&fakeStatus{err: errors.New("down")}).read)
	if _, err := e.Enforce(context.Background(), r); err == nil {
		t.Fatal("no error")
	}
	if ds := o.All(); len(ds) != 1 || ds[0].ID != d.ID || ds[0].Code != rules.CodeTaskNotFound {
		t.Fatalf("observed %+v", ds)
	}
}

func TestEnforceTaskConcurrent(t *testing.T) {
	// Decisions on many tasks, from many goroutines, with statuses changing
	// underneath: for the race detector.
	e := newDecider(t, proxy.Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := fmt.Sprintf("t%d", i%5)
				switch i % 4 {
				case 0:
					taskCreated(e, id, alice, mcp.StatusWorking)
				case 1:
					taskObserved(e, id, mcp.StatusInputRequired)
				default:
					d, err := e.Enforce(context.Background(), steerReq(alice, id, 3))
					if err != nil {
						t.Error(err)
						return
					}
					d.Settle(g%2 == 0)
					_, _ = taskOwner(e, id)
				}
			}
		}()
	}
	wg.Wait()
}
