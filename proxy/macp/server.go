// Package macp is Warden's MACP transport adapter: a gRPC server that speaks
// macp.v1.MACPRuntimeService, decides every session-scoped message with
// MACP's decision (proxy/macp/sessions) and forwards what is allowed, byte for byte, to the upstream
// runtime. Methods it does not inspect pass through as raw frames, so newer
// runtimes keep working.
package macp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/proxy/macp/sessions"
)

// Config is the MACP sidecar's configuration.
type Config struct {
	// Listen is the address the sidecar serves on (host:port).
	Listen string `yaml:"listen" json:"listen"`
	// Upstream is the runtime's address (host:port).
	Upstream string `yaml:"upstream" json:"upstream"`
	// Plaintext serves without TLS; UpstreamPlaintext dials the runtime
	// without TLS. Both must be set explicitly.
	Plaintext         bool `yaml:"plaintext" json:"plaintext"`
	UpstreamPlaintext bool `yaml:"upstream_plaintext" json:"upstream_plaintext"`
	// TLS: the listener's certificate and key; ClientCAFile turns on mTLS.
	CertFile     string `yaml:"cert_file" json:"cert_file"`
	KeyFile      string `yaml:"key_file" json:"key_file"`
	ClientCAFile string `yaml:"client_ca_file" json:"client_ca_file"`
	// TLS is the listener's TLS material when the caller loaded it (warden
	// serve, to reload it on SIGHUP); nil: read from the files when serving.
	TLS *listener.TLS `yaml:"-" json:"-"`
	// UpstreamCAFile verifies the runtime's certificate (system roots if empty).
	UpstreamCAFile string `yaml:"upstream_ca_file" json:"upstream_ca_file"`
	// MaxMessageBytes bounds one gRPC message in either direction.
	MaxMessageBytes int `yaml:"max_message_bytes" json:"max_message_bytes"`
	// PublicDiscovery lets Initialize, GetManifest, ListModes, ListRoots and
	// the other discovery RPCs through without credentials.
	PublicDiscovery bool `yaml:"public_discovery" json:"public_discovery"`
	// ShutdownTimeout bounds how long in-flight calls may drain on shutdown.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
	// PassThrough are the gRPC services (package.Service) forwarded without
	// credentials besides the runtime's own; nil means gRPC health and
	// reflection. Every other path is refused with UNIMPLEMENTED.
	PassThrough []string `yaml:"pass_through" json:"pass_through"`
	// UpstreamTokensFile maps principals authenticated by client
	// certificate to the token presented to the runtime for them (the
	// runtime's own token file serves); their client-sent credentials are
	// stripped. Without an entry the call reaches the runtime with none.
	UpstreamTokensFile string `yaml:"upstream_tokens_file" json:"upstream_tokens_file"`
	// CredentialCheck is how often an open stream's credential is checked
	// again (expiry, revocation by reload or JWKS change); default 1s.
	CredentialCheck time.Duration `yaml:"credential_check" json:"credential_check"`
	// Limits bounds the listener's connections and the reconnects to the
	// runtime; zero fields take listener's defaults.
	Limits listener.Limits `yaml:"limits" json:"limits"`
	// Streams bounds the relayed calls held open (StreamSession, the
	// watches, pass-through); zero fields take the defaults.
	Streams StreamLimits `yaml:"streams" json:"streams"`
	// Transport is the front door: "relay" (the default; the HTTP/2 frame
	// relay, every MACP call decided on it) or "grpc" (grpc-go server and
	// client, kept as the oracle the relay is tested against). See
	// TransportGRPC and TransportRelay.
	Transport string `yaml:"transport" json:"transport"`
}

// Defaults.
const (
	DefaultMaxMessageBytes = 4 << 20
	DefaultShutdownTimeout = 10 * time.Second
)

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("macp.listen: required"))
	}
	if c.Upstream == "" {
		errs = append(errs, errors.New("macp.upstream: required"))
	}
	if !c.Plaintext && (c.CertFile == "" || c.KeyFile == "") {
		errs = append(errs, errors.New("macp: cert_file and key_file are required unless plaintext is set"))
	}
	if c.MaxMessageBytes < 0 {
		errs = append(errs, errors.New("macp.max_message_bytes: negative"))
	}
	if c.CredentialCheck < 0 {
		errs = append(errs, errors.New("macp.credential_check: negative"))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("macp.limits: %w", err))
	}
	if err := c.Streams.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("macp.streams: %w", err))
	}
	switch c.Transport {
	case "", TransportGRPC, TransportRelay:
	default:
		errs = append(errs, fmt.Errorf("macp.transport: %q is neither grpc nor relay", c.Transport))
	}
	return errors.Join(errs...)
}

