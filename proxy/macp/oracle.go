//go:build wardenoracle

package macp

// The grpc-go front door, built only into the test oracle (-tags
// wardenoracle, bin/warden-oracle): a grpc-go server toward clients that
// answers every call the relay answers, through the same admission,
// decision and forwarding code, so that tests can hold both doors to the
// same answers. The product binary serves the relay alone (issue 28).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/admission"
)

// grpcDoorBuilt reports whether this binary holds the grpc-go front door:
// the test oracle's does.
const grpcDoorBuilt = true

// serveGRPC serves the front door with grpc-go on lis until ctx ends.
func (s *Server) serveGRPC(ctx context.Context, lis net.Listener) error {
	lim := s.cfg.Limits.WithDefaults()
	s.conns = listener.Bound(lis, lim.Conns(), s.log)
	lis = s.conns
	var tc *tls.Config
	if !s.cfg.Plaintext {
		t, err := s.loadTLS()
		if err != nil {
			lis.Close()
			return err
		}
		tc, lis = t.Config(), t.Track(lis)
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = t.Watch(wctx, lim.TLSReloadInterval) }()
	}
	srv := s.grpcServer(lim, tc)
	s.log.Info("macp sidecar listening", "listen", lis.Addr().String(), "upstream", s.cfg.Upstream, "plaintext", s.cfg.Plaintext,
		"max_connections", lim.MaxConnections)
	if err := listener.Serve(ctx, srv, lis, s.cfg.ShutdownTimeout, s.log); err != nil {
		return fmt.Errorf("macp serve: %w", err)
	}
	return nil
}

// grpcServer is the grpc-go sidecar, serving TLS with tc when not nil;
// extra options come last.
func (s *Server) grpcServer(lim listener.Limits, tc *tls.Config, extra ...grpc.ServerOption) *grpc.Server {
	srvOpts := append([]grpc.ServerOption{
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(s.handle),
		grpc.MaxRecvMsgSize(s.cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(s.cfg.MaxMessageBytes),
		grpc.InTapHandle(s.bodyTap),
		grpc.StreamInterceptor(s.inFlight),
	}, listener.GRPCServerOptions(lim)...)
	if s.tp != nil {
		srvOpts = append(srvOpts, grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(s.tp), otelgrpc.WithPropagators(propagation.TraceContext{}))))
	}
	if tc != nil {
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(tc)))
	}
	srv := grpc.NewServer(append(srvOpts, extra...)...)
	// Send, the hot path, is a registered unary method; every other method
	// of the service, and every other service, reaches handle.
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "macp.v1.MACPRuntimeService",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Send", Handler: s.send}},
	}, s)
	return srv
}

// bodyTimerKey is the context key of a Send's body timer (see bodyTap).
type bodyTimerKey struct{}

// bodyTap gives a call of one request message (recvOne) body_timeout for
// it, as the relay does: grpc-go bounds the wait for it by nothing, so the
// tap, which runs when the call's header list arrives, cancels the call
// when its timer fires before the handler read the message (bodyArrived).
func (s *Server) bodyTap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if c := s.methods.Lookup(info.FullMethodName); c == admission.CallUnknown || streamed(c, info.FullMethodName) {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return context.WithValue(ctx, bodyTimerKey{}, time.AfterFunc(s.bodyTimeout, cancel)), nil
}

// bodyArrived stops the body timer of a call's context and reports whether
// it was still running (true without one): false means the call was
// cancelled for a message that came too late.
func bodyArrived(ctx context.Context) bool {
	t, ok := ctx.Value(bodyTimerKey{}).(*time.Timer)
	return !ok || t.Stop()
}

// errBodyLate ends a call whose request message did not arrive in time
// (grpc-go has then answered CANCELLED for the cancelled context already).
var errBodyLate = status.Error(codes.DeadlineExceeded, "the request message did not arrive within body_timeout")

