package frames

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// testRouter sends UnaryCall to testHandler and FullDuplexCall to pool 1,
// both with bodyTimeout.
type testRouter struct {
	h           *testHandler
	maxBody     int
	bodyTimeout time.Duration
	timeout     time.Duration // Route.Timeout
}

func (r testRouter) Route(header []hpack.HeaderField, _ net.Addr, _ *tls.ConnectionState) Route {
	for _, f := range header {
		if f.Name == ":path" && f.Value == "/grpc.testing.TestService/UnaryCall" {
			return Route{Handler: r.h, MaxBody: r.maxBody, BodyTimeout: r.bodyTimeout, Timeout: r.timeout}
		}
	}
	return Route{Pool: 1, BodyTimeout: r.bodyTimeout}
}

// testHandler acts on the request's "mode" header: "local" answers with
// PERMISSION_DENIED itself, "forward" forwards to pool 0 and releases the
// answer, "replace" forwards and answers FAILED_PRECONDITION naming the
// upstream's grpc-status, "wait" waits for the stream's end, "late" waits
// for it and then forwards; "then" forwards with ForwardThen and releases
// the answer (thenAnswer), "then-later" too, from a goroutine of its own.
type testHandler struct {
	ended   chan error    // "wait": ctx.Err() once the stream ended; "late": Forward's error
	waiting chan struct{} // when set, "wait" and "late" tell it they wait for the stream's end
}

// wait is Handle waiting for the stream's end, having told h.waiting so.
func (h *testHandler) wait(ctx context.Context) {
	if h.waiting != nil {
		h.waiting <- struct{}{}
	}
	<-ctx.Done()
}

func (h *testHandler) Handle(ctx context.Context, req *Request) Response {
	mode := ""
	for _, f := range req.Header {
		if f.Name == "mode" {
			mode = f.Value
		}
	}
	if req.Truncated {
		return grpcStatus(codes.ResourceExhausted, "too large")
	}
	switch mode {
	case "local":
		return grpcStatus(codes.PermissionDenied, "refused locally")
	case "wait":
		h.wait(ctx)
		h.ended <- ctx.Err()
		return Response{}
	case "late":
		h.wait(ctx)
		_, err := req.Forward(ctx, 0, req.Header)
		h.ended <- err
		return Response{}
	case "then", "then-later":
		a := &thenAnswer{h: h, req: req, later: mode == "then-later"}
		if err := req.ForwardThen(ctx, 0, req.Header, a); err != nil {
			return grpcStatus(codes.Unavailable, err.Error())
		}
		a.returned.Store(true)
		return grpcStatus(codes.Internal, "the Handler's answer, which ForwardThen's replaces")
	}
	resp, err := req.Forward(ctx, 0, req.Header)
	if err != nil {
		return grpcStatus(codes.Unavailable, err.Error())
	}
	if _, err := req.Forward(ctx, 0, req.Header); err != ErrForwarded {
		return grpcStatus(codes.Internal, "forwarded twice")
	}
	if mode == "replace" {
		for _, f := range resp.Trailer {
			if f.Name == "grpc-status" {
				return grpcStatus(codes.FailedPrecondition, "upstream said "+f.Value)
			}
		}
	}
	return resp
}

// thenAnswer answers a request testHandler forwarded with ForwardThen: the
// upstream's answer, now or (later) from a goroutine of its own; an error
// goes to the handler's ended and the client is told UNAVAILABLE with it.
type thenAnswer struct {
	h        *testHandler
	req      *Request
	later    bool
	returned atomic.Bool // Handle returned
}

func (a *thenAnswer) Answer(resp Response, err error) (Response, bool) {
	switch {
	case !a.returned.Load():
		return grpcStatus(codes.Internal, "answered before Handle returned"), true
	case err != nil:
		a.h.ended <- err
		return grpcStatus(codes.Unavailable, err.Error()), true
	case a.later:
		go func() {
			time.Sleep(10 * time.Millisecond)
			a.req.Respond(resp)
		}()
		return Response{}, false
	}
	return resp, true
}

