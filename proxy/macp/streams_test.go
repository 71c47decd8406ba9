package macp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/cputime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// watchingRuntime is a fakeRuntime whose WatchSignals sends its header
// (watchOpen), big ambient signals of 1 MiB, then stays open until the
// caller leaves.
type watchingRuntime struct {
	*fakeRuntime
	big int
}

// watchOpen is the header field watchingRuntime opens a watch with: the
// client of a watch that passes nothing learns it was admitted.
const watchOpen = "watch-open"

func (w watchingRuntime) WatchSignals(_ *macpv1.WatchSignalsRequest, ss macpv1.MACPRuntimeService_WatchSignalsServer) error {
	if err := ss.SendHeader(metadata.Pairs(watchOpen, "1")); err != nil {
		return err
	}
	for i := range w.big {
		env := &macpv1.Envelope{MacpVersion: "1.0", MessageType: "Signal", MessageId: "sig-" + string(rune('a'+i)), Sender: "agent://x", Payload: make([]byte, 1<<20)}
		if err := ss.Send(&macpv1.WatchSignalsResponse{Envelope: env}); err != nil {
			return err
		}
	}
	<-ss.Context().Done()
	return nil
}

// TestRelayedStreamCaps: the calls the sidecar relays on streams of their own
// are bounded per principal, for anonymous callers (the gRPC health Watch is
// relayed without credentials) and in total, so that nobody can take every
// stream the runtime's connections hold: Send is answered however many such
// streams were asked for.
func TestRelayedStreamCaps(t *testing.T) { onBothDoors(t, testRelayedStreamCaps) }

func testRelayedStreamCaps(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, enf := happyPath(t)
	_, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return watchingRuntime{f, 0} },
		func(srv *grpc.Server) { healthpb.RegisterHealthServer(srv, health.NewServer()) })
	conn := startSidecarWith(t, enf, Config{Upstream: addr, Transport: transport, Streams: StreamLimits{Max: 8, PerPrincipal: 3, Anonymous: 2, Watches: 8, WatchesPerPrincipal: 8}})
	hc := healthpb.NewHealthClient(conn)
	mc := macpv1.NewMACPRuntimeServiceClient(conn)
	open := func(who string) error {
		if who == "" {
			w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = w.Recv()
			}
			return err
		}
		_, err := openWatch(ctx, mc, who)
		return err
	}
	for i, tc := range []struct {
		who  string // "" for no credentials
		want codes.Code
	}{
		{"", codes.OK}, {"", codes.OK}, {"", codes.ResourceExhausted}, // anonymous: 2
		{"agent://a", codes.OK}, {"agent://a", codes.OK}, {"agent://a", codes.OK}, {"agent://a", codes.ResourceExhausted}, // per principal: 3
		{"agent://b", codes.OK}, {"agent://b", codes.OK}, {"agent://b", codes.OK}, // 8 in all
		{"agent://c", codes.ResourceExhausted}, {"", codes.ResourceExhausted},
	} {
		if got := status.Code(open(tc.who)); got != tc.want {
			t.Errorf("stream %d as %q: %v, want %v", i, tc.who, got, tc.want)
		}
	}
	st := tr.Steps[0].Request
	sctx, scancel := context.WithTimeout(as(ctx, st.Credentials.Bearer), 5*time.Second)
	defer scancel()
	if r, err := mc.Send(sctx, &macpv1.SendRequest{Envelope: st.Envelope}); err != nil || !r.GetAck().GetOk() {
		t.Errorf("Send beside the held streams: %v %v", err, r.GetAck())
	}
}

// TestWatchesShare (issue 24 item 20): ten principals holding their
// maximum of idle watches filled the relayed-stream cap, and every
// StreamSession was refused. Watches now hold at most their share of the
// cap and a few per principal, the rest stays for StreamSession, and a
// watch that passes nothing for watch_idle ends (UNAVAILABLE) and gives its
// place back. Before, the third and fourth rows were admitted, the
// StreamSession refused, and no watch ended.
func TestWatchesShare(t *testing.T) { onBothDoors(t, testWatchesShare) }

