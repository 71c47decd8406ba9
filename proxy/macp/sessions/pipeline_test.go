package sessions

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

const outsider = "agent://outsider"

// modelPools are, per mode, the messages a random session draws from:
// allowed and refused, record-only and state-changing.
var modelPools = map[string][]step{
	macp.ModeTask: {
		{planner, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: worker}},
		{worker, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker}},
		{other, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: other}},
		{worker, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.25}},
		{worker, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5}},
		{worker, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.75}},
		{worker, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t2", Progress: 0.5}},
		{planner, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5}},
		{worker, "Progress", &macpv1.ProgressPayload{Progress: 1, Total: 2}},
		{other, "Progress", &macpv1.ProgressPayload{Progress: 1, Total: 3}},
		{outsider, "Progress", &macpv1.ProgressPayload{Progress: 1, Total: 4}},
		{worker, "TaskComplete", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker, Output: []byte("ok")}},
		{other, "TaskComplete", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker, Output: []byte("forged")}},
		{worker, "TaskFail", &taskv1.TaskFailPayload{TaskId: "t1", Assignee: worker}},
		{worker, "TaskReject", &taskv1.TaskRejectPayload{TaskId: "t1", Assignee: worker}},
		{planner, "Commitment", &macpv1.CommitmentPayload{CommitmentId: "c", Action: "task.completed", AuthorityScope: "s", Reason: "r", ModeVersion: "1.0.0", ConfigurationVersion: "c", OutcomePositive: true}},
	},
	macp.ModeHandoff: {
		{planner, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: worker}},
		{planner, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h2", TargetParticipant: other}},
		{planner, "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain", Context: []byte("a")}},
		{planner, "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain", Context: []byte("b")}},
		{planner, "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h2", ContentType: "text/plain", Context: []byte("c")}},
		{other, "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain", Context: []byte("d")}},
		{worker, "Progress", &macpv1.ProgressPayload{Progress: 1, Total: 2}},
		{worker, "HandoffAccept", &handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: worker}},
		{worker, "HandoffDecline", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: worker}},
		{other, "HandoffAccept", &handoffv1.HandoffAcceptPayload{HandoffId: "h2", AcceptedBy: other}},
		{planner, "Commitment", &macpv1.CommitmentPayload{CommitmentId: "c", Action: "handoff.accepted", AuthorityScope: "s", Reason: "r", ModeVersion: "1.0.0", ConfigurationVersion: "c", OutcomePositive: true}},
	},
}

// modelMsg is one message of a random session and the runtime's answer to it.
type modelMsg struct {
	env    *macpv1.Envelope
	accept bool
}

// modelSession draws a session: a SessionStart, then n messages from the
// mode's pool with ids from a small set (so retransmissions, reused ids and
// ids still in flight occur), each accepted by the runtime or not.
func modelSession(t testing.TB, rnd *rand.Rand, sid, mode string, n int) []modelMsg {
	mk := func(id string, s step) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: mode, MessageType: s.typ, MessageId: id, SessionId: sid, Sender: s.sender, Payload: mustMarshal(t, s.payload)}
	}
	start := step{planner, "SessionStart", &macpv1.SessionStartPayload{Participants: []string{planner, worker, other}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000}}
	msgs := []modelMsg{{env: mk("start", start), accept: true}}
	pool := modelPools[mode]
	for range n {
		s := pool[rnd.IntN(len(pool))]
		if mode == macp.ModeTask && len(msgs) < 3 { // mostly get the task running
			s = pool[len(msgs)-1]
		}
		msgs = append(msgs, modelMsg{env: mk(fmt.Sprint("m", rnd.IntN(n)), s), accept: rnd.IntN(8) != 0})
	}
	return msgs
}

// flight is a decision the model has not answered yet.
type flight struct {
	d      proxy.Decision
	accept bool
}

// landOne answers one random unanswered decision.
func landOne(rnd *rand.Rand, pending *[]flight) {
	p := *pending
	i := rnd.IntN(len(p))
	p[i].d.Settle(p[i].accept)
	p[i] = p[len(p)-1]
	*pending = p[:len(p)-1]
}