func grpcStatus(c codes.Code, msg string) Response {
	return Response{Header: []hpack.HeaderField{
		{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"},
		{Name: "grpc-status", Value: strconv.Itoa(int(c))}, {Name: "grpc-message", Value: msg},
	}}
}

func TestRoute(t *testing.T) {
	a, _, upA := startEcho(t)
	b, _, upB := startEcho(t)
	h := &testHandler{ended: make(chan error, 1), waiting: make(chan struct{}, 1)}
	_, addr := startRelay(t, Config{
		Upstreams: []Upstream{{Addr: upA}, {Addr: upB}},
		Router:    testRouter{h: h, maxBody: 64 << 10, bodyTimeout: 5 * time.Second}, // met by every call
	})
	c := testClient(t, addr)
	for _, tc := range []struct {
		mode    string
		size    int
		code    codes.Code
		msg     string
		reached int64 // UnaryCalls upstream A gets
	}{
		{"local", 10, codes.PermissionDenied, "refused locally", 0},
		{"forward", 10, codes.OK, "", 1},
		{"forward", 60 << 10, codes.OK, "", 1}, // several DATA frames each way, within the bound
		{"replace", 10, codes.FailedPrecondition, "upstream said 0", 1},
		{"forward", 70 << 10, codes.ResourceExhausted, "too large", 0},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			before := a.unary.Load()
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "mode", tc.mode), 5*time.Second)
			defer cancel()
			resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(tc.size)})
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.msg {
				t.Fatalf("status %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			if tc.code == codes.OK && len(resp.GetPayload().GetBody()) != tc.size {
				t.Errorf("answer carries %d bytes, want %d", len(resp.GetPayload().GetBody()), tc.size)
			}
			if got := a.unary.Load() - before; got != tc.reached {
				t.Errorf("upstream A got %d calls, want %d", got, tc.reached)
			}
		})
	}
	t.Run("pool B passes through", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := s.Send(&testpb.StreamingOutputCallRequest{Payload: payload(i + 1)}); err != nil {
				t.Fatal(err)
			}
			if m, err := s.Recv(); err != nil || len(m.GetPayload().GetBody()) != i+1 {
				t.Fatalf("echo %d: %v", i, err)
			}
		}
		if b.open.Load() != 1 || a.open.Load() != 0 {
			t.Errorf("streams open: A %d, B %d; want the stream on B", a.open.Load(), b.open.Load())
		}
		_ = s.CloseSend()
	})
	// the client cancels once the Handler waits (a cancel on a timer could
	// come before the call reached the relay: the Handler never runs)
	cancelWaiting := func(t *testing.T, mode string) error {
		t.Helper()
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "mode", mode))
		defer cancel()
		called := make(chan error, 1)
		go func() {
			_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(1)})
			called <- err
		}()
		select {
		case <-h.waiting:
		case err := <-called:
			t.Fatalf("the call ended before the Handler waited: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("the Handler did not start waiting")
		}
		cancel()
		return waitErr(t, called)
	}
	t.Run("client cancel ends the handler", func(t *testing.T) {
		if err := cancelWaiting(t, "wait"); status.Code(err) != codes.Canceled {
			t.Errorf("call: %v", err)
		}
		select {
		case err := <-h.ended:
			if err == nil || !strings.Contains(err.Error(), "canceled") {
				t.Errorf("handler context: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the handler's context did not end with the stream")
		}
	})
	// a Handler that forwards after its client left opens nothing upstream
	// (and its upstream leg is its own: the client connection's reader
	// ending the stream does not touch it, which -race checks)
	t.Run("forward after the client left", func(t *testing.T) {
		before := a.unary.Load()
		if err := cancelWaiting(t, "late"); status.Code(err) != codes.Canceled {
			t.Errorf("call: %v", err)
		}
		select {
		case err := <-h.ended:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Forward after the client left: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the handler did not end")
		}
		time.Sleep(100 * time.Millisecond)
		if got := a.unary.Load() - before; got != 0 || a.open.Load() != 0 {
			t.Errorf("upstream A got %d calls (%d streams open), want none", got, a.open.Load())
		}
	})
}

