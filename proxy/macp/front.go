package macp

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/frames"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/admission"
)

// Transports of the MACP sidecar's front door.
const (
	// TransportGRPC serves every call with grpc-go: a server toward clients
	// and a client call toward the runtime per call. Retired from the
	// product: only the test oracle (-tags wardenoracle, oracle.go) serves
	// it, for the tests that hold the relay to grpc-go's answers; the
	// product's Validate refuses it.
	TransportGRPC = "grpc"
	// TransportRelay serves the front door with the HTTP/2 frame relay
	// (proxy/frames), which answers every request itself: the runtime's
	// unary calls (Send, the control calls, GetSession, ListSessions, the
	// policy registrations, the calls forwarded after authentication) and
	// the health service's Check, their original bytes relayed to the
	// runtime; its streams (StreamSession, the watches), the health Watch
	// and the other pass-through services (reflection); and what grpc-go
	// would refuse before any handler (grpcHeader), an unknown path, or a
	// body that is not one message for a call of one (oneMessage), with
	// grpc-go's answer. No grpc-go server runs.
	TransportRelay = "relay"
)

// poolRuntime is the relay's one upstream pool: the runtime.
const poolRuntime = 0

// serveRelay serves the front door with the frame relay on lis until ctx
// ends.
func (s *Server) serveRelay(ctx context.Context, lis net.Listener) error {
	lim := s.cfg.Limits.WithDefaults()
	s.conns = listener.Bound(lis, lim.Conns(), s.log)
	lis = s.conns
	if !s.cfg.Plaintext {
		t, err := s.loadTLS()
		if err != nil {
			lis.Close()
			return err
		}
		// TLS records are read and written raw, as the relay does a
		// plaintext connection (frames.RawListener)
		lis = tls.NewListener(t.Track(frames.RawListener(lis)), t.Config("h2"))
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = t.Watch(wctx, lim.TLSReloadInterval) }()
	}
	dialRuntime, err := s.runtimeDialer(lim)
	if err != nil {
		lis.Close()
		return err
	}
	r, err := frames.New(frames.Config{
		Upstreams: []frames.Upstream{
			// below the runtime's 128: a stream the relay reset counts
			// there a little longer
			poolRuntime: {Addr: s.cfg.Upstream, Dial: dialRuntime, MaxStreams: streamsPerConn, NoRequestTrailers: true},
		},
		Router: newRouter(s),
		// listener.Cap holds the connections to lim.MaxConnections, fairly
		// between addresses; the slack covers those it closed for a
		// newcomer that the relay has not yet seen end
		MaxConns:         lim.MaxConnections + capSlack,
		MaxStreams:       listener.GRPCMaxStreams,
		IdleTimeout:      lim.IdleTimeout,
		HandshakeTimeout: lim.GRPCConnectionTimeout,
		KeepaliveTime:    lim.GRPCKeepaliveTime,
		KeepaliveTimeout: lim.GRPCKeepaliveTimeout,
		MinPingInterval:  lim.GRPCKeepaliveMinTime,
		DialTimeout:      lim.UpstreamConnectTimeout,
		MaxBackoff:       lim.UpstreamBackoffMax,
		DrainTimeout:     s.cfg.ShutdownTimeout,
		Logger:           s.log,
	})
	if err != nil {
		lis.Close()
		return fmt.Errorf("macp relay: %w", err)
	}
	s.log.Info("macp sidecar listening", "listen", lis.Addr().String(), "upstream", s.cfg.Upstream, "plaintext", s.cfg.Plaintext,
		"max_connections", lim.MaxConnections, "transport", TransportRelay)
	if err := r.Serve(ctx, lis); err != nil {
		return fmt.Errorf("macp serve: %w", err)
	}
	return nil
}

// capSlack is the relay's connections beyond listener.Cap's.
const capSlack = 64

