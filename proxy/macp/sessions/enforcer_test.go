package sessions

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/owners/ownerstest"
	"github.com/agentwarden/warden/proxy/proxytest"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// clock is a fake clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func engine(t testing.TB) *policies.Engine      { return proxytest.Engine(t) }
func devAuth(t testing.TB) *authn.Authenticator { return proxytest.DevAuth(t) }

func newEnforcer(t testing.TB, cfg proxy.Config, rb Rebuilder) (*Decider, *clock) {
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	e, err := build(cfg, proxy.Options{Authenticator: devAuth(t), Policies: engine(t), Now: c.now}, Options{Rebuilder: rb})
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	planner = "agent://planner"
	worker  = "agent://worker"
	other   = "agent://other"
)

func sessionID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func env(sid, sender, typ, id string, payload []byte) *macpv1.Envelope {
	return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: typ, MessageId: id, SessionId: sid, Sender: sender, Payload: payload}
}

func req(e *macpv1.Envelope) Request {
	return Request{Credentials: authn.Credentials{Bearer: e.GetSender()}, Envelope: e}
}

// startTask starts a task session (planner requests, worker accepts).
func startTask(t testing.TB, e *Decider, sid string, accept bool) {
	steps := []*macpv1.Envelope{
		env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{planner, worker, other}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000,
		})),
		env(sid, planner, "TaskRequest", "req", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker})),
	}
	if accept {
		steps = append(steps, env(sid, worker, "TaskAccept", "acc", mustMarshal(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker})))
	}
	for _, s := range steps {
		d, err := e.Enforce(context.Background(), req(s))
		if err != nil || !d.Allow {
			t.Fatalf("%s: %v %+v", s.GetMessageType(), err, d)
		}
		d.Settle(true)
	}
}

func TestEnforceRefusals(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{}, nil)
	sid := sessionID(1)
	startTask(t, e, sid, true)
	update := mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
	complete := mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker})
	tests := []struct {
		name   string
		req    Request
		code   rules.Code
		reason rules.Reason
	}{
		{"no credentials", Request{Envelope: env(sid, worker, "TaskUpdate", "u1", update)}, rules.CodeUnauthenticated, rules.ReasonUnauthenticated},
		{"sender differs from token", Request{Credentials: authn.Credentials{Bearer: other}, Envelope: env(sid, worker, "TaskUpdate", "u1", update)}, rules.CodeUnauthenticated, rules.ReasonSenderMismatch},
		{"no envelope", Request{Credentials: authn.Credentials{Bearer: worker}}, rules.CodeInvalidEnvelope, rules.ReasonMalformedEnvelope},
		{"update from the requester", req(env(sid, planner, "TaskUpdate", "u2", update)), rules.CodeForbidden, rules.ReasonNotAuthorized},
		{"forged completion", req(env(sid, other, "TaskComplete", "c1", complete)), rules.CodeForbidden, rules.ReasonNotAuthorized},
		{"unknown session", req(env(sessionID(99), worker, "TaskUpdate", "u3", update)), rules.CodeSessionNotFound, rules.ReasonSessionUnknown},
		{"garbage payload", req(env(sid, worker, "TaskUpdate", "u4", []byte{0xff, 0xff, 0xff})), rules.CodeInvalidEnvelope, rules.ReasonMalformedPayload},
		{"duplicate id from another sender", req(env(sid, other, "TaskUpdate", "acc", update)), rules.CodeDuplicateMessage, rules.ReasonDuplicateForeignID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := e.Enforce(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Settle(false)
			if d.Allow || d.Code != tc.code || d.Reason != tc.reason {
				t.Fatalf("got allow=%v %s/%s (%s), want %s/%s", d.Allow, d.Code, d.Reason, d.Message, tc.code, tc.reason)
			}
			if d.ID == "" {
				t.Error("decision has no id")
			}
		})
	}
	// The worker's own update is allowed, and a retransmission of its accept
	// is a duplicate: forwarded, never re-applied.
	d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u5", update)))
	if err != nil || !d.Allow {
		t.Fatalf("honest update: %v %+v", err, d)
	}
	d.Settle(true)
	d, err = e.Enforce(context.Background(), req(env(sid, worker, "TaskAccept", "acc", mustMarshal(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker}))))
	if err != nil || !d.Allow || !d.Duplicate {
		t.Fatalf("retransmitted accept: %v %+v", err, d)
	}
	d.Settle(true)
	// Its id reused for other content is no retransmission.
	d, err = e.Enforce(context.Background(), req(env(sid, worker, "TaskAccept", "acc", nil)))
	if err != nil || d.Allow || d.Reason != rules.ReasonReusedID {
		t.Fatalf("reused id: %v %+v", err, d)
	}
	d.Settle(false)
}