// TestBodyTimeout opens streams that send HEADERS and nothing more: past
// the Route's BodyTimeout each is reset (CANCEL), the upstream call of a
// passed-through one ends, and the Handler of a buffered one never runs.
func TestBodyTimeout(t *testing.T) {
	a, _, upA := startEcho(t)
	b, _, upB := startEcho(t)
	h := &testHandler{ended: make(chan error, 1)}
	_, addr := startRelay(t, Config{
		Upstreams: []Upstream{{Addr: upA}, {Addr: upB}},
		Router:    testRouter{h: h, maxBody: 64 << 10, bodyTimeout: 200 * time.Millisecond},
	})
	for _, path := range []string{"/grpc.testing.TestService/FullDuplexCall", "/grpc.testing.TestService/UnaryCall"} {
		nc, fr := dialH2(t, addr)
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
			{Name: ":authority", Value: "relay"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
			_ = enc.WriteField(f)
		}
		_ = fr.WriteSettings()
		start := time.Now()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("%s: no RST_STREAM before %v", path, err)
			}
			if rst, ok := f.(*http2.RSTStreamFrame); ok {
				if rst.ErrCode != http2.ErrCodeCancel {
					t.Errorf("%s: RST_STREAM %v, want CANCEL", path, rst.ErrCode)
				}
				break
			}
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("%s: reset after %v, before the body timeout", path, d)
		}
		nc.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if b.open.Load() != 0 || a.unary.Load() != 0 {
		t.Errorf("upstream calls open %d, unary calls %d; want none", b.open.Load(), a.unary.Load())
	}
}

// gate is a Handler that answers OK once released.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func (g gate) Route([]hpack.HeaderField, net.Addr, *tls.ConnectionState) Route {
	return Route{Handler: g}
}

func (g gate) Handle(context.Context, *Request) Response {
	g.entered <- struct{}{}
	<-g.release
	return grpcStatus(codes.AlreadyExists, "answered")
}

// TestDrain ends Serve while a stream is being handled: the stream still
// gets its answer, the client is told to open no more (GOAWAY), and Serve
// returns once the connection closed, well before DrainTimeout.
func TestDrain(t *testing.T) {
	_, _, up := startEcho(t)
	g := gate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	_, addr, stop, served := runRelay(t, Config{Upstream: up, Router: g, DrainTimeout: 10 * time.Second})
	defer stop()
	c := testClient(t, addr)
	answered := make(chan error, 1)
	go func() {
		_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		answered <- err
	}()
	<-g.entered
	start := time.Now()
	stop()
	time.Sleep(100 * time.Millisecond) // the GOAWAY reaches the client
	select {
	case err := <-served:
		t.Fatalf("Serve returned with a stream open: %v", err)
	default:
	}
	close(g.release)
	if err := <-answered; status.Code(err) != codes.AlreadyExists {
		t.Errorf("the stream open at shutdown: %v, want its answer", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Serve returned %v after its context ended", d)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("Serve did not return once the last stream ended")
	}
}

// TestNoRequestTrailers sends a request with trailers through a relay
// whose upstream takes none: the upstream sees the body end without them
// (grpc-go would end the whole connection for trailers on a stream it
// already answered); another relay passes them on.
func TestNoRequestTrailers(t *testing.T) {
	got := make(chan string, 1)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Trailer.Get("x-t")
	}), Protocols: new(http.Protocols), ReadHeaderTimeout: 10 * time.Second}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(up) }()
	t.Cleanup(func() { srv.Close() })
	for _, drop := range []bool{true, false} {
		_, addr := startRelay(t, Config{Upstreams: []Upstream{{Addr: up.Addr().String(), NoRequestTrailers: drop}}})
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(nc, http2.ClientPreface)
		fr := http2.NewFramer(nc, nc)
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/"},
			{Name: ":authority", Value: "relay"}, {Name: "trailer", Value: "x-t"}} {
			_ = enc.WriteField(f)
		}
		_ = fr.WriteSettings()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		_ = fr.WriteData(1, false, []byte("body"))
		hb.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: "x-t", Value: "v"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true})
		want := map[bool]string{true: "", false: "v"}[drop]
		select {
		case tr := <-got:
			if tr != want {
				t.Errorf("NoRequestTrailers %v: the upstream saw trailer %q, want %q", drop, tr, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("NoRequestTrailers %v: the request did not end upstream", drop)
		}
		nc.Close()
	}
}