func testWatchesShare(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, enf := happyPath(t)
	_, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return watchingRuntime{f, 0} })
	// watch_idle must outlast the admissions below (the watches would end
	// and give their places back): 500 ms did not, once, for a test
	// binary starved under GOMAXPROCS=1 at load 15
	const watchIdle = 2 * time.Second
	conn := startSidecarWith(t, enf, Config{Upstream: addr, Transport: transport, Streams: StreamLimits{Max: 4, PerPrincipal: 4, Watches: 2, WatchesPerPrincipal: 1, WatchIdle: watchIdle}})
	mc := macpv1.NewMACPRuntimeServiceClient(conn)
	watch := func(who string) (ended <-chan error, err error) { return openWatch(ctx, mc, who) }
	began := time.Now()
	first, err := watch("agent://a")
	if err != nil {
		t.Fatal(err)
	}
	idle := []<-chan error{first}
	for i, tc := range []struct {
		who  string
		want codes.Code
	}{
		{"agent://a", codes.ResourceExhausted}, // one watch a principal
		{"agent://b", codes.OK},
		{"agent://c", codes.ResourceExhausted}, // the watches' share is full
	} {
		ended, err := watch(tc.who)
		if status.Code(err) != tc.want {
			t.Errorf("watch %d as %s: %v, want %v", i, tc.who, err, tc.want)
		}
		if ended != nil {
			idle = append(idle, ended)
		}
	}
	// The rest of the cap stays for StreamSession.
	for _, who := range []string{"agent://c", "agent://d"} {
		st, err := mc.StreamSession(as(ctx, who))
		if err == nil {
			_, err = st.Header()
		}
		if err != nil {
			t.Fatalf("StreamSession as %s beside the watches: %v", who, err)
		}
	}
	// The idle watches end and give their places back.
	for i, ended := range idle {
		select {
		case err = <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("idle watch %d did not end", i)
		}
		if status.Code(err) != codes.Unavailable || time.Since(began) < watchIdle {
			t.Fatalf("idle watch %d ended after %v with %v, want UNAVAILABLE after watch_idle", i, time.Since(began), err)
		}
	}
	if _, err := watch("agent://c"); err != nil {
		t.Fatalf("a watch once the idle ones ended: %v", err)
	}
}

// openWatch opens a watch on watchingRuntime as who: admitted once the
// runtime's header came (ended then reports how it ends), refused when the
// call ended without it. (A fixed wait for the end read a refusal slower
// than 200 ms as an admission.)
func openWatch(ctx context.Context, mc macpv1.MACPRuntimeServiceClient, who string) (ended <-chan error, err error) {
	w, err := mc.WatchSignals(as(ctx, who), &macpv1.WatchSignalsRequest{})
	if err != nil {
		return nil, err
	}
	if h, _ := w.Header(); len(h.Get(watchOpen)) == 0 {
		if _, err = w.Recv(); err == nil {
			err = errors.New("a watch answered without the runtime's header")
		}
		return nil, err
	}
	done := make(chan error, 1)
	go func() { _, err := w.Recv(); done <- err }()
	return done, nil
}

// TestRelayClientNotReading: a relayed call whose client does not read (a
// small HTTP/2 window never opened) is ended with RESOURCE_EXHAUSTED once
// more than the queue waits for it, and gives its stream back: the same
// principal, allowed one relayed stream, opens another.
func TestRelayClientNotReading(t *testing.T) { onBothDoors(t, testRelayClientNotReading) }

func testRelayClientNotReading(t *testing.T, transport string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, enf := happyPath(t)
	_, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return watchingRuntime{f, 20} })
	conn := startSidecarWith(t, enf, Config{Upstream: addr, Transport: transport, Streams: StreamLimits{PerPrincipal: 1}})
	slow, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	stalled, err := macpv1.NewMACPRuntimeServiceClient(slow).WatchSignals(as(ctx, "agent://a"), &macpv1.WatchSignalsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.Header(); err != nil { // admitted: it holds the principal's one stream
		t.Fatal(err)
	}
	// Unread, the stalled watch gives its stream back: the principal's one
	// relayed stream is free again.
	for began := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		again, err := macpv1.NewMACPRuntimeServiceClient(conn).WatchSignals(as(ctx, "agent://a"), &macpv1.WatchSignalsRequest{})
		if err == nil {
			_, err = again.Recv() // the first signal, or the end of a watch not read on
		}
		if err == nil || status.Convert(err).Message() != status.Convert(errTooManyStreams).Message() {
			break
		}
		if time.Since(began) > 10*time.Second {
			t.Fatalf("the stalled watch still holds its stream: %v", err)
		}
	}
	for err == nil { // read at last: what was queued, then the end
		_, err = stalled.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("the stalled watch ended with %v, want RESOURCE_EXHAUSTED", err)
	}
}

// onBothDoors runs test on the relay's front door and on the grpc-go one
// where it is built (transports).
func onBothDoors(t *testing.T, test func(t *testing.T, transport string)) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) { test(t, transport) })
	}
}

