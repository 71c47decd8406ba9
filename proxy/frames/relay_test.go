package frames

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// echo is the upstream of the tests: grpc-go's interop TestService, each
// call answered with what it carried.
type echo struct {
	testpb.UnimplementedTestServiceServer
	open     atomic.Int64 // FullDuplexCalls in progress
	canceled atomic.Int64 // FullDuplexCalls that saw their context end
	unary    atomic.Int64 // UnaryCalls received
	hung     atomic.Int64 // UnaryCalls asked to hang that saw their context end
}

func (e *echo) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	e.unary.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get("fail")) > 0 {
		return nil, status.Error(codes.FailedPrecondition, "asked to fail")
	}
	if len(md.Get("hang")) > 0 { // answers nothing until the call ends
		<-ctx.Done()
		e.hung.Add(1)
		return nil, ctx.Err()
	}
	return &testpb.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (e *echo) FullDuplexCall(s testpb.TestService_FullDuplexCallServer) error {
	e.open.Add(1)
	defer e.open.Add(-1)
	for {
		in, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if s.Context().Err() != nil {
				e.canceled.Add(1)
			}
			return err
		}
		if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// setup starts the echo upstream (capped at 128 streams per connection,
// as the MACP runtime is), a relay in front of it and a client of the
// relay; everything stops with the test.
func setup(t testing.TB, cfg Config) (testpb.TestServiceClient, *echo, *Relay) {
	c, e, r, _ := setupServer(t, cfg)
	return c, e, r
}

// setupServer is setup that also returns the upstream server.
func setupServer(t testing.TB, cfg Config) (testpb.TestServiceClient, *echo, *Relay, *grpc.Server) {
	t.Helper()
	e, srv, up := startEcho(t)
	cfg.Upstream = up
	r, addr := startRelay(t, cfg)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc), e, r, srv
}

// startEcho serves the echo upstream on a loopback port, capped at 128
// streams a connection as the MACP runtime is, until the test ends.
func startEcho(t testing.TB) (*echo, *grpc.Server, string) {
	t.Helper()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxConcurrentStreams(128))
	e := &echo{}
	testpb.RegisterTestServiceServer(srv, e)
	go srv.Serve(up)
	t.Cleanup(srv.Stop)
	return e, srv, up.Addr().String()
}

// startRelay serves a relay with cfg on a loopback port until the test
// ends, and checks that Serve then returns.
func startRelay(t testing.TB, cfg Config) (*Relay, string) {
	t.Helper()
	r, addr, stop, done := runRelay(t, cfg)
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return r, addr
}

// runRelay serves a relay with cfg on a loopback port until stop; done
// receives what Serve returned.
func runRelay(t testing.TB, cfg Config) (r *Relay, addr string, stop func(), done <-chan error) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	// the relay's goroutines carry the label relay=serve, for profiles
	// (go tool pprof -tagfocus relay=serve)
	go pprof.Do(ctx, pprof.Labels("relay", "serve"), func(ctx context.Context) { served <- r.Serve(ctx, lis) })
	return r, lis.Addr().String(), cancel, served
}

func payload(n int) *testpb.Payload {
	return &testpb.Payload{Body: bytes.Repeat([]byte("x"), n)}
}

func TestUnary(t *testing.T) {
	c, _, _ := setup(t, Config{})
	for _, tc := range []struct {
		name string
		size int
		fail bool
	}{
		{"empty", 0, false},
		{"small", 200, false},
		{"one frame", 16 << 10, false},
		{"beyond the stream window", 1 << 20, false},
		{"beyond the connection window", 3 << 20, false},
		{"status from the upstream", 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if tc.fail {
				ctx = metadata.AppendToOutgoingContext(ctx, "fail", "1")
			}
			resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(tc.size)})
			if tc.fail {
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "asked to fail") {
					t.Fatalf("got %v, want the upstream's FailedPrecondition", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(resp.GetPayload().GetBody()); got != tc.size {
				t.Fatalf("echoed %d bytes, want %d", got, tc.size)
			}
		})
	}
}