// FrontDoor is the transport the sidecar serves with: Transport, or
// TransportRelay when it is empty.
func (c Config) FrontDoor() string {
	if c.Transport == "" {
		return TransportRelay
	}
	return c.Transport
}

// Server is the MACP sidecar.
type Server struct {
	cfg     Config
	methods admission.Methods
	tokens  authn.UpstreamTokens
	enf     *proxy.Enforcer
	// sessions is the MACP decision, on enf, shared with ext_authz when
	// both run in one process.
	sessions *sessions.Decider
	log      *slog.Logger
	tp       trace.TracerProvider
	up       grpc.ClientConnInterface
	streams  *streamCaps
	queued   *queueBudget  // what the relayed calls' clients have waiting
	pages    handle.Sealer // ListSessions tokens (list.go)
	srv      *grpc.Server
	gate     *admission.Gate
	// conns is the front door's listener, set by Serve before serving: a
	// call whose credential is accepted proves its client's connection
	// (authn.Proven).
	conns *listener.Capped
	// bodyTimeout bounds the wait for a unary call's request message
	// (limits body_timeout).
	bodyTimeout time.Duration
}

// Upstream is the connections to the runtime, shared by the sidecar and the
// Rebuilder: a small pool (see connPool), so that held streams never use up
// the runtime's streams on one connection. It connects lazily, on the first
// call.
type Upstream struct{ conns *connPool }

// DialUpstream prepares the connection to cfg.Upstream. With a tracer
// provider, calls to the runtime are traced and carry the trace context.
func DialUpstream(cfg Config, tp trace.TracerProvider) (*Upstream, error) {
	if cfg.Upstream == "" {
		return nil, errors.New("macp.upstream: required")
	}
	cfg = cfg.withDefaults()
	creds := insecure.NewCredentials()
	if !cfg.UpstreamPlaintext {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.UpstreamCAFile != "" {
			pool, err := listener.CertPool(cfg.UpstreamCAFile)
			if err != nil {
				return nil, fmt.Errorf("macp upstream tls: %w", err)
			}
			tc.RootCAs = pool
		}
		creds = credentials.NewTLS(tc)
	}
	// Reconnects follow the runtime back within about a second.
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, listener.GRPCDialOptions(cfg.Limits.WithDefaults())...)
	if tp != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{}))))
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}),
		grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(cfg.MaxMessageBytes)))
	conns, err := newConnPool(func() (*grpc.ClientConn, error) {
		conn, err := grpc.NewClient(cfg.Upstream, opts...)
		if err != nil {
			return nil, fmt.Errorf("macp upstream %s: %w", cfg.Upstream, err)
		}
		return conn, nil
	}, streamsPerConn, maxUpstreamConns)
	if err != nil {
		return nil, err
	}
	return &Upstream{conns: conns}, nil
}

// Close closes the connections.
func (u *Upstream) Close() error { return u.conns.Close() }

// Ready reports whether the runtime is reachable: an idle connection is asked
// to connect, a failing one is not ready.
func (u *Upstream) Ready() error {
	conn := u.conns.first()
	switch st := conn.GetState(); st {
	case connectivity.Ready:
		return nil
	case connectivity.Idle:
		conn.Connect()
		return errors.New("upstream connection idle; connecting")
	default:
		return fmt.Errorf("upstream connection %s", st)
	}
}

func (c Config) withDefaults() Config {
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.PassThrough == nil {
		c.PassThrough = admission.DefaultPassThrough
	}
	if c.CredentialCheck == 0 {
		c.CredentialCheck = proxy.DefaultCredentialCheck
	}
	return c
}