// handle admits and dispatches every call but Send by the one method table
// the sidecar and ext_authz share (admission.Gate): a path that is not
// exactly a runtime method or a pass-through service is refused, never
// piped; credentials are checked before any message is read.
func (s *Server) handle(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()
	defer bodyArrived(ctx) // a call refused before its message frees its timer
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "no method in stream")
	}
	if s.methods.Lookup(method) == admission.CallSend { // Send is registered: this is another route to it
		return refuse(ctx, s.gate.Unknown(ctx, method))
	}
	a, md := s.admit(ctx, method)
	ctx = proxy.WithSource(ctx, a.Source) // the stream's decisions record it
	switch {
	case a.Refusal != nil:
		return refuse(ctx, *a.Refusal)
	case streamed(a.Call, method): // StreamSession, a pass-through service's call of any shape
		if a.Anonymous {
			return s.relayAnonymous(ss, method, md)
		}
		return s.streamSession(ss, a.Principal, a.Credentials, s.upstreamContext(ctx, md, a.Principal, a.Credentials))
	}
	req, err := recvOne(ss) // every other call sends one message
	if err != nil {
		return err
	}
	switch {
	case a.Anonymous: // the health service's Check and Watch, public discovery
		return s.relayAnonymous(&oneRequest{ss, req}, method, md)
	case decidedUnary(a.Call):
		m, err := s.grpcUnary(ctx, s.upstreamContext(ctx, md, a.Principal, a.Credentials), a, req)
		if err != nil {
			return err
		}
		return ss.SendMsg(m)
	}
	// the watches, and the calls forwarded after authentication, relayed
	// as streams
	return s.watch(&oneRequest{ss, req}, a, s.upstreamContext(ctx, md, a.Principal, a.Credentials))
}

// headersOf is what the gate reads of a grpc-go call: its metadata md (a
// copy the caller owns, without the chain hand-off header) and its
// verified client chain.
func headersOf(ctx context.Context, method string) (admission.Headers, metadata.MD) {
	md, _ := metadata.FromIncomingContext(ctx)
	if md == nil {
		md = metadata.MD{}
	}
	chain, client := handoff{}.take(ctx, md)
	return admission.Headers{Method: method, Get: md, Names: slices.AppendSeq(make([]string, 0, len(md)), maps.Keys(md)), Chain: chain, Client: client}, md
}

// admit admits a grpc-go call (admission.Gate.Admit) and returns its
// metadata, which upstreamContext makes the runtime's.
func (s *Server) admit(ctx context.Context, method string) (admission.Admission, metadata.MD) {
	h, md := headersOf(ctx, method)
	return s.gate.Admit(s.conns.Context(ctx, h.Client), h), md
}

// refuse maps a refusal onto grpc-go's wire: its status, and its MACP code
// in the macp-error-code trailer, as the runtime sends one.
func refuse(ctx context.Context, r admission.Refusal) error {
	if r.Code != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(macpErrorCode, string(r.Code)))
	}
	return status.Error(r.Status, r.Text)
}