// testClient is a TestService client of the relay at addr, closed when the
// test ends.
func testClient(t *testing.T, addr string) testpb.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// admitter is testHandler that admits a stream on its header list first:
// "refuse" is refused, anything else admitted after delay (while the
// client is still sending its body).
type admitter struct {
	*testHandler
	delay time.Duration
}

func (a admitter) Admit(_ context.Context, header []hpack.HeaderField, _ *tls.ConnectionState) (any, *Response) {
	for _, f := range header {
		if f.Name == "mode" && f.Value == "refuse" {
			r := grpcStatus(codes.PermissionDenied, "not admitted")
			return nil, &r
		}
	}
	time.Sleep(a.delay)
	return "admitted", nil
}

func (a admitter) Handle(ctx context.Context, req *Request) Response {
	if req.Admitted != "admitted" {
		return grpcStatus(codes.Internal, "handled without its admission")
	}
	return a.testHandler.Handle(ctx, req)
}

type admitRouter struct{ h admitter }

func (r admitRouter) Route([]hpack.HeaderField, net.Addr, *tls.ConnectionState) Route {
	return Route{Handler: r.h, MaxBody: 1 << 20, BodyTimeout: 10 * time.Second}
}

// TestAdmitter: a Handler that is an Admitter admits each stream on its
// header list before the body is kept. A refused stream is answered with
// the refusal and never reaches the upstream; an admitted one whose body is
// larger than the stream window (so it stalls until the admission returned
// the window) reaches the Handler whole, with what Admit returned.
func TestAdmitter(t *testing.T) {
	a, _, up := startEcho(t)
	h := admitter{testHandler: &testHandler{ended: make(chan error, 1)}, delay: 100 * time.Millisecond}
	_, addr := startRelay(t, Config{Upstream: up, Router: admitRouter{h}})
	c := testClient(t, addr)
	for _, tc := range []struct {
		mode    string
		size    int
		code    codes.Code
		reached int64
	}{
		{"refuse", 10, codes.PermissionDenied, 0},
		{"refuse", 300 << 10, codes.PermissionDenied, 0},
		{"forward", 10, codes.OK, 1},
		{"forward", 300 << 10, codes.OK, 1}, // past the 64 KiB stream window
	} {
		t.Run(tc.mode+"/"+strconv.Itoa(tc.size), func(t *testing.T) {
			before := a.unary.Load()
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "mode", tc.mode), 5*time.Second)
			defer cancel()
			resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(tc.size), ResponseSize: 1})
			if status.Code(err) != tc.code {
				t.Fatalf("UnaryCall: %v, want %v", err, tc.code)
			}
			if err == nil && resp.GetPayload() == nil {
				t.Error("no echo")
			}
			if got := a.unary.Load() - before; got != tc.reached {
				t.Errorf("%d calls reached the upstream, want %d", got, tc.reached)
			}
		})
	}
}

// TestHandlerWakes: the relay counts its Handler goroutines' wake-ups, the
// hand-offs a decided call costs: one for the exchange handed to a worker,
// and one more for a Forward that waits for its answer (woken by the
// upstream reader; it waits unless the answer was quicker than the worker,
// which a loaded machine may make happen now and then); none for a
// ForwardThen, whose answer the upstream reader releases (now, or later
// from a goroutine of the Handler's), after Handle returned.
func TestHandlerWakes(t *testing.T) {
	_, _, up := startEcho(t)
	h := &testHandler{ended: make(chan error, 1)}
	r, addr := startRelay(t, Config{Upstream: up, Router: testRouter{h: h, maxBody: 64 << 10, bodyTimeout: 5 * time.Second}})
	c := testClient(t, addr)
	const calls = 20
	for _, tc := range []struct {
		mode     string
		code     codes.Code
		min, max int64
	}{
		{"local", codes.PermissionDenied, calls, calls},
		{"forward", codes.OK, calls + 1, 2 * calls},
		{"then", codes.OK, calls, calls},
		{"then-later", codes.OK, calls, calls},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "mode", tc.mode), 5*time.Second)
			defer cancel()
			before := r.handlerWakes.Load()
			for i := range calls {
				resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload(10 + i)})
				if status.Code(err) != tc.code {
					t.Fatalf("UnaryCall: %v, want %v", err, tc.code)
				}
				if err == nil && len(resp.GetPayload().GetBody()) != 10+i {
					t.Fatalf("the answer carries %d bytes, want the echo of %d", len(resp.GetPayload().GetBody()), 10+i)
				}
			}
			if got := r.handlerWakes.Load() - before; got < tc.min || got > tc.max {
				t.Errorf("%d Handler wake-ups for %d calls, want %d to %d", got, calls, tc.min, tc.max)
			}
		})
	}
}