// TestCommitOnlyOnAck checks that the pending state is committed only when
// the upstream accepts the message.
func TestCommitOnlyOnAck(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{}, nil)
	sid := sessionID(2)
	startTask(t, e, sid, false)
	accept := env(sid, worker, "TaskAccept", "acc", mustMarshal(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker}))
	update := env(sid, worker, "TaskUpdate", "u1", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))

	d, err := e.Enforce(context.Background(), req(accept))
	if err != nil || !d.Allow {
		t.Fatalf("accept: %v %+v", err, d)
	}
	d.Settle(false) // the upstream refused it
	d, _ = e.Enforce(context.Background(), req(update))
	d.Settle(false)
	if d.Allow {
		t.Fatal("an update was allowed although the upstream never accepted the worker's TaskAccept")
	}

	d, _ = e.Enforce(context.Background(), req(accept))
	d.Settle(true)
	d, _ = e.Enforce(context.Background(), req(update))
	d.Settle(true)
	if !d.Allow {
		t.Fatalf("update after an acknowledged accept: %+v", d)
	}
	d.Settle(true) // settling twice is harmless
}

// TestPerSessionSerialization checks that a session is locked between a
// decision and its settlement, while other sessions proceed.
func TestPerSessionSerialization(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{}, nil)
	a, b := sessionID(3), sessionID(4)
	startTask(t, e, a, true)
	startTask(t, e, b, true)
	up := func(sid, id string) *macpv1.Envelope {
		return env(sid, worker, "TaskUpdate", id, mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))
	}
	held, err := e.Enforce(context.Background(), req(up(a, "x1")))
	if err != nil || !held.Allow {
		t.Fatalf("%v %+v", err, held)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.Enforce(ctx, req(up(a, "x2"))); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second message of a held session: err = %v, want it to wait until the deadline", err)
	}
	d, err := e.Enforce(context.Background(), req(up(b, "y1")))
	if err != nil || !d.Allow {
		t.Fatalf("another session waited: %v %+v", err, d)
	}
	d.Settle(true)

	done := make(chan proxy.Decision)
	go func() {
		d, _ := e.Enforce(context.Background(), req(up(a, "x3")))
		done <- d
	}()
	select {
	case <-done:
		t.Fatal("decided while the session was held")
	case <-time.After(20 * time.Millisecond):
	}
	held.Settle(true)
	select {
	case d := <-done:
		d.Settle(true)
		if !d.Allow {
			t.Fatalf("%+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting message was never decided")
	}
}

// TestConcurrentSessions runs many sessions from many goroutines under -race.
func TestConcurrentSessions(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{}, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				sid := sessionID(1000 + g*100 + i)
				startTask(t, e, sid, true)
				for j := range 5 {
					d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", fmt.Sprint("u", j), mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
					if err != nil || !d.Allow {
						t.Errorf("%v %+v", err, d)
						return
					}
					d.Settle(true)
				}
			}
		}()
	}
	wg.Wait()
	if n := e.Sessions(); n != 160 {
		t.Fatalf("table holds %d sessions, want 160", n)
	}
}

