package macp

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/cputime"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/frames"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// benchRuntime acks the messages that start a session and refuses every
// other one as rate limited: the benchmark's TaskUpdate then reaches the
// runtime and back each time while the session's state never moves (its
// list of accepted message ids does not grow with b.N).
type benchRuntime struct {
	macpv1.UnimplementedMACPRuntimeServiceServer
}

func (benchRuntime) Send(_ context.Context, req *macpv1.SendRequest) (*macpv1.SendResponse, error) {
	env := req.GetEnvelope()
	ack := &macpv1.Ack{Ok: true, MessageId: env.GetMessageId(), SessionId: env.GetSessionId(), SessionState: macpv1.SessionState_SESSION_STATE_OPEN}
	if env.GetMessageType() == "TaskUpdate" {
		ack.Ok = false
		ack.Error = &macpv1.MACPError{Code: string(rules.CodeRateLimited), Message: "slow down", SessionId: env.GetSessionId(), MessageId: env.GetMessageId()}
	}
	return &macpv1.SendResponse{Ack: ack}, nil
}

// GetSession shows every session as one the benchmark's worker takes part
// in.
func (benchRuntime) GetSession(_ context.Context, req *macpv1.GetSessionRequest) (*macpv1.GetSessionResponse, error) {
	return &macpv1.GetSessionResponse{Metadata: &macpv1.SessionMetadata{SessionId: req.GetSessionId(), Mode: macp.ModeTask,
		State: macpv1.SessionState_SESSION_STATE_OPEN, Initiator: "agent://planner", Participants: []string{"agent://planner", "agent://worker"}}}, nil
}

func startBenchRuntime(b testing.TB) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	macpv1.RegisterMACPRuntimeServiceServer(srv, benchRuntime{})
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// benchSessions starts n task sessions through the sidecar (TaskRequest and
// TaskAccept accepted) and returns, for each, the TaskUpdate its worker
// sends and the worker's call context.
func benchSessions(b testing.TB, c macpv1.MACPRuntimeServiceClient, n int) ([]*macpv1.SendRequest, context.Context) {
	const planner, worker = "agent://planner", "agent://worker"
	as := func(p string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p)
	}
	mk := func(sid, sender, typ, id string, payload proto.Message) *macpv1.SendRequest {
		p, err := proto.Marshal(payload)
		if err != nil {
			b.Fatal(err)
		}
		return &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: typ,
			MessageId: id, SessionId: sid, Sender: sender, Payload: p}}
	}
	updates := make([]*macpv1.SendRequest, n)
	for i := range n {
		sid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		for _, st := range []struct {
			who string
			req *macpv1.SendRequest
		}{
			{planner, mk(sid, planner, macp.TypeSessionStart, "s", &macpv1.SessionStartPayload{Participants: []string{planner, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: macp.MaxTTLMs})},
			{planner, mk(sid, planner, "TaskRequest", "r", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: worker})},
			{worker, mk(sid, worker, "TaskAccept", "a", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: worker})},
		} {
			resp, err := c.Send(as(st.who), st.req)
			if err != nil || !resp.GetAck().GetOk() {
				b.Fatalf("setup %s: %v %v", st.req.GetEnvelope().GetMessageType(), err, resp)
			}
		}
		updates[i] = mk(sid, worker, "TaskUpdate", "u", &taskv1.TaskUpdatePayload{TaskId: "t", Progress: 0.5, Message: "half way"})
	}
	return updates, as(worker)
}

func benchSidecar(b *testing.B, transport string) macpv1.MACPRuntimeServiceClient {
	return macpv1.NewMACPRuntimeServiceClient(startSidecar(b, devEnforcer(b), startBenchRuntime(b), transport))
}

// devEnforcer is an Enforcer with the default policies and dev
// authentication (the bearer is the principal).
func devEnforcer(t testing.TB) *sessions.Decider { return devEnforcerWith(t, nil) }

// devEnforcerWith is devEnforcer with rebuilder rb (nil: none).
func devEnforcerWith(t testing.TB, rb sessions.Rebuilder) *sessions.Decider {
	return devEnforcerOpts(t, proxy.Options{}, rb)
}