// New builds the sidecar over dec, the MACP decision (and dec's
// Enforcer); tp, when not nil, traces every call. It opens no sockets and
// starts no goroutines; Run does.
func New(cfg Config, dec *sessions.Decider, up *Upstream, log *slog.Logger, tp trace.TracerProvider) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	enf := dec.Enforcer()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	var tokens authn.UpstreamTokens
	if cfg.UpstreamTokensFile != "" {
		var err error
		if tokens, err = authn.LoadUpstreamTokens(cfg.UpstreamTokensFile); err != nil {
			return nil, fmt.Errorf("macp.upstream_tokens_file: %w", err)
		}
	}
	pages, err := newPageSealer()
	if err != nil {
		return nil, fmt.Errorf("macp list tokens: %w", err)
	}
	methods := admission.NewMethods(cfg.PassThrough)
	return &Server{cfg: cfg, methods: methods, tokens: tokens, enf: enf, sessions: dec, log: log, tp: tp, up: up.conns, streams: newStreamCaps(cfg.Streams),
		gate:   admission.New(methods, enf, cfg.PublicDiscovery, log),
		queued: &queueBudget{max: cfg.Streams.WithDefaults().QueuedBytes}, pages: pages,
		bodyTimeout: cfg.Limits.WithDefaults().BodyTimeout}, nil
}

// Run serves until ctx ends, then stops accepting and drains in-flight calls
// for at most the shutdown timeout.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("macp listen: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve is Run on a listener the caller opened.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if s.cfg.FrontDoor() == TransportRelay {
		return s.serveRelay(ctx, lis)
	}
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
	s.srv = s.grpcServer(lim, tc)
	s.log.Info("macp sidecar listening", "listen", lis.Addr().String(), "upstream", s.cfg.Upstream, "plaintext", s.cfg.Plaintext,
		"max_connections", lim.MaxConnections)
	if err := listener.Serve(ctx, s.srv, lis, s.cfg.ShutdownTimeout, s.log); err != nil {
		return fmt.Errorf("macp serve: %w", err)
	}
	return nil
}

// loadTLS is the listener's TLS material: cfg.TLS, or read from the files.
func (s *Server) loadTLS() (*listener.TLS, error) {
	if s.cfg.TLS != nil {
		return s.cfg.TLS, nil
	}
	t, err := listener.NewTLS(s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile, s.log)
	if err != nil {
		return nil, fmt.Errorf("macp tls: %w", err)
	}
	return t, nil
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
	if s.methods.Lookup(info.FullMethodName) == admission.CallUnknown || s.streamed(info.FullMethodName) {
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

// Full method names.
const (
	service      = admission.MACPService
	methodSend   = service + "Send"
	methodStream = service + "StreamSession"
	methodGet    = service + "GetSession"
)

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
	case s.streamed(method): // StreamSession, a pass-through service's call of any shape
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

// relayAnonymous forwards a call without credentials, within the anonymous
// callers' share of the runtime's streams: md, the call's metadata, loses
// every credential and identity header, so that nothing unchecked reaches
// the runtime as an identity.
func (s *Server) relayAnonymous(ss serverStream, method string, md metadata.MD) error {
	done, err := s.streams.take("")
	if err != nil {
		return err
	}
	defer done()
	delete(md, principalHeader)
	delete(md, authn.HeaderAuthorization)
	delete(md, authn.HeaderMACPToken)
	return s.relay(ss, method, metadata.NewOutgoingContext(ss.Context(), md), nil)
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
	return admission.Headers{Method: method, Get: md.Get, Chain: chain, Client: client}, md
}

// addrString is a client's address as logged ("" when unknown).
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
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

// macpErrorCode is the trailer the runtime names a refusal's MACP code in.
const macpErrorCode = "macp-error-code"

// upstreamContext is ctx with the metadata the runtime receives for a call
// made as p: the caller's metadata md (changed in place) without the identity headers Warden
// owns, and the credential the runtime can check for p. A credential the
// client sent is forwarded unchanged when it is what p was authenticated
// from; when p was authenticated by something the runtime cannot see (a
// client certificate), client credentials are stripped and the configured
// upstream token for p, if any, is presented instead.
func (s *Server) upstreamContext(ctx context.Context, md metadata.MD, p authn.Principal, c authn.Credentials) context.Context {
	if md == nil {
		md = metadata.MD{}
	}
	delete(md, principalHeader)
	if t, replace := s.tokens.Upstream(p, c); replace {
		delete(md, authn.HeaderAuthorization)
		delete(md, authn.HeaderMACPToken)
		if t != "" {
			md.Set(authn.HeaderAuthorization, "Bearer "+t)
		}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// principalHeader is the identity header Warden owns; a client's copy is
// never forwarded.
const principalHeader = "x-warden-principal"