func TestTableFull(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{Sessions: 2}, nil)
	startTask(t, e, sessionID(10), true)
	startTask(t, e, sessionID(11), true)
	start := env(sessionID(12), planner, "SessionStart", "s", mustMarshal(t, &macpv1.SessionStartPayload{
		Participants: []string{planner, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 1000,
	}))
	d, err := e.Enforce(context.Background(), req(start))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(false)
	if d.Allow || d.Code != rules.CodeResourceExhausted {
		t.Fatalf("third live session: %+v, want RESOURCE_EXHAUSTED", d)
	}
	// Cancel one: terminal sessions are evicted first.
	c, err := e.Enforce(context.Background(), Request{Credentials: authn.Credentials{Bearer: planner}, Op: macp.OpCancel, SessionID: sessionID(10)})
	if err != nil || !c.Allow {
		t.Fatalf("cancel: %v %+v", err, c)
	}
	c.Settle(true)
	d, err = e.Enforce(context.Background(), req(start))
	if err != nil || !d.Allow {
		t.Fatalf("start after a session ended: %v %+v", err, d)
	}
	d.Settle(true)
	if e.Sessions() != 2 {
		t.Fatalf("table holds %d sessions, want 2", e.Sessions())
	}
}

func TestExpiredSessionsEvictedFirst(t *testing.T) {
	e, c := newEnforcer(t, proxy.Config{Sessions: 1}, nil)
	startTask(t, e, sessionID(20), true)
	c.add(2 * time.Minute) // past the 60 s TTL
	startTask(t, e, sessionID(21), true)
}

// fakeRebuilder stands in for the upstream runtime.
type fakeRebuilder struct {
	mu    sync.Mutex
	calls int
	state map[string]*macp.Session
	err   error
	bound map[string]*macp.Governance // what each rebuild was given
}

func (f *fakeRebuilder) Rebuild(_ context.Context, id string, bound *macp.Governance) (*macp.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.bound != nil {
		f.bound[id] = bound
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.state[id], nil
}

func (f *fakeRebuilder) Exists(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state[id] != nil, f.err
}

func TestRebuild(t *testing.T) {
	rb := &fakeRebuilder{state: map[string]*macp.Session{}}
	e, _ := newEnforcer(t, proxy.Config{Sessions: 1}, rb)
	a, b := sessionID(30), sessionID(31)
	startTask(t, e, a, true)
	// Keep a copy of a's state as the "upstream" would rebuild it.
	s, err := e.Session(context.Background(), a)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	rb.state[a] = s
	startTask(t, e, b, true) // evicts a: live sessions can be rebuilt

	d, err := e.Enforce(context.Background(), req(env(a, other, "TaskComplete", "f", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker}))))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(false)
	if d.Allow || d.Code != rules.CodeForbidden || rb.calls != 1 {
		t.Fatalf("forged completion after eviction: %+v (rebuilds: %d)", d, rb.calls)
	}

	rb.err = errors.New("upstream down")
	if _, err := e.Enforce(context.Background(), req(env(b, worker, "TaskUpdate", "u", nil))); err == nil {
		t.Fatal("a session that cannot be rebuilt must be refused with an error, never guessed at")
	}
}