// decideLanding decides r on e while answering unanswered decisions in
// random order whenever the decision waits.
func decideLanding(e *Decider, r Request, rnd *rand.Rand, pending *[]flight) (proxy.Decision, error) {
	type result struct {
		d   proxy.Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := e.Enforce(context.Background(), r)
		done <- result{d, err}
	}()
	wait := time.NewTimer(time.Millisecond)
	defer wait.Stop()
	for {
		select {
		case res := <-done:
			return res.d, res.err
		case <-wait.C:
		}
		if len(*pending) == 0 {
			select {
			case res := <-done:
				return res.d, res.err
			case <-time.After(10 * time.Second):
				return proxy.Decision{}, fmt.Errorf("%s %s waits with nothing in flight", r.Envelope.GetMessageType(), r.Envelope.GetMessageId())
			}
		}
		landOne(rnd, pending)
		wait.Reset(50 * time.Microsecond)
	}
}

// TestPipelineModel is the differential test of pipelining: random sessions
// are sent to a serial Decider, which settles every message before deciding
// the next, and to a pipelined one, where the runtime's answers arrive in
// random order and late. Every decision must be the serial one (so the
// pipelined Decider never allows what the serial committed state refuses),
// and once every answer has landed the committed states must be equivalent.
func TestPipelineModel(t *testing.T) {
	sessions := 1000
	if testing.Short() {
		sessions = 200
	}
	for _, tc := range []struct {
		name  string
		depth int
		// evict: a table of 8 entries, sessions rebuilt from the serial
		// Decider's committed state (what the runtime accepted)
		evict bool
	}{{"depth=2", 2, false}, {"depth=16", 16, false}, {"depth=16,evicting", 16, true}} {
		t.Run(tc.name, func(t *testing.T) {
			serial, _ := newEnforcer(t, proxy.Config{PipelineDepth: 1}, nil)
			cfg, rt := proxy.Config{PipelineDepth: tc.depth}, &runtimeOf{e: serial}
			var rb Rebuilder
			if tc.evict {
				cfg.Sessions, rb = 8, rt
			}
			piped, _ := newEnforcer(t, cfg, rb)
			const workers = 4
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewPCG(uint64(tc.depth), uint64(w)))
					for n := w; n < sessions; n += workers {
						mode := macp.ModeTask
						if n%3 == 2 {
							mode = macp.ModeHandoff
						}
						if err := modelRun(serial, piped, rnd, modelSession(t, rnd, sessionID(10_000+n), mode, 6+rnd.IntN(30))); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if tc.evict {
				t.Logf("%d rebuilds for %d sessions in a table of 8", rt.calls.Load(), sessions)
				if rt.calls.Load() == 0 {
					t.Error("no session was rebuilt")
				}
			}
		})
	}
}

// runtimeOf rebuilds sessions from a serial Decider's committed state,
// which is what the runtime accepted.
type runtimeOf struct {
	e     *Decider
	calls atomic.Int64
}

func (r *runtimeOf) Rebuild(ctx context.Context, id string, _ *macp.Governance) (*macp.Session, error) {
	r.calls.Add(1)
	return r.e.Session(ctx, id)
}

func (r *runtimeOf) Exists(ctx context.Context, id string) (bool, error) {
	s, err := r.e.Session(ctx, id)
	return s != nil, err
}

