package macp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// crossRuntime is a fakeRuntime whose answers cross: a resent SessionStart
// (dup) is held until the next TaskAccept arrived and is then acked as new
// (so Warden forgets the session: it no longer follows the runtime), and
// that TaskAccept is answered only after it: once the dup's answer is queued
// on the runtime connection (dupOut, closed at the server's stats.End of
// that call, which comes after its status was written).
type crossRuntime struct {
	*fakeRuntime
	dupIn, acceptIn, dupOut chan struct{}
	starts                  atomic.Int32
}

// dupKey holds, in a call's context, whether it is the dup.
type dupKey struct{}

func (r *crossRuntime) Send(ctx context.Context, req *macpv1.SendRequest) (*macpv1.SendResponse, error) {
	env := req.GetEnvelope()
	switch {
	case env.GetMessageType() == macp.TypeSessionStart && r.starts.Add(1) == 2:
		ctx.Value(dupKey{}).(*atomic.Bool).Store(true)
		close(r.dupIn)
		<-r.acceptIn
		resp, err := r.fakeRuntime.Send(ctx, req)
		if err == nil {
			resp.Ack.Duplicate = false
		}
		return resp, err
	case env.GetMessageType() == "TaskAccept":
		close(r.acceptIn)
		<-r.dupOut // the resent start's answer is read first
	}
	return r.fakeRuntime.Send(ctx, req)
}

// crossRuntime is the runtime server's stats.Handler: it closes dupOut
// once the dup's call ended.
func (r *crossRuntime) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, dupKey{}, new(atomic.Bool))
}

func (r *crossRuntime) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, end := s.(*stats.End); end && ctx.Value(dupKey{}).(*atomic.Bool).Load() {
		close(r.dupOut)
	}
}

func (r *crossRuntime) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (r *crossRuntime) HandleConn(context.Context, stats.ConnStats)                       {}

// TestRelaySettleBesideHeldSession: two Sends on one session over the
// relay's one runtime connection, answered crosswise: a resent SessionStart
// (a duplicate, which holds nothing) that the runtime acks as new, so that
// Warden forgets the session, which waits for the session's lock, while a
// TaskAccept holds that lock until its own answer, which the runtime sends
// after. Both are answered: what follows the runtime's answer never waits
// on the runtime connection's reader (were the forget run there, as a
// frames.Request.ForwardThen continuation that waits would, the TaskAccept's
// answer would never be read and both would end DEADLINE_EXCEEDED).
func TestRelaySettleBesideHeldSession(t *testing.T) {
	rt := &crossRuntime{dupIn: make(chan struct{}), acceptIn: make(chan struct{}), dupOut: make(chan struct{})}
	_, up := startFakeRuntimeOpts(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { rt.fakeRuntime = f; return rt }, []grpc.ServerOption{grpc.StatsHandler(rt)})
	enf := devEnforcerWith(t, noRebuild{exists: new(atomic.Int64)}) // with a rebuilder, or Warden forgets nothing
	c := macpv1.NewMACPRuntimeServiceClient(startSidecarWith(t, enf, Config{Upstream: up, Transport: TransportRelay}))
	sid := sessionID()
	mk := func(sender, typ, id string, payload proto.Message) *macpv1.SendRequest {
		p, err := proto.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		return &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: typ,
			MessageId: id, SessionId: sid, Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: p}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	planner, worker := as(ctx, "planner"), as(ctx, "worker")
	start := mk("planner", macp.TypeSessionStart, "s", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	for _, st := range []struct {
		ctx context.Context
		req *macpv1.SendRequest
	}{
		{planner, start},
		{planner, mk("planner", "TaskRequest", "r", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: "worker"})},
	} {
		if resp, err := c.Send(st.ctx, st.req); err != nil || !resp.GetAck().GetOk() {
			t.Fatalf("setup %s: %v %v", st.req.GetEnvelope().GetMessageType(), resp, err)
		}
	}
	type result struct {
		resp *macpv1.SendResponse
		err  error
	}
	dup, accept := make(chan result, 1), make(chan result, 1)
	go func() { resp, err := c.Send(planner, start); dup <- result{resp, err} }()
	select {
	case <-rt.dupIn:
	case <-ctx.Done():
		t.Fatal("the resent SessionStart never reached the runtime")
	}
	go func() {
		resp, err := c.Send(worker, mk("worker", "TaskAccept", "a", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: "worker"}))
		accept <- result{resp, err}
	}()
	for name, ch := range map[string]chan result{"resent SessionStart": dup, "TaskAccept": accept} {
		if r := <-ch; r.err != nil || !r.resp.GetAck().GetOk() {
			t.Errorf("%s: %v %v, want the runtime's Ack", name, r.resp, r.err)
		}
	}
	if n := enf.Sessions(); n != 0 {
		t.Errorf("Warden tracks %d sessions after the runtime acked a duplicate as new, want 0 (forgotten)", n)
	}
}