func TestDryRun(t *testing.T) {
	e, _ := newEnforcer(t, proxy.Config{DryRun: true}, nil)
	sid := sessionID(40)
	startTask(t, e, sid, true)
	d, err := e.Enforce(context.Background(), req(env(sid, other, "TaskComplete", "f", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1"}))))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(true)
	if !d.Allow || !d.DryRun || d.Code != rules.CodeForbidden {
		t.Fatalf("dry run: %+v", d)
	}
	// The refused completion did not change the state: the worker can still complete.
	d, _ = e.Enforce(context.Background(), req(env(sid, worker, "TaskComplete", "c", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1"}))))
	d.Settle(true)
	if !d.Allow || d.DryRun {
		t.Fatalf("honest completion: %+v", d)
	}
}

// TestKeysUnavailableFailsClosed checks that "could not decide" is an error.
func TestKeysUnavailableFailsClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodJWT}, JWT: authn.JWTConfig{
		JWKSURL: "http://" + addr + "/jwks.json", Issuer: "iss", Audience: authn.Audience{"aud"},
	}}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := build(proxy.Config{}, proxy.Options{Authenticator: a, Policies: engine(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	token := "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhIn0.c2ln"
	_, err = e.Enforce(context.Background(), Request{Credentials: authn.Credentials{Bearer: token}, Envelope: env(sessionID(50), "", "TaskUpdate", "u", nil)})
	if err == nil {
		t.Fatal("want an error when the verification keys cannot be fetched")
	}
}

// TestRebuildKeepsBinding: a session evicted from the table is rebuilt with
// the governance it was committed with, recorded apart from its entry, even
// once the policy was unregistered (or registered again with other rules):
// the runtime keeps the definition bound at SessionStart and shows only its
// id. A session whose binding was never recorded here is given none.
func TestRebuildKeepsBinding(t *testing.T) {
	rb := &fakeRebuilder{state: map[string]*macp.Session{}, bound: map[string]*macp.Governance{}}
	e, _ := newEnforcer(t, proxy.Config{Sessions: 1}, rb)
	if err := e.Policies().Register(macp.PolicyDescriptor{PolicyID: "policy.p", Mode: "*", SchemaVersion: 1,
		Rules: map[string]any{"commitment": map[string]any{"authority": "any_participant"}}}); err != nil {
		t.Fatal(err)
	}
	a, b := sessionID(40), sessionID(41)
	start := env(a, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
		Participants: []string{planner, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000, PolicyVersion: "policy.p"}))
	d, err := e.Enforce(context.Background(), req(start))
	if err != nil || !d.Allow {
		t.Fatalf("start: %v %+v", err, d)
	}
	d.Settle(true)
	s, _ := e.Session(context.Background(), a)
	rb.state[a] = s
	e.Policies().Remove("policy.p") // unregistered upstream
	startTask(t, e, b, true)        // evicts a
	d, err = e.Enforce(context.Background(), req(env(a, planner, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1"}))))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(false)
	if g := rb.bound[a]; g != s.Policy || g == nil || !g.Known() || g.ID != "policy.p" {
		t.Errorf("rebuilt with %+v, want the governance the session was committed with", g)
	}
	d, err = e.Enforce(context.Background(), req(env(b, planner, "TaskUpdate", "u", nil)))
	if err == nil {
		d.Settle(false)
	}
	if g, ok := rb.bound[b]; !ok || g != nil {
		t.Errorf("a session of policy.default was rebuilt with %+v (%v), want none", g, ok)
	}
}

// errDown is what a store that is down answers.
var errDown = ownerstest.ErrDown

func writeRego(t *testing.T, name, src string) string { return proxytest.WriteRego(t, name, src) }

// countObserver is a fake Observer.
type countObserver = proxytest.Decisions[proxy.Decision]

// build is the MACP decider with m on an Enforcer of cfg and opts.
func build(cfg proxy.Config, opts proxy.Options, m Options) (*Decider, error) {
	e, err := proxy.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return New(e, m)
}

// TestBindingShares: the governance a session was committed with, kept for
// its rebuild, is held to a share per initiator: another agent starting
// sessions without end evicts its own bindings, never another's. Before,
// the bindings were one LRU of enforcer.sessions entries: once other's
// sessions (bound to a policy of its own) had filled it, planner's evicted
// session was rebuilt on a policy Warden could not know, and every decision
// reading it (a Commitment) was refused bound_policy_unknown for good.
func TestBindingShares(t *testing.T) {
	const size = 64
	rb := &fakeRebuilder{state: map[string]*macp.Session{}, bound: map[string]*macp.Governance{}}
	e, _ := newEnforcer(t, proxy.Config{Sessions: size, SessionsPerPrincipal: size / 4}, rb)
	for _, id := range []string{"policy.p", "policy.other"} {
		if err := e.Policies().Register(macp.PolicyDescriptor{PolicyID: id, Mode: "*", SchemaVersion: 1,
			Rules: map[string]any{"commitment": map[string]any{"authority": "any_participant"}}}); err != nil {
			t.Fatal(err)
		}
	}
	started := func(sid, sender, policy string) {
		t.Helper()
		start := env(sid, sender, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{sender, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000, PolicyVersion: policy}))
		d, err := e.Enforce(context.Background(), req(start))
		if err != nil || !d.Allow {
			t.Fatalf("start %s by %s: %v %+v", sid, sender, err, d)
		}
		d.Settle(true)
		s, _ := e.Session(context.Background(), sid)
		rb.state[sid] = s
	}
	a := sessionID(500)
	started(a, planner, "policy.p")
	for i := range 2 * size {
		started(sessionID(501+i), other, "policy.other") // each start evicts a live session (rebuilt on demand)
	}
	d, err := e.Enforce(context.Background(), req(env(a, planner, "TaskRequest", "r", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1"}))))
	if err != nil {
		t.Fatal(err)
	}
	d.Settle(false)
	if g := rb.bound[a]; g == nil || !g.Known() || g.ID != "policy.p" {
		t.Errorf("after other started %d sessions, planner's session was rebuilt with %+v, want policy.p as committed", 2*size, g)
	}
}

// TestBindingUseIsTheInitiators: a session's policy binding becomes its
// initiator's most recently used only on the initiator's own use (N2's rule,
// which the owner table keeps): the start, or a rebuild for the initiator's
// message. Before, the rebuild any principal's message causes (an
// outsider's, refused all the same) made it so, so another agent naming the
// planner's oldest session after its entry was evicted kept that binding,
// and the planner, past her share, lost the binding of another session
// instead (decided bound_policy_unknown once rebuilt).
func TestBindingUseIsTheInitiators(t *testing.T) {
	for _, tc := range []struct {
		reader        string
		dropped, kept int // of the planner's sessions, by start order
	}{
		{reader: other, dropped: 0, kept: 1},
		{reader: planner, dropped: 1, kept: 0},
	} {
		t.Run(tc.reader, func(t *testing.T) {
			const size, share = 64, 16
			rb := &fakeRebuilder{state: map[string]*macp.Session{}, bound: map[string]*macp.Governance{}}
			e, _ := newEnforcer(t, proxy.Config{Sessions: size, SessionsPerPrincipal: share}, rb)
			if err := e.Policies().Register(macp.PolicyDescriptor{PolicyID: "policy.p", Mode: "*", SchemaVersion: 1,
				Rules: map[string]any{"commitment": map[string]any{"authority": "any_participant"}}}); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			decide := func(en *macpv1.Envelope) {
				t.Helper()
				d, err := e.Enforce(ctx, req(en))
				if err != nil {
					t.Fatal(err)
				}
				d.Settle(d.Allow)
			}
			start := func(n int) {
				t.Helper()
				sid := sessionID(700 + n)
				decide(env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
					Participants: []string{planner, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000, PolicyVersion: "policy.p"})))
				s, _ := e.Session(ctx, sid)
				rb.state[sid] = s
			}
			for n := range share {
				start(n)
			}
			e.Forget(ctx, sessionID(700))
			decide(env(sessionID(700), tc.reader, "TaskRequest", "r-read", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1"})))
			start(share) // past the share: the planner loses one binding

			for _, n := range []int{tc.dropped, tc.kept} {
				e.Forget(ctx, sessionID(700+n))
				decide(env(sessionID(700+n), planner, "TaskRequest", "r-check", mustMarshal(t, &taskv1.TaskRequestPayload{TaskId: "t1"})))
			}
			if g := rb.bound[sessionID(700+tc.kept)]; g == nil || g.ID != "policy.p" {
				t.Errorf("session %d rebuilt with binding %+v, want policy.p: its binding was dropped in place of session %d's", tc.kept, g, tc.dropped)
			}
			if g := rb.bound[sessionID(700+tc.dropped)]; g != nil {
				t.Errorf("session %d rebuilt with binding %+v, want none (the planner's least recently used)", tc.dropped, g)
			}
		})
	}
}