// modelRun sends one session's messages to both Enforcers and compares.
func modelRun(serial, piped *Decider, rnd *rand.Rand, msgs []modelMsg) error {
	ctx := context.Background()
	var pending []flight
	for _, m := range msgs {
		r := req(m.env)
		got, err := decideLanding(piped, r, rnd, &pending)
		if err != nil {
			return err
		}
		want, err := serial.Enforce(ctx, r)
		if err != nil {
			return err
		}
		want.Settle(m.accept)
		if got.Allow != want.Allow || got.Code != want.Code || got.Reason != want.Reason || got.Duplicate != want.Duplicate {
			return fmt.Errorf("%s %s %s from %s: pipelined %v %s %s, serial %v %s %s", m.env.GetSessionId(), m.env.GetMessageType(), m.env.GetMessageId(), m.env.GetSender(),
				got.Allow, got.Code, got.Reason, want.Allow, want.Code, want.Reason)
		}
		pending = append(pending, flight{got, m.accept})
		for len(pending) > 0 && rnd.IntN(3) == 0 {
			landOne(rnd, &pending)
		}
	}
	for len(pending) > 0 {
		landOne(rnd, &pending)
	}
	sid := msgs[0].env.GetSessionId()
	a, _ := serial.Session(ctx, sid)
	b, _ := piped.Session(ctx, sid)
	if b == nil && piped.rebuilder != nil {
		return nil // evicted or stale: its next message rebuilds it
	}
	if msg := sameSession(a, b, msgs); msg != "" {
		return fmt.Errorf("%s: final states differ: %s", sid, msg)
	}
	return nil
}

// sameSession compares two committed states: lifecycle, mode state, the
// accepted count of every sender, and what each message of the session would
// get now (which is how the record of accepted ids shows).
func sameSession(a, b *macp.Session, msgs []modelMsg) string {
	if a == nil || b == nil {
		if a != b {
			return fmt.Sprintf("serial %v, pipelined %v", a != nil, b != nil)
		}
		return ""
	}
	if a.State != b.State || !reflect.DeepEqual(a.ModeState(), b.ModeState()) {
		return fmt.Sprintf("serial %s %v, pipelined %s %v", a.State, a.ModeState(), b.State, b.ModeState())
	}
	for _, s := range []string{planner, worker, other, outsider} {
		if a.MessageCount(s) != b.MessageCount(s) {
			return fmt.Sprintf("%s: serial counts %d accepted, pipelined %d", s, a.MessageCount(s), b.MessageCount(s))
		}
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixMilli()
	for _, m := range msgs[1:] {
		x, y := macp.Step(a, m.env, m.env.GetSender(), now), macp.Step(b, m.env, m.env.GetSender(), now)
		if x.Verdict.Reason != y.Verdict.Reason || x.Duplicate != y.Duplicate {
			return fmt.Sprintf("%s %s now: serial %s, pipelined %s", m.env.GetMessageType(), m.env.GetMessageId(), x.Verdict.Reason, y.Verdict.Reason)
		}
	}
	return ""
}

// decideAsync decides r in a goroutine; the channel delivers the decision.
func decideAsync(t *testing.T, e *Decider, r Request) <-chan proxy.Decision {
	ch := make(chan proxy.Decision, 1)
	go func() {
		d, err := e.Enforce(context.Background(), r)
		if err != nil {
			t.Error(err)
		}
		ch <- d
	}()
	return ch
}

// waiting checks that a decision is still waiting.
func waiting(t *testing.T, ch <-chan proxy.Decision, what string) {
	t.Helper()
	select {
	case d := <-ch:
		t.Fatalf("%s was decided (%+v) while it should wait", what, d)
	case <-time.After(30 * time.Millisecond):
	}
}

func received(t *testing.T, ch <-chan proxy.Decision, what string) proxy.Decision {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was never decided", what)
	}
	return proxy.Decision{}
}

