package macp

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/replay"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// historyRuntime is a fakeRuntime whose StreamSession replays a history of
// n messages of size bytes to every subscriber, then echoes every envelope
// it accepts, as the runtime does. Once a history was sent, sent, if not
// nil, receives nil, or the error that ended its stream first; and the
// error that ends its stream later.
type historyRuntime struct {
	*fakeRuntime
	n, size int
	sent    chan<- error
}

// historySent tells that a history was sent, or err ended its stream.
func (h historyRuntime) historySent(err error) {
	if h.sent != nil {
		select {
		case h.sent <- err:
		default:
		}
	}
}

func (h historyRuntime) StreamSession(ss macpv1.MACPRuntimeService_StreamSessionServer) error {
	for {
		req, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			h.historySent(err)
			return err
		}
		if sid := req.GetSubscribeSessionId(); sid != "" {
			for i := range h.n {
				env := &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "TaskUpdate", MessageId: "h" + strconv.Itoa(i),
					SessionId: sid, Sender: "agent://worker", Payload: make([]byte, h.size)}
				if err := ss.Send(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Envelope{Envelope: env}}); err != nil {
					h.historySent(err)
					return err
				}
			}
			h.historySent(nil)
			continue
		}
		if env := req.GetEnvelope(); env != nil {
			if resp, _ := h.Send(ss.Context(), &macpv1.SendRequest{Envelope: env}); resp.GetAck().GetOk() {
				if err := ss.Send(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Envelope{Envelope: env}}); err != nil {
					return err
				}
			}
		}
	}
}

// happyPath is the spec's task happy path stamped now, and an Enforcer with
// the wall clock for it.
func happyPath(t *testing.T) (*replay.Transcript, *sessions.Decider) {
	t.Helper()
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := replay.Load("../../testdata/macp/conformance/task_happy_path.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range tr.Steps {
		st.Request.Envelope.TimestampUnixMs = time.Now().UnixMilli()
	}
	enf, err := replay.NewEnforcer(engine, tr, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return tr, enf
}

func as(ctx context.Context, who string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+who)
}

// TestStreamClientNotReading: a participant whose StreamSession never reads
// (a tiny HTTP/2 window, a history larger than it) and who sends a
// state-changing envelope on it must not hold the session for anyone: the
// other participant's Send is answered at once, and a stream too far behind
// is ended with RESOURCE_EXHAUSTED.
func TestStreamClientNotReading(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, size int
		end     codes.Code // how the stalled stream ends; OK: it is not ended
	}{
		{"history within the queue", 3, 64 << 10, codes.OK},
		{"history beyond the most queued", 20, 1 << 20, codes.ResourceExhausted},
	} {
		for _, transport := range transports {
			t.Run(tc.name+"/"+transport, func(t *testing.T) {
				ctx := context.Background()
				tr, enf := happyPath(t)
				sent := make(chan error, 1)
				f, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return historyRuntime{f, tc.n, tc.size, sent} })
				conn := startSidecar(t, enf, addr, transport)
				client := macpv1.NewMACPRuntimeServiceClient(conn)
				start, request, accept := tr.Steps[0].Request, tr.Steps[1].Request, tr.Steps[2].Request
				if r, err := client.Send(as(ctx, start.Credentials.Bearer), &macpv1.SendRequest{Envelope: start.Envelope}); err != nil || !r.GetAck().GetOk() {
					t.Fatalf("SessionStart: %v %v", err, r)
				}

				slow, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
				if err != nil {
					t.Fatal(err)
				}
				defer slow.Close()
				sctx, scancel := context.WithCancel(as(ctx, start.Credentials.Bearer))
				defer scancel()
				stream, err := macpv1.NewMACPRuntimeServiceClient(slow).StreamSession(sctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := stream.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: tr.SessionID}); err != nil {
					t.Fatal(err)
				}
				var ended error // the runtime's stream, ended by Warden before the history was all sent
				select {        // the history fills the window
				case ended = <-sent:
				case <-time.After(10 * time.Second):
					t.Fatal("the runtime never sent the history")
				}
				err = stream.Send(&macpv1.StreamSessionRequest{Envelope: request.Envelope})
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				// the envelope reached the runtime (the SessionStart before it),
				// unless its stream was ended
				for deadline := time.Now().Add(10 * time.Second); err == nil && ended == nil && f.forwarded() < 2; time.Sleep(5 * time.Millisecond) {
					select {
					case ended = <-sent:
						continue
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("the TaskRequest on the stalled stream never reached the runtime (%d calls did)", f.forwarded())
					}
				}
				t.Logf("stalled stream's Send: %v, the runtime's stream: %v; %d calls reached the runtime", err, ended, f.forwarded())

				cctx, cancel := context.WithTimeout(as(ctx, accept.Credentials.Bearer), 5*time.Second)
				defer cancel()
				began := time.Now()
				r, err := client.Send(cctx, &macpv1.SendRequest{Envelope: accept.Envelope})
				if err != nil {
					t.Fatalf("the other participant's Send after %v: %v (the session is held by a stream that does not read)", time.Since(began), err)
				}
				if tc.end == codes.OK && !r.GetAck().GetOk() {
					t.Errorf("TaskAccept after the streamed TaskRequest: %v", r.GetAck())
				}

				// Now read the stalled stream to its end.
				if tc.end == codes.OK {
					return
				}
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				defer rcancel()
				context.AfterFunc(rctx, scancel)
				for {
					if _, err = stream.Recv(); err != nil {
						break
					}
				}
				// On the relay the in-process grpc-go server's trailers queue
				// behind the data the client never read, and its RST_STREAM
				// ends the client's stream first: an error, not the status.
				if got := status.Code(err); got != tc.end && (transport != TransportRelay || got == codes.OK) {
					t.Errorf("the stalled stream ended with %v, want %v", err, tc.end)
				}
			})
		}
	}
}