// TestForwardThen: when the stream's context ends before the upstream
// answered a ForwardThen (the client reset the stream; its Route.Timeout
// passed), the Answerer gets the context's error and the upstream stream
// is reset. (TestHandlerWakes has the answers that come.)
func TestForwardThen(t *testing.T) {
	e, _, up := startEcho(t)
	h := &testHandler{ended: make(chan error, 1)}
	_, addr := startRelay(t, Config{Upstream: up, Router: testRouter{h: h, maxBody: 64 << 10, bodyTimeout: 5 * time.Second}})
	c := testClient(t, addr)
	// The client cancels once the upstream has the call (no deadline: a
	// grpc-timeout would reach the upstream too, which could then reset
	// the stream before the client does, and a timer could fire before
	// the Handler forwarded).
	t.Run("client reset", func(t *testing.T) {
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "mode", "then", "hang", "1"))
		defer cancel()
		before, reached := e.hung.Load(), e.unary.Load()
		called := make(chan error, 1)
		go func() {
			_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
			called <- err
		}()
		waitFor(t, func() bool { return e.unary.Load() == reached+1 }, "the upstream to get the call")
		cancel()
		if err := waitErr(t, called); status.Code(err) != codes.Canceled {
			t.Fatalf("UnaryCall: %v, want the client's Canceled", err)
		}
		if err := waitErr(t, h.ended); !errors.Is(err, context.Canceled) {
			t.Errorf("Answer got %v, want context.Canceled", err)
		}
		waitFor(t, func() bool { return e.hung.Load() == before+1 }, "the upstream's call canceled")
	})
	t.Run("route timeout", func(t *testing.T) {
		_, addr := startRelay(t, Config{Upstream: up, Router: testRouter{h: h, maxBody: 64 << 10, timeout: time.Second}})
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "mode", "then", "hang", "1"), 5*time.Second)
		defer cancel()
		before := e.hung.Load()
		_, err := testClient(t, addr).UnaryCall(ctx, &testpb.SimpleRequest{})
		if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != context.DeadlineExceeded.Error() {
			t.Fatalf("UnaryCall: %v, want the Answerer's UNAVAILABLE naming the deadline", err)
		}
		if err := waitErr(t, h.ended); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Answer got %v, want context.DeadlineExceeded", err)
		}
		waitFor(t, func() bool { return e.hung.Load() == before+1 }, "the upstream's call canceled")
	})
}

// waitErr is the next error on ch, within 5 s.
func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("no error came")
		return nil
	}
}

// waitFor waits up to 5 s for cond, naming what in the failure.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for %s", what)
		}
	}
}

// abandonHandler admits every stream as an Abandoner (after delay) and
// counts the streams handled and abandoned.
type abandonHandler struct {
	delay              time.Duration
	handled, abandoned atomic.Int32
}

type abandonWatch struct{ h *abandonHandler }

func (w abandonWatch) Abandon() { w.h.abandoned.Add(1) }

func (h *abandonHandler) Admit(context.Context, []hpack.HeaderField, *tls.ConnectionState) (any, *Response) {
	time.Sleep(h.delay)
	return abandonWatch{h}, nil
}

func (h *abandonHandler) Handle(context.Context, *Request) Response {
	h.handled.Add(1)
	return grpcStatus(codes.OK, "")
}

func (h *abandonHandler) Route([]hpack.HeaderField, net.Addr, *tls.ConnectionState) Route {
	return Route{Handler: h, MaxBody: 1 << 20, BodyTimeout: 200 * time.Millisecond}
}