// TestRelayWatchesLeaveNoGoroutines: watches and StreamSessions answered on
// the relay, ended by their clients while the runtime's streams stay open,
// leave no goroutine behind (the clientWriter's, the guard's, the up half
// reading the client, the upstream stream's): after a first round warms the
// relay's worker pool, a second round of as many ends with as many
// goroutines as before it.
func TestRelayWatchesLeaveNoGoroutines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, enf := happyPath(t)
	fake, addr := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return streamingRuntime{watchingRuntime{f, 1}} })
	sid := sessionID()
	fake.sessions[sid] = &fakeSession{meta: &macpv1.SessionMetadata{SessionId: sid, Initiator: "agent://w0", Participants: []string{"agent://w0", "agent://w1"}}}
	_, sidecar := serveSidecarServer(t, enf, Config{Upstream: addr, Transport: TransportRelay})
	conn := startSidecarConn(t, sidecar)
	mc := macpv1.NewMACPRuntimeServiceClient(conn)
	round := func() {
		wctx, wcancel := context.WithCancel(ctx)
		for i := range 10 {
			w, err := mc.WatchSignals(as(wctx, fmt.Sprintf("agent://w%d", i)), &macpv1.WatchSignalsRequest{})
			if err == nil {
				_, err = w.Recv() // the one signal: the watch is open
			}
			if err != nil {
				t.Fatalf("watch %d: %v", i, err)
			}
			st, err := mc.StreamSession(as(wctx, fmt.Sprintf("agent://w%d", i%2)))
			if err == nil {
				err = st.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid})
			}
			if err == nil {
				_, err = st.Recv() // the session's one message of history: the stream is open
			}
			if err != nil {
				t.Fatalf("StreamSession %d: %v", i, err)
			}
		}
		wcancel()
	}
	settle := func(want int) int {
		n := runtime.NumGoroutine()
		for end := time.Now().Add(5 * time.Second); n > want && time.Now().Before(end); n = runtime.NumGoroutine() {
			time.Sleep(50 * time.Millisecond)
		}
		return n
	}
	round()
	before := settle(0)
	round()
	if after := settle(before); after > before {
		t.Errorf("%d goroutines after ten watches and ten StreamSessions ended, %d before", after, before)
	}
}

// streamingRuntime is a watchingRuntime whose StreamSession is a
// historyRuntime's with one message of history.
type streamingRuntime struct{ watchingRuntime }

func (r streamingRuntime) StreamSession(ss macpv1.MACPRuntimeService_StreamSessionServer) error {
	return historyRuntime{r.fakeRuntime, 1, 16, nil}.StreamSession(ss)
}

// signalRuntime is a fakeRuntime whose WatchSignals sends n ambient signals
// of 256 bytes as fast as the watcher takes them, then ends: each send takes
// a credit the watcher returns on each receipt, so no more than the credits
// wait anywhere (without them a watcher slower than the runtime fills
// Warden's bounded client queue, and Warden ends its watch by design).
type signalRuntime struct {
	*fakeRuntime
	n      *int
	credit chan struct{}
}

func (r signalRuntime) WatchSignals(_ *macpv1.WatchSignalsRequest, ss macpv1.MACPRuntimeService_WatchSignalsServer) error {
	resp := &macpv1.WatchSignalsResponse{Envelope: &macpv1.Envelope{MacpVersion: "1.0", MessageType: "Signal", MessageId: "sig", Sender: "agent://x", Payload: make([]byte, 256)}}
	for range *r.n {
		select {
		case <-r.credit:
		case <-ss.Context().Done():
			return ss.Context().Err()
		}
		if err := ss.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkSidecarWatchSignals measures one ambient signal relayed to a
// watcher end to end (the runtime's stream read, the filter, the bounded
// client queue, the write to the client); BenchmarkSidecarWatchSignalsRelay
// with the frame relay as the front door, which answers watches itself.
func BenchmarkSidecarWatchSignals(b *testing.B)      { benchWatchSignals(b, TransportGRPC) }
func BenchmarkSidecarWatchSignalsRelay(b *testing.B) { benchWatchSignals(b, TransportRelay) }

func benchWatchSignals(b *testing.B, transport string) {
	n := new(int)
	credit := make(chan struct{}, 128) // about 40 KB of signals: within a stream's fair share of the queue budget (64 KiB)
	for range cap(credit) {
		credit <- struct{}{}
	}
	_, addr := startFakeRuntimeWith(b, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return signalRuntime{f, n, credit} })
	c := macpv1.NewMACPRuntimeServiceClient(startSidecar(b, devEnforcer(b), addr, transport))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	*n = b.N
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cputime.Used())
	w, err := c.WatchSignals(as(ctx, "agent://w"), &macpv1.WatchSignalsRequest{})
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if _, err := w.Recv(); err != nil {
			b.Fatal(err)
		}
		credit <- struct{}{} // room: the credits held and in flight are cap(credit)
	}
}