// TestPipelineFlights checks the pipelining rules on one session: record-only
// messages fly up to the depth, land concurrently and all commit; a message
// whose id is in flight, and a state-changing message, wait for the flights.
func TestPipelineFlights(t *testing.T) {
	const depth = 16
	e, _ := newEnforcer(t, proxy.Config{PipelineDepth: depth}, nil)
	sid := sessionID(50)
	startTask(t, e, sid, true)
	update := func(id string, p float64) Request {
		return req(env(sid, worker, "TaskUpdate", id, mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: p})))
	}
	var flights []proxy.Decision
	for i := range depth {
		d, err := e.Enforce(context.Background(), update(fmt.Sprint("u", i), 0.5))
		if err != nil || !d.Allow {
			t.Fatalf("update %d: %v %+v", i, err, d)
		}
		flights = append(flights, d)
	}
	more := decideAsync(t, e, update("u-more", 0.5))
	waiting(t, more, "a TaskUpdate beyond the depth")
	flights[0].Settle(true)
	d := received(t, more, "a TaskUpdate once a flight landed")
	if !d.Allow {
		t.Fatalf("%+v", d)
	}
	flights = append(flights[1:], d)

	reused := decideAsync(t, e, update("u3", 0.9)) // u3 in flight, other content
	waiting(t, reused, "a message whose id is in flight")
	complete := decideAsync(t, e, req(env(sid, worker, "TaskComplete", "done", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker}))))
	waiting(t, complete, "a TaskComplete behind it")

	var wg sync.WaitGroup
	for i, f := range flights {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Settle(i != 5) // the runtime refuses one
		}()
	}
	wg.Wait()
	if d := received(t, reused, "the reused id"); d.Allow || d.Reason != rules.ReasonReusedID {
		t.Fatalf("reused id after landing: %+v", d)
	}
	d = received(t, complete, "the TaskComplete")
	if !d.Allow {
		t.Fatalf("%+v", d)
	}
	late := decideAsync(t, e, update("late", 1))
	waiting(t, late, "a TaskUpdate behind the held TaskComplete")
	d.Settle(true)
	if d := received(t, late, "the late update"); d.Allow {
		t.Fatalf("TaskUpdate after the completion was committed: %+v", d)
	}
	s, err := e.Session(context.Background(), sid)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	// start, request, accept by others; the worker's accept, 16 updates
	// (one refused upstream) and the completion.
	if got, want := s.MessageCount(worker), 1+depth+1-1+1; got != want {
		t.Fatalf("worker has %d accepted messages, want %d", got, want)
	}
}

// TestPipelineStale checks that a flight the committed state would refuse at
// landing marks the session stale, and that it is rebuilt from the upstream.
func TestPipelineStale(t *testing.T) {
	rb := &fakeRebuilder{state: map[string]*macp.Session{}}
	e, _ := newEnforcer(t, proxy.Config{PipelineDepth: 4}, rb)
	sid := sessionID(51)
	startTask(t, e, sid, true)
	before, _ := e.Session(context.Background(), sid)
	d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u1", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
	if err != nil || !d.Allow {
		t.Fatalf("%v %+v", err, d)
	}
	// The committed state moves under the flight as no decision can move
	// it: the task is already completed when the update lands.
	c := macp.Step(before, env(sid, worker, "TaskComplete", "c", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker})), worker, before.StartedAtMs)
	if c.Next == nil {
		t.Fatalf("%+v", c.Verdict)
	}
	en, _ := e.table.acquire(context.Background(), sid, 0, false)
	en.update(func(*macp.Session) *macp.Session { return c.Next })
	en.release()
	d.Settle(true)
	if s, _ := e.Session(context.Background(), sid); s != nil {
		t.Fatalf("a diverged landing left state %s", s.State)
	}
	rb.state[sid] = c.Next
	d, err = e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u2", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
	if err != nil || d.Allow || rb.calls != 1 {
		t.Fatalf("after a stale landing: %v %+v, %d rebuilds", err, d, rb.calls)
	}
}

// TestPipelineExpiry checks that a flight landing on a session Warden's
// clock expired meanwhile leaves it expired, not stale.
func TestPipelineExpiry(t *testing.T) {
	e, c := newEnforcer(t, proxy.Config{PipelineDepth: 4}, nil)
	sid := sessionID(52)
	startTask(t, e, sid, true)
	d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u1", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
	if err != nil || !d.Allow {
		t.Fatalf("%v %+v", err, d)
	}
	c.add(2 * time.Minute) // past the 60 s TTL
	late, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u2", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
	if err != nil || late.Allow || late.Reason != rules.ReasonSessionExpired {
		t.Fatalf("after the TTL: %v %+v", err, late)
	}
	d.Settle(true)
	if s, _ := e.Session(context.Background(), sid); s == nil || s.State != macp.StateExpired {
		t.Fatalf("after a landing on an expired session: %+v", s)
	}
}

