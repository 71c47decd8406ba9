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
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

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
	// Transport is the front door: "relay" (the default and the only one
	// of the product; the HTTP/2 frame relay, every MACP call decided on
	// it), or "grpc" (a grpc-go server) in the test oracle alone, built
	// with -tags wardenoracle, which the relay is tested against. See
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
	case "", TransportRelay:
	case TransportGRPC:
		if !grpcDoorBuilt {
			errs = append(errs, errGRPCDoorRetired)
		}
	default:
		errs = append(errs, fmt.Errorf("macp.transport: %q is not relay (the only MACP front door)", c.Transport))
	}
	return errors.Join(errs...)
}

// errGRPCDoorRetired refuses TransportGRPC where the grpc-go front door
// is not built (the product).
var errGRPCDoorRetired = errors.New(`macp.transport: "grpc": the grpc-go front door was retired; the relay (transport relay, the default) is the only MACP front door, and the grpc-go one is built only into the test oracle (go build -tags wardenoracle)`)

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
	gate     *admission.Gate
	// door is MACP's requests at the sidecar (their flights: Begin).
	door *proxy.Door
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
		gate: admission.New(methods, enf, cfg.PublicDiscovery, log), door: enf.Door(admission.Requests(), proxy.DoorSidecar),
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

// Serve is Run on a listener the caller opened: the relay front door, or
// the grpc-go one where it is built (the test oracle, serveGRPC).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if s.cfg.FrontDoor() == TransportGRPC {
		return s.serveGRPC(ctx, lis)
	}
	return s.serveRelay(ctx, lis)
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

// Full method names.
const (
	service      = admission.MACPService
	methodSend   = service + "Send"
	methodStream = service + "StreamSession"
	methodGet    = service + "GetSession"
)

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

// addrString is a client's address as logged ("" when unknown).
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
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
	return metadata.NewOutgoingContext(ctx, s.upstreamMD(md, p, c))
}

// upstreamMD is upstreamContext's metadata: md, changed in place.
func (s *Server) upstreamMD(md metadata.MD, p authn.Principal, c authn.Credentials) metadata.MD {
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
	return md
}

// principalHeader is the identity header Warden owns; a client's copy is
// never forwarded.
const principalHeader = "x-warden-principal"