// TestAbandoner: an admitted stream that goes before Handle (reset by
// its client, before or after Admit returned; its connection closed; its
// body late) is abandoned once and never handled; one handled is never
// abandoned.
func TestAbandoner(t *testing.T) {
	_, _, up := startEcho(t)
	for _, tc := range []struct {
		name  string
		delay time.Duration
		after func(nc net.Conn, fr *http2.Framer) // after HEADERS without END_STREAM
		want  [2]int32                            // handled, abandoned
	}{
		{"handled", 0, func(_ net.Conn, fr *http2.Framer) { _ = fr.WriteData(1, true, nil) }, [2]int32{1, 0}},
		{"reset", 0, func(_ net.Conn, fr *http2.Framer) { _ = fr.WriteRSTStream(1, http2.ErrCodeCancel) }, [2]int32{0, 1}},
		{"reset while admitting", 100 * time.Millisecond, func(_ net.Conn, fr *http2.Framer) { _ = fr.WriteRSTStream(1, http2.ErrCodeCancel) }, [2]int32{0, 1}},
		{"connection closed", 0, func(nc net.Conn, _ *http2.Framer) { time.Sleep(50 * time.Millisecond); nc.Close() }, [2]int32{0, 1}},
		{"body late", 0, func(net.Conn, *http2.Framer) {}, [2]int32{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &abandonHandler{delay: tc.delay}
			_, addr := startRelay(t, Config{Upstream: up, Router: h})
			nc, fr := dialH2(t, addr)
			defer nc.Close()
			_ = fr.WriteSettings()
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(request...), EndHeaders: true})
			tc.after(nc, fr)
			deadline := time.Now().Add(5 * time.Second)
			for [2]int32{h.handled.Load(), h.abandoned.Load()} != tc.want {
				if time.Now().After(deadline) {
					t.Fatalf("handled %d, abandoned %d; want %v", h.handled.Load(), h.abandoned.Load(), tc.want)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // nothing more comes
			if got := [2]int32{h.handled.Load(), h.abandoned.Load()}; got != tc.want {
				t.Errorf("handled, abandoned = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExchangeAllocs: a stream a Handler handles costs one allocation for
// its two legs, its exchange and its context (the client's address,
// Forward's answer and the context live in the exchange; 3 before the
// context did, the context.WithCancel and its cancel function, 5 before
// the address, 7 before the legs shared it); one with a deadline
// (Route.Timeout) costs two more, the deadline's timer and its function (5
// in all before: context.WithTimeout's 4); and the client's address is a string
// already, as proxy/macp asks for it on every call (1 allocation before).
// A passed-through stream costs one, its legs.
func TestExchangeAllocs(t *testing.T) {
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	c := &conn{r: &Relay{}, peer: newPeerAddr(client)}
	rt := Route{Handler: &abandonHandler{}, MaxBody: 1 << 20}
	if got := Peer(newStream(c, 1, -1, rt, nil).x.ctx); got == nil || got.String() != "127.0.0.1:4242" || got.Network() != "tcp" {
		t.Fatalf("Peer = %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { newStream(c, 1, -1, rt, nil).x.xc.cancel(context.Canceled) }); n > 1 {
		t.Errorf("%.0f allocations for a handled stream (its legs, exchange and context), want 1", n)
	}
	timed := rt
	timed.Timeout = time.Hour
	if n := testing.AllocsPerRun(100, func() { newStream(c, 1, -1, timed, nil).x.xc.cancel(context.Canceled) }); n > 3 {
		t.Errorf("%.0f allocations for a handled stream with a deadline (its legs, exchange and context, the deadline's timer and function), want 3", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = newStream(c, 1, -1, Route{}, nil) }); n > 1 {
		t.Errorf("%.0f allocations for a passed-through stream, want 1", n)
	}
	ctx := newStream(c, 1, -1, rt, nil).x.ctx
	if n := testing.AllocsPerRun(100, func() { _ = Peer(ctx).String() }); n > 0 {
		t.Errorf("%.0f allocations for the client's address, want none", n)
	}
}