func TestBidiStream(t *testing.T) {
	for name, cfg := range map[string]Config{
		"defaults": {},
		// DATA waits in its stream while a peer's write buffer is half full
		"small write buffer": {MaxWriteBuffer: 64 << 10},
	} {
		t.Run(name, func(t *testing.T) { bidi(t, cfg) })
	}
}

// bidi echoes 200 messages of growing size on one stream. Its bound is
// generous (120 s; a pass takes about 1 s unloaded); a message slower than
// 5 s is logged with the time since the last one, and a failure dumps every
// goroutine, so that slow (progress, then a late message) tells from stuck
// (a frame relay waiting on a window that never opens).
func bidi(t *testing.T, cfg Config) {
	c, _, _ := setup(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start, last := time.Now(), time.Now()
	fail := func(format string, args ...any) {
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Logf("goroutines:\n%s", b.String())
		t.Fatalf(format, args...)
	}
	for i := range 200 {
		size := 100 + i*997 // up to about 200 KiB: windows fill and drain
		if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: payload(size)}); err != nil {
			fail("send %d after %v (%v since message %d): %v", i, time.Since(start), time.Since(last), i-1, err)
		}
		in, err := s.Recv()
		if err != nil {
			fail("recv %d after %v (%v since message %d): %v", i, time.Since(start), time.Since(last), i-1, err)
		}
		if d := time.Since(last); d > 5*time.Second {
			t.Logf("message %d took %v (%v in all)", i, d, time.Since(start))
		}
		last = time.Now()
		if len(in.GetPayload().GetBody()) != size {
			t.Fatalf("message %d: %d bytes, want %d", i, len(in.GetPayload().GetBody()), size)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
}

// TestManyStreams holds more streams open than one upstream connection
// takes (128): the pool opens more connections, and every stream works.
func TestManyStreams(t *testing.T) {
	const n = 300
	c, e, r := setup(t, Config{MaxStreams: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	streams := make([]testpb.TestService_FullDuplexCallClient, n)
	for i := range streams {
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: payload(10)}); err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	for i, s := range streams {
		if _, err := s.Recv(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if got := e.open.Load(); got != n {
		t.Fatalf("upstream has %d calls open, want %d", got, n)
	}
	r.pools[0].mu.Lock()
	conns := len(r.pools[0].conns)
	r.pools[0].mu.Unlock()
	if conns < 3 {
		t.Fatalf("pool has %d upstream connections for %d streams at 128 each, want >= 3", conns, n)
	}
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Go(func() {
			_ = s.CloseSend()
			_, _ = s.Recv()
		})
	}
	wg.Wait()
}

// TestPoolCap: a pool's own MaxConns overrides MaxUpstreamConns; the
// stream beyond every connection's room is refused.
func TestPoolCap(t *testing.T) {
	for _, tc := range []struct {
		poolConns, open int
	}{{0, 2}, {4, 8}} {
		e, _, up := startEcho(t)
		_, addr := startRelay(t, Config{Upstreams: []Upstream{{Addr: up, MaxStreams: 2, MaxConns: tc.poolConns}}, MaxUpstreamConns: 1})
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		c := testpb.NewTestServiceClient(cc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for i := range tc.open + 1 {
			s, err := c.FullDuplexCall(ctx)
			if err == nil {
				_ = s.Send(&testpb.StreamingOutputCallRequest{Payload: payload(1)}) // io.EOF when refused: Recv tells why
				_, err = s.Recv()
			}
			if i < tc.open && err != nil {
				t.Errorf("pool cap %d: stream %d: %v", tc.poolConns, i, err)
			}
			// refused (REFUSED_STREAM, which grpc-go retries once, then reports
			// as UNAVAILABLE or, racing with its Send, io.EOF)
			if i == tc.open && err == nil {
				t.Errorf("pool cap %d: stream %d beyond the cap was served", tc.poolConns, i)
			}
		}
		if got := e.open.Load(); got != int64(tc.open) {
			t.Errorf("pool cap %d: upstream holds %d calls, want %d", tc.poolConns, got, tc.open)
		}
		cancel()
		cc.Close()
	}
}

// TestCancel: a client that cancels its call resets the stream, and the
// upstream sees the call end.
func TestCancel(t *testing.T) {
	c, e, _ := setup(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: payload(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for e.canceled.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream never saw the canceled call end")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUpstreamGone: when the upstream goes away under an open stream, the
// client's stream ends with an error rather than hanging, and the relay
// forgets the connection.
func TestUpstreamGone(t *testing.T) {
	c, _, r, srv := setupServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: payload(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := s.Recv(); err == nil || ctx.Err() != nil {
		t.Fatalf("after the upstream stopped: %v (context: %v), want the stream to fail at once", err, ctx.Err())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.pools[0].mu.Lock()
		n := len(r.pools[0].conns)
		r.pools[0].mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream connections still pooled after the upstream stopped", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUpstreamDown: with nothing listening upstream, a call fails fast
// with Unavailable instead of hanging. The relay refuses the stream
// (RST_STREAM REFUSED_STREAM, before it reads the body; grpc-go retries it
// once, transparently, then reports UNAVAILABLE). grpc-go's unary call
// reports io.EOF instead when the refusal arrives before it wrote the
// request message: csAttempt.sendMsg turns the failed write into io.EOF,
// which no retry replaces, and invoke returns SendMsg's error without
// asking RecvMsg for the status (grpc-go v1.85.0 stream.go, grpc/grpc-go
// issue 7230). Seen once in 30 loaded runs; a client-side race, not the
// relay's: so io.EOF is accepted too.
func TestUpstreamDown(t *testing.T) {
	// port 1 (tcpmux) has no listener: dials are refused at once
	addr := "127.0.0.1:1"
	_, raddr := startRelay(t, Config{Upstream: addr})
	cc, err := grpc.NewClient(raddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{})
	if status.Code(err) != codes.Unavailable && !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want Unavailable (or io.EOF, grpc-go's unary race)", err)
	}
}

// BenchmarkUnary is one small unary call through the relay, client, relay
// and upstream in this process (with -cpuprofile, -tagfocus relay=serve
// shows the relay's share).
func BenchmarkUnary(b *testing.B) {
	c, _, r := setup(b, Config{})
	ctx := context.Background()
	req := &testpb.SimpleRequest{Payload: payload(200)}
	b.ReportAllocs()
	defer reportUsage(b, usageNow())
	defer reportRelay(b, r, relayCountsOf(r))
	for b.Loop() {
		if _, err := c.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// relayCounts is what the relay counted: its writers' wake-ups and its
// write system calls toward clients and upstreams.
type relayCounts struct{ wakes, handlerWakes, clientWrites, upstreamWrites int64 }

func relayCountsOf(r *Relay) relayCounts {
	return relayCounts{r.writerWakes.Load(), r.handlerWakes.Load(), r.clientWrites.Load(), r.upstreamWrites.Load()}
}

// reportRelay reports, per operation since start, the relay's writer
// wake-ups, its Handler goroutines' wake-ups and its write system calls to
// the client and to the upstream.
func reportRelay(b *testing.B, r *Relay, start relayCounts) {
	end, n := relayCountsOf(r), float64(b.N)
	b.ReportMetric(float64(end.wakes-start.wakes)/n, "writer-wakes/op")
	b.ReportMetric(float64(end.handlerWakes-start.handlerWakes)/n, "handler-wakes/op")
	b.ReportMetric(float64(end.clientWrites-start.clientWrites)/n, "client-writes/op")
	b.ReportMetric(float64(end.upstreamWrites-start.upstreamWrites)/n, "upstream-writes/op")
}

// BenchmarkHandlerUnary is BenchmarkUnary through a Handler: admitted on
// its header list (Admitter), its body buffered, forwarded (Forward) and
// the upstream's whole answer sent to the client, as the MACP front door
// decides a call: the hand-offs between the relay's goroutines a decided
// call costs beyond a passed-through one.
func BenchmarkHandlerUnary(b *testing.B) { benchHandler(b, "forward") }

// BenchmarkHandlerUnaryThen is BenchmarkHandlerUnary forwarding with
// ForwardThen: the upstream's answer is released on the upstream reader,
// without waking the Handler's goroutine.
func BenchmarkHandlerUnaryThen(b *testing.B) { benchHandler(b, "then") }

func benchHandler(b *testing.B, mode string) {
	h := admitter{testHandler: &testHandler{ended: make(chan error, 1)}}
	c, _, r := setup(b, Config{Router: admitRouter{h}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "mode", mode)
	req := &testpb.SimpleRequest{Payload: payload(200)}
	b.ReportAllocs()
	defer reportUsage(b, usageNow())
	defer reportRelay(b, r, relayCountsOf(r))
	for b.Loop() {
		if _, err := c.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// dialH2 connects to addr, sends the client preface and returns the
// connection (10 s deadline) and a framer on it.
func dialH2(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc, http2.NewFramer(nc, nc)
}

// TestRapidReset: a client that opens streams and has them reset faster
// than twice its stream limit a second is cut off with ENHANCE_YOUR_CALM,
// whether it resets them itself (CVE-2023-44487) or makes the relay reset
// them with a stream error (MadeYouReset, CVE-2025-8671): each cost an
// upstream stream.
func TestRapidReset(t *testing.T) {
	_, _, up := startEcho(t)
	_, addr := startRelay(t, Config{Upstream: up, MaxStreams: 8})
	for _, tc := range []struct {
		name  string
		extra []string // header fields beside request's
		reset func(fr *http2.Framer, id uint32) error
	}{
		{"client RST_STREAM", nil, func(fr *http2.Framer, id uint32) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }},
		{"WINDOW_UPDATE overflow", nil, func(fr *http2.Framer, id uint32) error { return fr.WriteWindowUpdate(id, 1<<31-1) }},
		{"DATA beyond content-length", []string{"content-length", "1"}, func(fr *http2.Framer, id uint32) error { return fr.WriteData(id, false, []byte("xx")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, fr := dialH2(t, addr)
			defer nc.Close()
			block := headerBlock(append(slices.Clone(request), tc.extra...)...)
			go func() { // a writer of its own: the relay answers while the client floods
				_ = fr.WriteSettings()
				for id := uint32(1); id < 200; id += 2 {
					if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}) != nil ||
						tc.reset(fr, id) != nil {
						return
					}
				}
			}()
			rd := http2.NewFramer(nil, nc)
			for {
				f, err := rd.ReadFrame()
				if err != nil {
					t.Fatalf("no GOAWAY before %v", err)
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
						t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", ga.ErrCode)
					}
					return
				}
			}
		})
	}
}

// TestUpstreamSilent: an upstream that accepts the connection and then
// says nothing is pinged, given up on, and the call fails long before its
// deadline rather than hanging.
func TestUpstreamSilent(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			nc, err := up.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, nc) }() // reads, never answers
		}
	}()
	_, addr := startRelay(t, Config{Upstream: up.Addr().String(), KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond})
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("call to a silent upstream: %v after %v, want it to fail within a second", err, time.Since(start))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("call to a silent upstream failed after %v, want within about 300 ms", d)
	}
}

// TestPingPolicy pings the relay faster than MinPingInterval: the first
// pings are answered, the fourth too early one ends the connection with
// GOAWAY ENHANCE_YOUR_CALM; with no MinPingInterval every ping is answered.
func TestPingPolicy(t *testing.T) {
	_, _, up := startEcho(t)
	for _, tc := range []struct {
		name  string
		every time.Duration
		calm  bool
	}{{"policed", time.Minute, true}, {"not policed", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startRelay(t, Config{Upstream: up, MinPingInterval: tc.every})
			nc, fr := dialH2(t, addr)
			defer nc.Close()
			_ = fr.WriteSettings()
			acks := 0
			for i := range 6 {
				_ = fr.WritePing(false, [8]byte{byte(i)})
				for answered := false; !answered; {
					f, err := fr.ReadFrame()
					if err != nil {
						t.Fatalf("ping %d: %v", i, err)
					}
					switch f := f.(type) {
					case *http2.PingFrame:
						answered, acks = f.IsAck(), acks+1
					case *http2.GoAwayFrame:
						if !tc.calm || f.ErrCode != http2.ErrCodeEnhanceYourCalm || acks != 3 {
							t.Fatalf("GOAWAY %v after %d answered pings", f.ErrCode, acks)
						}
						return
					}
				}
			}
			if tc.calm {
				t.Fatalf("%d pings answered, want GOAWAY ENHANCE_YOUR_CALM after 3", acks)
			}
		})
	}
}
