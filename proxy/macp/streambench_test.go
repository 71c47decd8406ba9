package macp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/cputime"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// StreamSession answers every envelope on the stream as Send does a
// TaskUpdate: refused as rate limited, naming its session and message id,
// so that the decision is settled by the answer and the session's state
// never moves.
func (benchRuntime) StreamSession(s macpv1.MACPRuntimeService_StreamSessionServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		env := req.GetEnvelope()
		if env == nil {
			continue
		}
		e := &macpv1.MACPError{Code: string(rules.CodeRateLimited), Message: "slow down", SessionId: env.GetSessionId(), MessageId: env.GetMessageId()}
		if err := s.Send(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: e}}); err != nil {
			return err
		}
	}
}

// openStream opens a StreamSession through c and returns what streams one
// message on it: update sent, the runtime's answer read and checked.
func openStream(t testing.TB, ctx context.Context, c macpv1.MACPRuntimeServiceClient, update *macpv1.SendRequest) func() error {
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	s, err := c.StreamSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &macpv1.StreamSessionRequest{Envelope: update.GetEnvelope()}
	return func() error {
		if err := s.Send(req); err != nil {
			return err
		}
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		if got := resp.GetError().GetCode(); got != string(rules.CodeRateLimited) {
			return fmt.Errorf("answer %v: not the runtime's", resp)
		}
		return nil
	}
}

// BenchmarkSidecarStreamRelay measures one envelope streamed on a
// StreamSession through the relay front door: sent by a grpc-go client,
// decided, forwarded, answered by the runtime and the answer settled and
// relayed back (the stream opened once).
func BenchmarkSidecarStreamRelay(b *testing.B) { benchStream(b, TransportRelay) }

// BenchmarkSidecarStream is BenchmarkSidecarStreamRelay through the
// grpc-go door.
func BenchmarkSidecarStream(b *testing.B) { benchStream(b, TransportGRPC) }

// BenchmarkNullRelayStream is BenchmarkSidecarStreamRelay through the frame
// relay alone, without a decision: its floor.
func BenchmarkNullRelayStream(b *testing.B) {
	up := startBenchRuntime(b)
	updates, ctx := benchSessions(b, macpv1.NewMACPRuntimeServiceClient(startSidecar(b, devEnforcer(b), up, TransportRelay)), 1)
	c := macpv1.NewMACPRuntimeServiceClient(startSidecarConn(b, serveNullRelay(b, up)))
	runStream(b, openStream(b, ctx, c, updates[0]))
}

func benchStream(b *testing.B, transport string) {
	c := benchSidecar(b, transport)
	updates, ctx := benchSessions(b, c, 1)
	runStream(b, openStream(b, ctx, c, updates[0]))
}

// runStream streams one message for the benchmark's loop and reports the
// median round trip as runSend does.
func runStream(b *testing.B, one func() error) {
	b.ReportAllocs()
	var rtt roundTrips
	defer rtt.report(b)
	defer reportCPU(b, cputime.Used())
	for b.Loop() {
		start := time.Now()
		if err := one(); err != nil {
			b.Fatal(err)
		}
		rtt.add(time.Since(start))
	}
}