// BenchmarkPipeline decides and commits 16 TaskUpdates of one session per
// op: one at a time (serial: each settled before the next is decided), or
// all 16 in flight before any lands. A fresh session every op keeps the id
// record from growing; its start is part of both.
func BenchmarkPipeline(b *testing.B) {
	const n = 16
	for _, bc := range []struct {
		name  string
		depth int
	}{{"serial", 1}, {"16-in-flight", n}} {
		b.Run(bc.name, func(b *testing.B) {
			e, _ := newEnforcer(b, proxy.Config{PipelineDepth: bc.depth, Sessions: 1 << 20}, nil)
			payload := mustMarshal(b, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
			updates := make([]Request, n)
			flights := make([]proxy.Decision, n)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sid := sessionID(i)
				i++
				startTask(b, e, sid, true)
				for j := range updates {
					updates[j] = req(env(sid, worker, "TaskUpdate", fmt.Sprint("u", i, "-", j), payload))
				}
				for j, r := range updates {
					d, err := e.Enforce(ctx, r)
					if err != nil || !d.Allow {
						b.Fatalf("%v %+v", err, d)
					}
					if bc.depth == 1 {
						d.Settle(true)
					}
					flights[j] = d
				}
				for _, d := range flights {
					d.Settle(true) // a no-op when already settled
				}
			}
		})
	}
}