// runtimeDialer connects the relay to the runtime: TCP, then TLS offering
// h2 unless upstream_plaintext.
func (s *Server) runtimeDialer(lim listener.Limits) (func(context.Context) (net.Conn, error), error) {
	d := listener.Dialer(lim)
	if s.cfg.UpstreamPlaintext {
		return func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", s.cfg.Upstream) }, nil
	}
	host, _, err := net.SplitHostPort(s.cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("macp.upstream: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, NextProtos: []string{"h2"}}
	if s.cfg.UpstreamCAFile != "" {
		pool, err := listener.CertPool(s.cfg.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("macp upstream tls: %w", err)
		}
		tc.RootCAs = pool
	}
	td := &tls.Dialer{NetDialer: d, Config: tc}
	return func(ctx context.Context) (net.Conn, error) { return td.DialContext(ctx, "tcp", s.cfg.Upstream) }, nil
}

// router sends every request to callHandler, which answers it: a call of
// one request message (every call of the runtime but StreamSession, the
// health service's Check and Watch; and whatever callHandler refuses from
// its header list) has its body buffered up to one message of
// max_message_bytes, within body_timeout; StreamSession and the other
// pass-through services' calls (reflection) are read as they come, without
// a bound on how long (a stream each way).
//
// The path is looked up here, once per call: the handler of its kind
// (handlers, one per admission.Call, made with the router) hands the kind
// to the gate and to Handle, which do not look it up again.
type router struct {
	s        *Server
	handlers [admission.CallPassThrough + 1]callHandler
}

func newRouter(s *Server) *router {
	r := &router{s: s}
	for c := range r.handlers {
		r.handlers[c] = callHandler{s, admission.Call(c)}
	}
	return r
}

func (r *router) Route(header []hpack.HeaderField, _ net.Addr, _ *tls.ConnectionState) frames.Route {
	path := headerValue(header, ":path") // the only one: the relay refuses a repeated pseudo-header
	call := r.s.methods.Lookup(path)
	h := &r.handlers[call]
	if streamed(call, path) {
		return frames.Route{Handler: h, Stream: true, Timeout: callTimeout(header)}
	}
	return frames.Route{Handler: h, MaxBody: grpcPrefix + r.s.cfg.MaxMessageBytes, BodyTimeout: r.s.bodyTimeout, Timeout: callTimeout(header)}
}

// callTimeout is the call's grpc-timeout as grpcHeader reads it (the last
// one that decodes), 0 for none or one already past: the relay ends the
// call's context then (frames.Route.Timeout). A call whose grpc-timeout
// does not decode, or is past, grpcHeader refuses.
func callTimeout(header []hpack.HeaderField) time.Duration {
	var t time.Duration
	for _, f := range header {
		if f.Name == "grpc-timeout" {
			if d, err := decodeTimeout(f.Value); err == nil {
				t = d
			}
		}
	}
	return max(t, 0)
}

// streamed reports whether the relay reads a call's request as it comes
// (see router): call is path's kind.
func streamed(call admission.Call, path string) bool {
	switch call {
	case admission.CallStream:
		return true
	case admission.CallPassThrough:
		return path != healthCheck && path != healthWatch
	}
	return false
}

// The gRPC health service's calls: the relay passes them through itself
// when the service is passed through, Check as a unary call
// (passAnonymous), Watch as a stream of one request (relayWatch).
const (
	healthCheck = "/grpc.health.v1.Health/Check"
	healthWatch = "/grpc.health.v1.Health/Watch"
)

// callHandler answers the calls the relay answers itself, admitted on
// their header list before any of their body is kept (frames.Admitter):
// call is the kind of the calls it is routed (router).
type callHandler struct {
	s    *Server
	call admission.Call
}

// relayAdmitted is a call admitted on the relay: what grpcHeader read (the
// call's metadata, whose map leaves out the identity fields handoff owns),
// and the admission.
type relayAdmitted struct {
	g  grpcRequest
	a  admission.Admission
	f  proxy.Flight // the call's flight, in the admitted call's allocation: Handle's context
	up upstreamCtx  // a decided call's context of the calls to the runtime, over f

	// Handle's, held here so that they cost no allocation of their own:
	// its forward and, for a decided call forwarded without waiting
	// (relayDecide), its decision and what Answer needs besides.
	fw      relayForward
	d       proxy.Decision
	ct      string
	endCall func()
}

// Abandon ends the flight of a call whose stream went before Handle
// (reset, body timeout, connection gone): Handle, which ends it otherwise,
// is never called for it, or only once the flight ended (frames.Abandoner).
func (a *relayAdmitted) Abandon() { a.f.End(false) }

// Admit answers what grpc-go's server would answer before any handler
// (grpcHeader), then admits the call from its header list with the one gate
// every door uses (an unknown path is refused there); a refusal is answered
// before any of its body is kept.
func (h callHandler) Admit(ctx context.Context, header []hpack.HeaderField, cs *tls.ConnectionState) (any, *frames.Response) {
	g, early := grpcHeader(header)
	if early != nil {
		return nil, early
	}
	adm := &relayAdmitted{g: g}
	md := &adm.g.md
	// the metadata's names as grpcHeader collected them (no array of their
	// own: the gate's Source keeps its Headers), less the fields handoff
	// owns, which the map leaves out (a client rarely sends one: read off
	// the names, and the map made for it)
	names := md.names
	if slices.ContainsFunc(names, handoff{}.taken) {
		md.whole()
		names = slices.DeleteFunc(slices.Clone(names), handoff{}.taken)
	}
	f := &adm.f
	h.s.enf.BeginIn(f, ctx, h.s.door, h.s.traceFrom(md))
	client := addrString(frames.Peer(ctx))
	adm.a = h.s.gate.Admit(h.s.conns.Context(f, client), admission.Headers{Method: g.path, Call: h.call, Get: md, Names: names, Chain: verifiedChain(cs), Client: client})
	if r := adm.a.Refusal; r != nil {
		f.End(failedCode(r.Status))
		resp := refusalAnswer(g.ct, *r)
		return nil, &resp
	}
	// Handle ends the flight; a stream that goes before it is abandoned
	// (Abandon) instead.
	return adm, nil
}

// traceFrom is where the server span of a call answered on the relay takes
// its parent from: the call's metadata when Warden traces (the relay has no
// otelgrpc to start it), nil otherwise.
func (s *Server) traceFrom(md *relayMD) propagation.TextMapCarrier {
	if s.tp == nil {
		return nil
	}
	return mdCarrier(md.whole())
}

// Handle answers one call the relay admitted, as the grpc-go door answers
// it: StreamSession and the streaming pass-through calls read as they come;
// a call of one message once its body is whole, with grpc-go's answer when
// the body is not exactly one uncompressed message (oneMessage), else
// Warden's own answer or the runtime's whole answer to the original bytes
// once Warden read it. The relay gives Handle the context it gave Admit
// (the exchange's one), which the call's flight wraps: Handle works on the
// flight, which carries the flight and its span with no context made for
// them.
func (h callHandler) Handle(_ context.Context, req *frames.Request) (answer frames.Response) {
	s := h.s
	adm := req.Admitted.(*relayAdmitted) // Admit admitted every call Handle is called for
	var ctx context.Context = &adm.f
	later := false // the answer is Answer's, and so is the flight's end
	defer func() {
		if !later {
			adm.f.End(answerFailed(answer))
		}
	}()
	ct := adm.g.ct // the call's grpc-timeout ends ctx already (router)
	switch {
	case adm.a.Call == admission.CallStream: // never anonymous: the gate refuses it without credentials
		return s.relaySession(ctx, req, adm)
	case streamed(adm.a.Call, adm.a.Method): // a pass-through service's call of any shape
		return s.relayPassThrough(ctx, req, adm)
	}
	msg, err := oneMessage(req.Body, req.Truncated, s.cfg.MaxMessageBytes, adm.g.comp)
	if err != nil {
		return statusAnswer(ct, err)
	}
	if req.Body[0] != 0 {
		// compressed: the runtime gets the message as grpc-go's client
		// would send it, uncompressed (forwardHeader drops grpc-encoding)
		req.Body = grpcFrame(msg)
	}
	switch {
	case adm.a.Method == healthWatch, s.watchCall(adm.a.Call) && !s.methods.Unary(adm.a.Method):
		return s.relayWatch(ctx, req, ct, adm, msg)
	case adm.a.Anonymous:
		return s.passAnonymous(ctx, req, ct, adm.a.Method)
	}
	if !decidedUnary(adm.a.Call) { // forwarded after authentication: within the caller's share of the runtime's streams
		done, err := s.streams.take(adm.a.Principal.ID)
		if err != nil {
			return statusAnswer(ct, err)
		}
		defer done()
	}
	f := &adm.fw
	adm.up = upstreamCtx{Context: ctx, s: s, md: &adm.g.md, p: &adm.a.Principal, c: &adm.a.Credentials}
	*f = relayForward{s: s, ctx: ctx, req: req, name: strings.TrimPrefix(adm.a.Method, "/"), up: &adm.up, upctx: &adm.up}
	if adm.a.Call == admission.CallSend || adm.a.Call == admission.CallControl {
		answer, later = s.relayDecide(ct, adm, msg)
		return answer
	}
	_, own, err := s.unary(ctx, f.upctx, &adm.a, msg, f.call)
	return f.answer(ct, own, err)
}

// relayDecide decides a Send or control call as unary does (decide), but
// forwards an allowed one without waiting for the runtime's answer
// (frames.Request.ForwardThen): the decision is settled on the runtime's
// Ack, and the client answered, by Answer, on the goroutine that read the
// Ack, which saves this one being woken for it. later reports that Answer
// answers; otherwise the answer is Warden's own, now.
func (s *Server) relayDecide(ct string, adm *relayAdmitted, msg []byte) (_ frames.Response, later bool) {
	f := &adm.fw
	d, own, err := s.judge(f.ctx, f.upctx, &adm.a, msg)
	if own != nil || err != nil {
		return f.answer(ct, own, err), false
	}
	adm.d, adm.ct = d, ct
	fctx, endCall := s.clientSpan(f.ctx, f.name)
	var room [16]hpack.HeaderField // encoded as the stream opens: it need not outlive the call
	if err := f.req.ForwardThen(f.ctx, poolRuntime, f.header(room[:0], fctx), adm); err != nil {
		endCall()
		return adm.settle(f.read(frames.Response{}, err)), false
	}
	adm.endCall = endCall
	return frames.Response{}, true
}

// Answer settles a decided call forwarded by relayDecide on the runtime's
// answer (resp, err) and makes the client's, on the goroutine that read
// the answer (frames.Answerer), which it must not hold up: a decision whose
// settling forgets its session, which may wait for the session's lock, is
// settled and answered on a goroutine of its own.
func (adm *relayAdmitted) Answer(resp frames.Response, err error) (frames.Response, bool) {
	adm.endCall()
	m, err := adm.fw.read(resp, err)
	ak, err := adm.fw.s.ackOf(&adm.a, m, err)
	if forgets(adm.d, ak, err) {
		go func() { adm.fw.req.Respond(adm.settleAck(ak, err)) }()
		return frames.Response{}, false
	}
	return adm.settleAck(ak, err), true
}

// settle settles a decided call whose forward (m, err as relayForward.read
// returns them) did not reach the runtime, and makes the client's answer.
func (adm *relayAdmitted) settle(m []byte, err error) frames.Response {
	ak, err := adm.fw.s.ackOf(&adm.a, m, err)
	return adm.settleAck(ak, err)
}

// settleAck settles a decided call on the runtime's Ack (or its failure),
// makes the client's answer and ends the call's flight.
func (adm *relayAdmitted) settleAck(ak ack, err error) frames.Response {
	f := &adm.fw
	f.s.settle(f.ctx, adm.d, ak, err)
	answer := f.answer(adm.ct, nil, err)
	adm.f.End(answerFailed(answer))
	return answer
}

// passAnonymous forwards a unary call admitted without credentials (the
// health service's Check) within the anonymous callers' share of the
// runtime's streams, as relayAnonymous does on the grpc-go door: no
// credential or identity header of the client's reaches the runtime, whose
// answer is the client's.
func (s *Server) passAnonymous(ctx context.Context, req *frames.Request, ct, method string) frames.Response {
	done, err := s.streams.take("")
	if err != nil {
		return statusAnswer(ct, err)
	}
	defer done()
	f := &relayForward{s: s, ctx: ctx, req: req, name: strings.TrimPrefix(method, "/"), upctx: metadata.NewOutgoingContext(ctx, metadata.MD{})}
	if _, err := f.call(); err != nil && err != f.err {
		return statusAnswer(ct, err)
	}
	return f.resp
}

// answerFailed reports whether the relay's answer is an error of Warden's
// or the runtime's (failedCode of its grpc-status).
func answerFailed(resp frames.Response) bool {
	st := resp.Trailer
	if st == nil {
		st = resp.Header
	}
	n, err := strconv.ParseUint(headerValue(st, "grpc-status"), 10, 32)
	return err == nil && failedCode(codes.Code(n))
}