// recvOne reads the one request message of a call of one (every call of
// the runtime but StreamSession, and the health service's Check and
// Watch), which grpc-go serves as a stream (handle), as grpc-go reads a
// call that is not client-streaming and the relay reads it (oneMessage):
// exactly one message, then the end of the request. bodyTap bounds the
// wait.
func recvOne(ss grpc.ServerStream) (*frame, error) {
	f := &frame{}
	err := ss.RecvMsg(f)
	switch {
	case errors.Is(err, io.EOF):
		err = errNoMessage
	case err == nil:
		switch err = ss.RecvMsg(&frame{}); {
		case errors.Is(err, io.EOF):
			err = nil
		case err == nil:
			err = errManyMessages
		}
	}
	if !bodyArrived(ss.Context()) {
		return nil, errBodyLate
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// oneRequest is a call's client side whose one request message was read
// (recvOne): RecvMsg gives it, then io.EOF.
type oneRequest struct {
	grpc.ServerStream
	f *frame
}

func (r *oneRequest) RecvMsg(m any) error {
	f, ok := m.(*frame)
	if !ok {
		return status.Errorf(codes.Internal, "one request: cannot read into %T", m)
	}
	if r.f == nil {
		return io.EOF
	}
	f.b, r.f = r.f.b, nil
	return nil
}

// grpcUnary answers a call decidedUnary takes on the grpc-go door: req is
// its request message, upctx the context of the calls to the runtime.
func (s *Server) grpcUnary(ctx, upctx context.Context, a admission.Admission, req *frame) (any, error) {
	f := &grpcForward{s: s, upctx: upctx, method: a.Method, req: req}
	resp, own, err := s.unary(ctx, upctx, &a, req.b, f.call)
	return f.answer(ctx, resp, own, err)
}

// grpcForward is the forward of a unary call on the grpc-go door: the
// request sent with the upstream client, the runtime's header and trailer
// kept for the client, who gets them when the runtime's answer is its
// answer.
type grpcForward struct {
	s               *Server
	upctx           context.Context
	method          string
	req             *frame
	header, trailer metadata.MD
	err             error // the runtime's answer, when it failed
}

func (f *grpcForward) call() ([]byte, error) {
	resp := &frame{}
	if err := f.s.up.Invoke(f.upctx, f.method, f.req, resp, grpc.Header(&f.header), grpc.Trailer(&f.trailer)); err != nil {
		f.err = f.s.upstreamError(err)
		return nil, f.err
	}
	return resp.b, nil
}

// answer maps unary's outcome onto grpc-go's wire: Warden's own answer, or
// the runtime's with its header and trailer.
func (f *grpcForward) answer(ctx context.Context, resp []byte, own proto.Message, err error) (any, error) {
	switch {
	case own != nil:
		return own, nil
	case err != nil && err != f.err:
		return nil, grpcError(ctx, err)
	}
	if relayable(f.header) {
		_ = grpc.SetHeader(ctx, f.header)
	}
	_ = grpc.SetTrailer(ctx, f.trailer)
	if err != nil {
		return nil, err
	}
	return &frame{b: resp}, nil
}

// grpcError is an error of unary's on grpc-go's wire: a refusal with its
// MACP code (refuse).
func grpcError(ctx context.Context, err error) error {
	var r refusal
	if errors.As(err, &r) {
		return refuse(ctx, r.Refusal)
	}
	return err
}

// relayable reports whether the runtime's response headers hold anything
// to relay: grpc-go sends its own content-type and drops a relayed one.
func relayable(header metadata.MD) bool {
	for k := range header {
		if k != "content-type" {
			return true
		}
	}
	return false
}

// send answers a Send on the grpc-go door. It is registered as a unary
// method (cheaper than the generic stream path every other call takes);
// the answer is either Warden's refusal or the runtime's bytes. The caller
// is admitted before its message is read.
func (s *Server) send(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (_ any, err error) {
	ctx, f := s.enf.Begin(ctx, s.door, nil)
	defer func() { f.End(failedCode(status.Code(err))) }()
	a, md := s.admit(ctx, methodSend)
	if a.Refusal != nil {
		bodyArrived(ctx)
		return nil, refuse(ctx, *a.Refusal)
	}
	req := &frame{}
	err = dec(req)
	if !bodyArrived(ctx) {
		return nil, errBodyLate
	}
	if err != nil {
		return nil, err
	}
	return s.grpcUnary(ctx, s.upstreamContext(ctx, md, a.Principal, a.Credentials), a, req)
}

// flightStream is a call's stream with its flight's context
// (proxy.Enforcer.Begin), which every decision made on the call reads.
type flightStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s flightStream) Context() context.Context { return s.ctx }

// inFlight is the grpc-go sidecar's stream interceptor: every call but
// Send (a registered unary method: send begins its own) is one flight,
// whose server span is otelgrpc's.
func (s *Server) inFlight(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, f := s.enf.Begin(ss.Context(), s.door, nil)
	err := h(srv, flightStream{ServerStream: ss, ctx: ctx})
	f.End(failedCode(status.Code(err)))
	return err
}