// blockedStream is a server stream whose client never reads: every write
// blocks until its context ends.
type blockedStream struct {
	grpc.ServerStream
	ctx   context.Context
	mu    sync.Mutex
	wrote int
}

func (b *blockedStream) SendMsg(any) error {
	b.mu.Lock()
	b.wrote++
	n := b.wrote
	b.mu.Unlock()
	if n == 1 {
		return nil // the first write fits the window
	}
	<-b.ctx.Done()
	return b.ctx.Err()
}

// trickleStream is a client that reads, slowly: each write takes every.
type trickleStream struct {
	grpc.ServerStream
	ctx   context.Context
	every time.Duration
}

func (s *trickleStream) SendMsg(any) error {
	select {
	case <-time.After(s.every):
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// TestClientWriter: a writer never blocks its caller; a client behind by
// more than the queue while it does not read, or reads slower than the drain
// rate, or by more than the most in any case, or stuck in one write past the
// timeout, or past its fair share when the budget all streams share is
// taken, has its stream ended with the matching cause; the budget is given
// back whole once the stream ended.
func TestClientWriter(t *testing.T) {
	const never = time.Hour
	blocked := func(ctx context.Context) grpc.ServerStream { return &blockedStream{ctx: ctx} }
	trickle := func(ctx context.Context) grpc.ServerStream {
		return &trickleStream{ctx: ctx, every: 100 * time.Millisecond}
	}
	for _, tc := range []struct {
		name   string
		stream func(context.Context) grpc.ServerStream
		sends  int
		size   int
		bounds writerBounds
		budget int64
		cause  error
	}{
		{"within the queue, then stuck", blocked, 3, 100, writerBounds{queue: 1 << 20, most: 16 << 20, stall: never, stuck: 100 * time.Millisecond}, 1 << 30, errClientStuck},
		{"past the queue while the client reads, then stuck", blocked, 20, 100 << 10, writerBounds{queue: 1 << 20, most: 16 << 20, stall: never, stuck: 100 * time.Millisecond}, 1 << 30, errClientStuck},
		{"past the queue, the client not reading", blocked, 20, 100 << 10, writerBounds{queue: 1 << 20, most: 16 << 20, stall: 0, stuck: never}, 1 << 30, errClientBehind},
		{"past the most", blocked, 50, 100 << 10, writerBounds{queue: 1 << 20, most: 4 << 20, stall: never, stuck: never}, 1 << 30, errClientBehind},
		// 100 KiB every 100 ms is 1 MiB/s: every write completes in time,
		// too slowly for a 4 MiB/s drain.
		{"past the queue, the client reading a trickle", trickle, 20, 100 << 10, writerBounds{queue: 1 << 20, most: 16 << 20, stall: 300 * time.Millisecond, drain: 4 << 20, stuck: never}, 1 << 30, errClientSlow},
		{"past its share of a budget taken", blocked, 20, 100 << 10, writerBounds{queue: 1 << 20, most: 16 << 20, stall: never, stuck: never, fair: 64 << 10}, 512 << 10, errQueueBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			budget := &queueBudget{max: tc.budget}
			w := newClientWriter(tc.stream(ctx), cancel, tc.bounds, budget)
			go w.Run(ctx)
			began := time.Now()
			for range tc.sends {
				w.send(&frame{b: make([]byte, tc.size)})
			}
			if d := time.Since(began); d > time.Second { // it never waits for the client; the bound is for a loaded machine
				t.Errorf("queueing %d messages took %v", tc.sends, d)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the stream was not ended")
			}
			if got := context.Cause(ctx); !errors.Is(got, tc.cause) {
				t.Errorf("ended by %v, want %v", got, tc.cause)
			}
			<-w.done
			if n := budget.used.Load(); n != 0 {
				t.Errorf("%d bytes of the budget not given back", n)
			}
		})
	}
}

// TestQueueBudgetShare: a stream that holds no more than its fair share is
// not ended when the shared budget is taken.
func TestQueueBudgetShare(t *testing.T) {
	budget := &queueBudget{max: 1 << 20}
	budget.take(1<<20, true) // another stream holds it all
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := newClientWriter(&blockedStream{ctx: ctx}, cancel, clientBounds, budget)
	go w.Run(ctx)
	for range 4 {
		if !w.send(&frame{b: make([]byte, 8<<10)}) {
			t.Fatalf("a stream within its share was ended: %v", context.Cause(ctx))
		}
	}
	if w.send(&frame{b: make([]byte, 64<<10)}) {
		t.Error("a stream past its share queued into a budget taken")
	}
	// One large message, even on an empty queue, is past the share.
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	w2 := newClientWriter(&blockedStream{ctx: ctx2}, cancel2, clientBounds, budget)
	go w2.Run(ctx2)
	if w2.send(&frame{b: make([]byte, 1<<20)}) {
		t.Error("a 1 MiB message queued into a budget taken")
	}
	<-w2.done
	if got := context.Cause(ctx); !errors.Is(got, errQueueBudget) {
		t.Errorf("ended by %v, want %v", got, errQueueBudget)
	}
	<-w.done
	if n := budget.used.Load(); n != 1<<20 {
		t.Errorf("budget holds %d bytes once the stream ended, want the other's %d", n, 1<<20)
	}
}