// devEnforcerOpts is devEnforcerWith with the Enforcer's opts, its
// authenticator and policies set.
func devEnforcerOpts(t testing.TB, opts proxy.Options, rb sessions.Rebuilder) *sessions.Decider {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Authenticator, opts.Policies = a, engine
	enf, err := proxy.New(proxy.Config{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := sessions.New(enf, sessions.Options{Rebuilder: rb})
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// sendUpdate sends one TaskUpdate and checks that the runtime's own answer
// came back (the sidecar allowed and forwarded it).
func sendUpdate(ctx context.Context, c macpv1.MACPRuntimeServiceClient, r *macpv1.SendRequest) error {
	resp, err := c.Send(ctx, r)
	if err != nil {
		return err
	}
	if got := resp.GetAck().GetError().GetCode(); got != string(rules.CodeRateLimited) {
		return fmt.Errorf("ack %v: not the runtime's answer", resp.GetAck())
	}
	return nil
}

// BenchmarkSidecarSend measures one MACP Send end to end in one process
// through the grpc-go door (the test oracle; BenchmarkSidecarSendRelay is
// the front door as it ships): a grpc-go client, the sidecar (authentication, decision, forwarding) and a
// runtime that answers at once. allocs/op counts all three; the client's
// and the runtime's share does not change with Warden's code.
func BenchmarkSidecarSend(b *testing.B) { benchSend(b, TransportGRPC) }

// BenchmarkSidecarSendRelay is BenchmarkSidecarSend with the frame relay
// as the front door.
func BenchmarkSidecarSendRelay(b *testing.B) { benchSend(b, TransportRelay) }

// BenchmarkSidecarSendRelayDeadline is BenchmarkSidecarSendRelay with a
// deadline on every call (grpc-timeout), as the bench harness's clients
// and most gRPC clients send one.
func BenchmarkSidecarSendRelayDeadline(b *testing.B) {
	c := benchSidecar(b, TransportRelay)
	updates, ctx := benchSessions(b, c, 1)
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	runSend(b, ctx, c, updates[0])
}

// BenchmarkNullRelaySend is BenchmarkSidecarSendRelay through the frame
// relay alone, passing every stream through to the same runtime without a
// decision: the floor of the relay front door (the sessions are set up
// through a Warden sidecar, which the measured calls do not pass). With
// -cpuprofile, -tagfocus side=warden shows the hop's share in both.
func BenchmarkNullRelaySend(b *testing.B) {
	up := startBenchRuntime(b)
	updates, ctx := benchSessions(b, macpv1.NewMACPRuntimeServiceClient(startSidecar(b, devEnforcer(b), up, TransportRelay)), 1)
	c := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(b, serveNullRelay(b, up)))
	runSend(b, ctx, c, updates[0])
}

// serveNullRelay serves the frame relay with no Router in front of
// upstream until the benchmark ends and returns its address.
func serveNullRelay(b testing.TB, upstream string) string {
	r, err := frames.New(frames.Config{Upstream: upstream})
	if err != nil {
		b.Fatal(err)
	}
	return serveLabelled(b, r.Serve)
}

func benchSend(b *testing.B, transport string) {
	c := benchSidecar(b, transport)
	updates, ctx := benchSessions(b, c, 1)
	runSend(b, ctx, c, updates[0])
}

// runSend sends update through c for the benchmark's loop and reports,
// besides the mean (ns/op), the median round trip of one Send (p50-ns):
// the latency one call sees, which a mean hides behind the odd slow one.
func runSend(b *testing.B, ctx context.Context, c macpv1.MACPRuntimeServiceClient, update *macpv1.SendRequest) {
	b.ReportAllocs()
	var rtt roundTrips
	defer rtt.report(b)
	defer reportWrites(b, cputime.Writes())
	defer reportCPU(b, cputime.Used())
	for b.Loop() {
		start := time.Now()
		if err := sendUpdate(ctx, c, update); err != nil {
			b.Fatal(err)
		}
		rtt.add(time.Since(start))
	}
}

// roundTrips counts round trips by the microsecond, up to a bound (the
// rest in the last bucket), so that recording one allocates nothing.
type roundTrips struct {
	n       [10_000]int64
	samples int64
}

func (r *roundTrips) add(d time.Duration) {
	r.n[min(int(d/time.Microsecond), len(r.n)-1)]++
	r.samples++
}

// report reports the median round trip as p50-ns.
func (r *roundTrips) report(b *testing.B) {
	seen := int64(0)
	for us, k := range r.n {
		if seen += k; 2*seen >= r.samples && r.samples > 0 {
			b.ReportMetric(float64(us)*1e3+500, "p50-ns") // the bucket's middle
			return
		}
	}
}

// BenchmarkSidecarGetSession measures one GetSession of a participant end
// to end (authentication, the runtime's answer, the participant filter);
// BenchmarkSidecarGetSessionRelay with the frame relay as the front door.
func BenchmarkSidecarGetSession(b *testing.B)      { benchGetSession(b, TransportGRPC) }
func BenchmarkSidecarGetSessionRelay(b *testing.B) { benchGetSession(b, TransportRelay) }

func benchGetSession(b *testing.B, transport string) {
	c := benchSidecar(b, transport)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer agent://worker")
	req := &macpv1.GetSessionRequest{SessionId: "00000000-0000-4000-8000-000000000000"}
	b.ReportAllocs()
	defer reportCPU(b, cputime.Used())
	for b.Loop() {
		resp, err := c.GetSession(ctx, req)
		if err != nil || resp.GetMetadata().GetSessionId() != req.GetSessionId() {
			b.Fatal(resp, err)
		}
	}
}

// reportCPU reports the CPU time per operation since start: the client's,
// the sidecar's and the upstream's together.
func reportCPU(b *testing.B, start time.Duration) {
	cputime.Report(b, start, b.N)
}

// reportWrites reports the write system calls per operation since start:
// the client's, the sidecar's and the upstream's together.
func reportWrites(b *testing.B, start int64) {
	b.ReportMetric(float64(cputime.Writes()-start)/float64(b.N), "syscw/op")
}

// BenchmarkSidecarSendParallel is BenchmarkSidecarSend from every core at
// once, each goroutine on sessions of its own turn.
func BenchmarkSidecarSendParallel(b *testing.B) {
	c := benchSidecar(b, TransportGRPC)
	const sessions = 64
	updates, ctx := benchSessions(b, c, sessions)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cputime.Used())
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := sendUpdate(ctx, c, updates[i%sessions]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