// BenchmarkHotSession sends TaskUpdates of one session from 16 senders to an
// upstream that answers each after 1 ms: serial, a session's messages
// queue behind that round trip; pipelined, up to 16 are in flight. ns/op is
// the wall time per message (its inverse the session's throughput).
func BenchmarkHotSession(b *testing.B) {
	const senders, rtt = 16, time.Millisecond
	for _, bc := range []struct {
		name  string
		depth int
	}{{"serial", 1}, {"depth-16", 16}} {
		b.Run(bc.name, func(b *testing.B) {
			e, _ := newEnforcer(b, proxy.Config{PipelineDepth: bc.depth}, nil)
			sid := sessionID(60)
			startTask(b, e, sid, true)
			payload := mustMarshal(b, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
			work := make(chan int)
			var wg sync.WaitGroup
			for range senders {
				wg.Go(func() {
					for i := range work {
						d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", fmt.Sprint("u", i), payload)))
						if err != nil || !d.Allow {
							b.Errorf("%v %+v", err, d)
						}
						time.Sleep(rtt) // the upstream's round trip
						d.Settle(true)
					}
				})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				work <- i
				i++
			}
			close(work)
			wg.Wait()
		})
	}
}

// TestPipelineForgetInFlight checks that forgetting a session while one of
// its messages is in flight does not wait for the landing (a stream's
// receive loop forgets it and is the one that lands the flight): the state
// is marked stale at once, the landing changes nothing, and the next message
// waits for it and rebuilds the session.
func TestPipelineForgetInFlight(t *testing.T) {
	rb := &fakeRebuilder{state: map[string]*macp.Session{}}
	e, _ := newEnforcer(t, proxy.Config{PipelineDepth: 4}, rb)
	sid := sessionID(52)
	startTask(t, e, sid, true)
	before, _ := e.Session(context.Background(), sid)
	d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u1", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
	if err != nil || !d.Allow {
		t.Fatalf("%v %+v", err, d)
	}
	done := make(chan struct{})
	go func() {
		e.Forget(context.Background(), sid)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.Settle(true)
		<-done
		t.Fatal("Forget waited for the flight to land")
	}
	if s, _ := e.Session(context.Background(), sid); s != nil {
		t.Fatalf("a forgotten session in flight kept state %s", s.State)
	}
	d.Settle(true)
	if s, _ := e.Session(context.Background(), sid); s != nil {
		t.Fatalf("the landing revived a forgotten session: %s", s.State)
	}
	rb.state[sid] = before
	d, err = e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", "u2", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
	if err != nil || !d.Allow || rb.calls != 1 {
		t.Fatalf("after forgetting: %v %+v, %d rebuilds", err, d, rb.calls)
	}
	d.Settle(true)
}

// TestSettleForget: a decision whose answer was lost (or showed Warden's
// state no longer follows the runtime) is settled and its session forgotten
// in one step, while the decision still holds it: a message already waiting
// for the session is decided on the state rebuilt from the runtime, which may
// have accepted the lost one, never on the state before it. Settle then
// Forget gave the session back in between. A lost record-only flight marks
// the session stale as it lands. Without a rebuilder nothing is forgotten.
func TestSettleForget(t *testing.T) {
	ctx := context.Background()
	accept := func(sid string) *macpv1.Envelope {
		return env(sid, worker, "TaskAccept", "acc", mustMarshal(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker}))
	}
	complete := func(sid string) *macpv1.Envelope {
		return env(sid, worker, "TaskComplete", "done", mustMarshal(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker}))
	}
	t.Run("held, a message waiting", func(t *testing.T) {
		for n := range 50 { // the gap was a scheduling race: try it often
			rb := &fakeRebuilder{state: map[string]*macp.Session{}}
			e, _ := newEnforcer(t, proxy.Config{PipelineDepth: 4}, rb)
			sid := sessionID(600 + n)
			startTask(t, e, sid, false)
			before, _ := e.Session(ctx, sid)
			lost, err := e.Enforce(ctx, req(accept(sid)))
			if err != nil || !lost.Allow {
				t.Fatalf("%v %+v", err, lost)
			}
			waiter := decideAsync(t, e, req(complete(sid)))
			waiting(t, waiter, "the worker's TaskComplete")
			rb.mu.Lock()
			rb.state[sid] = macp.Step(before, accept(sid), worker, before.StartedAtMs).Next // the runtime took the TaskAccept
			rb.mu.Unlock()
			e.SettleForget(ctx, lost)
			d := received(t, waiter, "the worker's TaskComplete")
			d.Settle(true)
			rb.mu.Lock()
			calls := rb.calls
			rb.mu.Unlock()
			if !d.Allow || calls != 1 {
				t.Fatalf("try %d: the waiting TaskComplete: allow %v (%s), %d rebuilds; want allowed on the rebuilt state", n, d.Allow, d.Reason, calls)
			}
		}
	})
	t.Run("in flight", func(t *testing.T) {
		rb := &fakeRebuilder{state: map[string]*macp.Session{}}
		e, _ := newEnforcer(t, proxy.Config{PipelineDepth: 4}, rb)
		sid := sessionID(700)
		startTask(t, e, sid, true)
		d, err := e.Enforce(ctx, req(env(sid, worker, "TaskUpdate", "u1", mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1"}))))
		if err != nil || !d.Allow {
			t.Fatalf("%v %+v", err, d)
		}
		e.SettleForget(ctx, d)
		if s, _ := e.Session(ctx, sid); s != nil {
			t.Fatalf("a lost flight left state %s", s.State)
		}
	})
	t.Run("no rebuilder", func(t *testing.T) {
		e, _ := newEnforcer(t, proxy.Config{PipelineDepth: 4}, nil)
		sid := sessionID(701)
		startTask(t, e, sid, false)
		d, err := e.Enforce(ctx, req(accept(sid)))
		if err != nil || !d.Allow {
			t.Fatalf("%v %+v", err, d)
		}
		e.SettleForget(ctx, d)
		if s, _ := e.Session(ctx, sid); s == nil {
			t.Fatal("forgotten without a rebuilder: nothing could rebuild it")
		}
		again, _ := e.Enforce(ctx, req(accept(sid)))
		again.Settle(false)
		if !again.Allow {
			t.Fatalf("the TaskAccept again: %s, want allowed (nothing was committed)", again.Reason)
		}
	})
}
