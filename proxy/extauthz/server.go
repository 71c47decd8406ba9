// Package extauthz runs Warden as an Envoy external authorization service
// (envoy.service.auth.v3.Authorization/Check). Envoy buffers a request, sends
// its headers and body, and forwards or refuses it on Warden's answer. Warden
// sees one request at a time and never the upstream's reply, so state is
// committed when a message is allowed; later messages of a gRPC stream are
// not seen at all (the README lists which rules need the standalone sidecar).
package extauthz

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/mcp"
)

// Config is the ext_authz server's configuration.
type Config struct {
	// Listen is the address Envoy calls (host:port).
	Listen string `yaml:"listen" json:"listen"`
	// PrincipalHeader carries the authenticated principal to the upstream on
	// an allowed request.
	PrincipalHeader string `yaml:"principal_header" json:"principal_header"`
	// PublicDiscovery lets discovery RPCs through without credentials.
	PublicDiscovery bool `yaml:"public_discovery" json:"public_discovery"`
	// MCP checks every request that is not gRPC as MCP Streamable HTTP.
	MCP bool `yaml:"mcp" json:"mcp"`
	// A2A checks every request that is not gRPC as A2A's JSON-RPC binding
	// (not together with MCP); A2AWebhookAllow is a2a.webhook_allow.
	A2A             bool     `yaml:"a2a" json:"a2a"`
	A2AWebhookAllow []string `yaml:"a2a_webhook_allow" json:"a2a_webhook_allow"`
	// A2AWebhookAllowOnly lets push-notification URLs name only what
	// A2AWebhookAllow names. ext_authz decides a request but cannot point
	// its push configs at the sidecar's push relay: the URL's string is all
	// it checks (names are not resolved), so allow-only is how to bound
	// where the server pushes.
	A2AWebhookAllowOnly bool `yaml:"a2a_webhook_allow_only" json:"a2a_webhook_allow_only"`
	// A2APath is the path of the A2A server's JSON-RPC endpoint (default
	// "/"), MCPPath the MCP server's endpoint (default "/mcp"): a request
	// whose path, query cut, is not exactly it is denied (A2A: but for GET
	// of the agent card). Envoy routes on the path, so a body decided as
	// JSON-RPC must reach the JSON-RPC handler and no other.
	A2APath string `yaml:"a2a_path" json:"a2a_path"`
	MCPPath string `yaml:"mcp_path" json:"mcp_path"`
	// MaxBodyBytes bounds an MCP or A2A message (default
	// listener.DefaultMaxBodyBytes); Envoy's max_request_bytes should be at
	// least as large, or the body reaches Warden cut and is refused 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// Resource and AuthorizationServers: as mcp.resource and
	// mcp.authorization_servers, for the MCP endpoint behind Envoy. With
	// authorization servers set, Resource is required, the 401 challenge
	// names its protected-resource metadata, and a GET of the metadata is
	// answered by Warden.
	Resource             string   `yaml:"resource" json:"resource"`
	AuthorizationServers []string `yaml:"authorization_servers" json:"authorization_servers"`
	// MaxSteerBytes bounds a tasks/steer message (MCP; default 16 KiB).
	MaxSteerBytes int `yaml:"max_steer_bytes" json:"max_steer_bytes"`
	// PassThrough are the gRPC services allowed without credentials besides
	// the runtime's own; nil means gRPC health and reflection.
	PassThrough []string `yaml:"pass_through" json:"pass_through"`
	// UpstreamTokensFile: as macp.upstream_tokens_file, for principals
	// authenticated by the client certificate Envoy forwards.
	UpstreamTokensFile string `yaml:"upstream_tokens_file" json:"upstream_tokens_file"`
	// AllowedOrigins are the browser origins allowed besides those of
	// AllowedHosts (MCP), as mcp.allowed_origins.
	AllowedOrigins []string `yaml:"allowed_origins" json:"allowed_origins"`
	// AllowedHosts are the names the MCP endpoint behind Envoy is served
	// under, as mcp.allowed_hosts; there is no default (the names are
	// Envoy's), so without it a browser's request needs AllowedOrigins.
	AllowedHosts []string `yaml:"allowed_hosts" json:"allowed_hosts"`
	// Limits bounds the listener's connections; zero fields take listener's
	// defaults.
	Limits listener.Limits `yaml:"limits" json:"limits"`
	// MaxUnconfirmedStarts bounds the MACP sessions one principal may have
	// started through this replica that have not ended (terminal or expired
	// in the session table; committed on allow, they may be ones the runtime
	// refused, and no message of their initiator's confirms them); one more
	// SessionStart is refused with RESOURCE_EXHAUSTED. 0 means
	// DefaultMaxUnconfirmedStarts.
	MaxUnconfirmedStarts int `yaml:"max_unconfirmed_starts" json:"max_unconfirmed_starts"`
	// AllowStreamSession lets MACP StreamSession through once its caller
	// is authenticated. Envoy shows Warden the opening of a stream, never
	// the envelopes sent on it, so every rule on Send (authority matrices,
	// mode rules, governance, duplicates, lifecycle) could be walked around
	// by sending the same envelope on a stream: refused (PERMISSION_DENIED)
	// unless set.
	AllowStreamSession bool `yaml:"allow_stream_session" json:"allow_stream_session"`
	// AllowUnfilteredReads lets MACP GetSession, ListSessions,
	// WatchSessions and WatchSignals through once their caller is
	// authenticated. The sidecar filters their answers to the sessions the
	// caller takes part in; Envoy never shows Warden an answer, so any
	// authenticated caller would read every session's state, participants
	// and signals. Unless set, ListSessions and the watches are refused
	// (PERMISSION_DENIED) and GetSession is decided on the sessions ext_authz
	// keeps (the initiator and participants read it; anyone else, and any
	// session ext_authz does not know, gets NOT_FOUND, as from the sidecar).
	AllowUnfilteredReads bool `yaml:"allow_unfiltered_reads" json:"allow_unfiltered_reads"`
}

// DefaultMaxUnconfirmedStarts is the default of Config.MaxUnconfirmedStarts.
const DefaultMaxUnconfirmedStarts = admission.DefaultMaxUnconfirmedStarts

// DefaultPrincipalHeader is the header an allowed request gains.
const DefaultPrincipalHeader = "x-warden-principal"

// checkOverhead is what a CheckRequest may hold besides the body: headers
// and attributes (Envoy's own header limit is 60 KiB by default).
const checkOverhead = 1 << 20

// shutdownTimeout bounds how long in-flight Check calls may drain.
const shutdownTimeout = 10 * time.Second

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Listen == "" {
		return errors.New("extauthz.listen: required")
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("extauthz.limits: %w", err)
	}
	if c.MaxUnconfirmedStarts < 0 {
		return errors.New("extauthz.max_unconfirmed_starts: negative")
	}
	if c.MCP && c.A2A {
		return errors.New("extauthz: mcp and a2a both read requests that are not gRPC; run one ext_authz listener per protocol")
	}
	if _, err := a2a.ParseAllow(c.A2AWebhookAllow); err != nil {
		return fmt.Errorf("extauthz.a2a_webhook_allow: %w", err)
	}
	if c.A2AWebhookAllowOnly && len(c.A2AWebhookAllow) == 0 {
		return errors.New("extauthz.a2a_webhook_allow_only: give the webhooks allowed in extauthz.a2a_webhook_allow")
	}
	if c.A2APath != "" {
		if err := validEndpointPath("extauthz.a2a_path", c.A2APath); err != nil {
			return err
		}
	}
	if c.MCPPath != "" {
		if err := validEndpointPath("extauthz.mcp_path", c.MCPPath); err != nil {
			return err
		}
	}
	if err := mcp.ValidHosts(c.AllowedHosts); err != nil {
		return fmt.Errorf("extauthz.allowed_hosts: %w", err)
	}
	if c.MaxBodyBytes < 0 {
		return errors.New("extauthz.max_body_bytes: negative")
	}
	if len(c.AuthorizationServers) > 0 {
		if u, err := url.Parse(c.Resource); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("extauthz.resource: %q is not an http(s) URL (required with extauthz.authorization_servers)", c.Resource)
		}
	}
	return nil
}

// Server answers Check calls.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	cfg      Config
	methods  admission.Methods
	tokens   authn.UpstreamTokens
	enf      *proxy.Enforcer
	sessions *sessions.Decider // MACP's decision, on enf
	tasks    *tasks.Decider    // MCP's decision, on enf
	tenancy  *tenancy.Decider  // A2A's decision, on enf
	log      *slog.Logger
	webhooks a2a.Allow            // A2A webhook allowlist
	gate     *admission.Gate      // MACP's
	blind    *admission.Blind     // MACP's decisions, blind to the runtime's answer
	mcp      *gate.Gate[mcp.Call] // the JSON-RPC front doors
	a2a      *gate.Gate[a2a.Call]
	// doors are each protocol's requests at ext_authz (their flights).
	doors struct{ macp, mcp, a2a *proxy.Door }
}

// New builds the server over dec, the MACP decision (and dec's Enforcer,
// which MCP's and A2A's decisions decide on too); it starts no goroutines.
func New(cfg Config, dec *sessions.Decider, log *slog.Logger) (*Server, error) {
	if cfg.PrincipalHeader == "" {
		cfg.PrincipalHeader = DefaultPrincipalHeader
	}
	cfg.PrincipalHeader = strings.ToLower(cfg.PrincipalHeader)
	if cfg.PassThrough == nil {
		cfg.PassThrough = admission.DefaultPassThrough
	}
	if cfg.A2APath == "" {
		cfg.A2APath = DefaultA2APath
	}
	if cfg.MCPPath == "" {
		cfg.MCPPath = DefaultMCPPath
	}
	if err := validEndpointPath("extauthz.a2a_path", cfg.A2APath); err != nil {
		return nil, err
	}
	if err := validEndpointPath("extauthz.mcp_path", cfg.MCPPath); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = listener.DefaultMaxBodyBytes
	}

	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tokens authn.UpstreamTokens
	if cfg.UpstreamTokensFile != "" {
		var err error
		if tokens, err = authn.LoadUpstreamTokens(cfg.UpstreamTokensFile); err != nil {
			return nil, fmt.Errorf("extauthz.upstream_tokens_file: %w", err)
		}
	}
	allow, err := a2a.ParseAllow(cfg.A2AWebhookAllow)
	if err != nil {
		return nil, fmt.Errorf("extauthz.a2a_webhook_allow: %w", err)
	}
	allow.Only = cfg.A2AWebhookAllowOnly
	methods := admission.NewMethods(cfg.PassThrough)
	enf := dec.Enforcer()
	s := &Server{cfg: cfg, methods: methods, tokens: tokens, enf: enf, sessions: dec, tasks: tasks.New(enf), tenancy: tenancy.New(enf), log: log, webhooks: allow,
		gate: admission.New(methods, enf, cfg.PublicDiscovery, log), blind: admission.NewBlind(dec, cfg.MaxUnconfirmedStarts, log),
		mcp: gate.New(gate.MCP(mcpGate(cfg)), enf, log), a2a: gate.New(gate.A2A(cfg.A2APath, cfg.MaxBodyBytes, "extauthz.max_body_bytes"), enf, log)}
	s.doors.macp = enf.Door(admission.Requests(), proxy.DoorExtAuthz)
	s.doors.mcp = enf.Door(s.mcp.Requests(), proxy.DoorExtAuthz)
	s.doors.a2a = enf.Door(s.a2a.Requests(), proxy.DoorExtAuthz)
	return s, nil
}

// Run serves Check on cfg.Listen until ctx ends, then drains in-flight
// calls for at most 10 seconds.
func (s *Server) Run(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("extauthz listen: %w", err)
	}
	lim := s.cfg.Limits.WithDefaults()
	// A CheckRequest carries a whole MCP or A2A body: it must fit, with its
	// headers, or grpc-go refuses it (RESOURCE_EXHAUSTED) before the gate
	// can answer 413.
	srv := grpc.NewServer(append(listener.GRPCServerOptions(lim), grpc.MaxRecvMsgSize(int(max(s.cfg.MaxBodyBytes, listener.DefaultMaxBodyBytes))+checkOverhead))...)
	authv3.RegisterAuthorizationServer(srv, s)
	s.log.Info("ext_authz listening", "listen", lis.Addr().String(), "max_connections", lim.MaxConnections)
	if err := listener.Serve(ctx, srv, listener.Cap(lis, lim.MaxConnections, s.log), shutdownTimeout, s.log); err != nil {
		return fmt.Errorf("extauthz serve: %w", err)
	}
	return nil
}

const service = admission.MACPService

// Check decides one request as Envoy describes it. A request Warden cannot
// make sense of is denied, never allowed. Which gRPC methods exist and how
// each is treated comes from the table the sidecar uses too (admission.Methods).
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	h := req.GetAttributes().GetRequest().GetHttp()
	ctx, f := s.enf.Begin(ctx, s.door(h), propagation.MapCarrier(h.GetHeaders()))
	resp, err := s.check(ctx, h, req)
	if ok := resp.GetOkResponse(); ok != nil && trace.SpanContextFromContext(ctx).IsValid() {
		// the upstream continues the trace from Warden's span
		tc := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, tc)
		for k, v := range tc {
			ok.Headers = append(ok.Headers, header(k, v))
		}
	}
	f.End(err != nil)
	return resp, err
}

// door is the door of the protocol a request is decided as (the flight's
// label): MACP for a gRPC request, else the HTTP protocol served, MACP
// when none is.
func (s *Server) door(h *authv3.AttributeContext_HttpRequest) *proxy.Door {
	switch {
	case h == nil || s.grpcRequest(h):
		return s.doors.macp
	case s.cfg.MCP:
		return s.doors.mcp
	case s.cfg.A2A:
		return s.doors.a2a
	}
	return s.doors.macp
}

// check is Check in the request's flight.
func (s *Server) check(ctx context.Context, h *authv3.AttributeContext_HttpRequest, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	if h == nil {
		return denyHTTP(400, "malformed CheckRequest: no HTTP request attributes"), nil
	}
	hdr := h.GetHeaders()
	ctx = proxy.WithSource(ctx, source(s.enf, req.GetAttributes().GetSource(), hdr, h))
	if !s.grpcRequest(h) {
		creds, credErr := credentials(hdr, req.GetAttributes().GetSource())
		if s.cfg.MCP {
			return s.checkMCP(ctx, request(h, creds, credErr)), nil
		}
		if s.cfg.A2A {
			return s.checkA2A(ctx, request(h, creds, credErr)), nil
		}
		return denyHTTP(415, "warden ext_authz: only MACP gRPC requests are understood here (set extauthz.mcp for MCP, extauthz.a2a for A2A)"), nil
	}
	// A gRPC method is served only by its exact path, framed as gRPC.
	path := h.GetPath()
	if refused := s.gate.Framed(ctx, h.GetMethod(), hdr["content-type"]); refused != nil {
		return deny(*refused), nil
	}
	// The one MACP admission the sidecar's doors use too: the method table,
	// then the credentials, before the body is looked at.
	var names [32]string // the header names, on the stack for a usual request
	a := s.gate.Admit(ctx, admission.Headers{Method: path, Get: envoyHeaders(hdr), Names: slices.AppendSeq(names[:0], maps.Keys(hdr)), Chain: chainOf(req.GetAttributes().GetSource())})
	switch {
	case a.Refusal != nil:
		return deny(*a.Refusal), nil
	case a.Anonymous:
		return s.allow(authn.Principal{}, ""), nil
	}
	p := a.Principal
	// The rebuilder calls the runtime with the credential it accepts for p
	// (none to add: a server's context carries no outgoing metadata).
	if md := s.upstreamMD(p, a.Credentials); md != nil {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}

	if a.Call == admission.CallSend || a.Call == admission.CallControl {
		body, err := grpcMessage(h)
		if err != nil {
			// a framing error, as grpc-go answers one: INTERNAL, no MACP code
			return deny(admission.Refusal{Status: codes.Internal, Text: err.Error()}), nil
		}
		r, refused := s.gate.Request(&a, body)
		if refused != nil {
			return deny(*refused), nil
		}
		id, refused := s.blind.Decide(ctx, a.Call, r)
		if refused != nil {
			return deny(*refused), nil
		}
		return s.allow(*r.Principal, id), nil
	}
	// A call whose rule needs what Envoy never shows Warden (a stream's
	// envelopes, a read's answer) is refused unless the operator opted in.
	if refused := s.unseen(ctx, a, func() ([]byte, error) { return grpcMessage(h) }); refused != nil {
		return deny(*refused), nil
	}
	// Every other call: the caller must be authenticated. One that changes
	// what Warden holds (a policy registered) is noted.
	s.blind.Passed(a.Call, func() ([]byte, error) { return grpcMessage(h) })
	return s.allow(p, ""), nil
}

// grpcRequest reports whether the request names a gRPC method Warden must
// decide as gRPC, whatever its HTTP method and content type: a gRPC content
// type, or a path that, once its query and fragment are cut, its escapes
// decoded and its slashes merged, names the runtime's service or a
// pass-through service. The upstream may route such a request to the method
// whatever it is framed as.
func (s *Server) grpcRequest(h *authv3.AttributeContext_HttpRequest) bool {
	if strings.HasPrefix(strings.ToLower(h.GetHeaders()["content-type"]), "application/grpc") { // any gRPC variant, +web included
		return true
	}
	p := h.GetPath()
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	p = strings.ToLower(p)
	if strings.HasPrefix(p, strings.ToLower(service)) || strings.HasPrefix(p, "/macp.") {
		return true
	}
	return s.methods.Lookup(h.GetPath()) != admission.CallUnknown
}

// upstreamMD is the credential the runtime receives for p: the client's own
// when p was authenticated from it (nil: nothing to add), or the configured
// token for a principal authenticated by certificate.
func (s *Server) upstreamMD(p authn.Principal, c authn.Credentials) metadata.MD {
	if t, _ := s.tokens.Upstream(p, c); t != "" {
		return metadata.Pairs(authn.HeaderAuthorization, "Bearer "+t)
	}
	return nil
}

// grpcMessage returns the single gRPC message of a buffered unary request:
// the 5-byte prefix (compression flag, big-endian length) is checked, and a
// compressed, truncated or multi-message body is refused, as is one Envoy
// did not buffer whole (bufferedBody).
func grpcMessage(h *authv3.AttributeContext_HttpRequest) ([]byte, error) {
	body, err := bufferedBody(h)
	switch {
	case err != nil:
		return nil, err
	case len(body) < 5:
		return nil, errors.New("request body is not a gRPC message (Envoy must buffer it: with_request_body, pack_as_bytes)")
	case body[0] != 0:
		return nil, errors.New("compressed gRPC messages are not supported")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if uint64(len(body)-5) != uint64(n) {
		return nil, fmt.Errorf("gRPC frame says %d bytes, body holds %d: truncated (raise max_request_bytes) or several messages", n, len(body)-5)
	}
	return body[5:], nil
}

// credentials reads the request's credentials with the parser every adapter
// shares (Envoy joins repeated headers with commas) and, when Envoy
// terminated mTLS, the client certificate it forwards.
func credentials(headers map[string]string, src *authv3.AttributeContext_Peer) (authn.Credentials, error) {
	return authn.FromHeaders(envoyHeaders(headers).Get, chainOf(src))
}

// source is the request's source: Envoy's address of the downstream
// client (attributes.source.address), its x-request-id (Envoy generates one
// unless told not to; Warden mints one otherwise), the method and the path.
func source(enf *proxy.Enforcer, peer *authv3.AttributeContext_Peer, hdr map[string]string, h *authv3.AttributeContext_HttpRequest) proxy.Source {
	var client string
	if a := peer.GetAddress().GetSocketAddress(); a != nil {
		client = net.JoinHostPort(a.GetAddress(), strconv.FormatUint(uint64(a.GetPortValue()), 10))
	}
	path, _, _ := strings.Cut(h.GetPath(), "?")
	return enf.NewSource(client, hdr["x-request-id"], h.GetMethod(), path)
}

// envoyHeaders are a request's headers as Envoy gives them (repeated
// headers joined with commas).
type envoyHeaders map[string]string

// Get returns a header's values.
func (h envoyHeaders) Get(name string) []string {
	v, ok := h[name]
	return authn.SplitHeader(v, ok)
}

// chainOf is the client certificate Envoy forwards when it terminated mTLS.
func chainOf(src *authv3.AttributeContext_Peer) []*x509.Certificate {
	if pemURL := src.GetCertificate(); pemURL != "" {
		if pem, err := url.QueryUnescape(pemURL); err == nil {
			return parsePEM(pem)
		}
	}
	return nil
}

// deny maps a MACP refusal onto Envoy's wire, once: HTTP 200 with a
// trailers-only gRPC status, the MACP error code in macp-error-code (as
// the runtime sends it), and the decision id when it names one.
func deny(r admission.Refusal) *authv3.CheckResponse {
	headers := []*corev3.HeaderValueOption{
		header("content-type", "application/grpc"),
		header("grpc-status", fmt.Sprint(int32(r.Status))),
		header("grpc-message", url.PathEscape(r.Text)),
	}
	if r.Code != "" {
		headers = append(headers, header("macp-error-code", string(r.Code)))
	}
	if r.DecisionID != "" {
		headers = append(headers, header("x-warden-decision", r.DecisionID))
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(r.Status), Message: r.Text},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_OK}, Headers: headers,
		}},
	}
}

// denyHTTP answers a request that is not a gRPC call Warden understands.
func denyHTTP(status int32, msg string) *authv3.CheckResponse {
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(code.Code_INVALID_ARGUMENT), Message: msg},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode(status)}, Body: msg + "\n",
			Headers: []*corev3.HeaderValueOption{header("content-type", "text/plain")},
		}},
	}
}

// allow lets the request through with the principal in the principal
// header (a client's copy is always removed or overwritten, never passed)
// and the decision id in the dynamic metadata. When p was authenticated by
// certificate, the client's credential headers are removed and the
// configured upstream token, if any, takes their place.
func (s *Server) allow(p authn.Principal, decisionID string) *authv3.CheckResponse {
	ok := &authv3.OkHttpResponse{}
	if p.ID != "" {
		ok.Headers = []*corev3.HeaderValueOption{header(s.cfg.PrincipalHeader, p.ID)}
	} else {
		ok.HeadersToRemove = []string{s.cfg.PrincipalHeader}
	}
	if t, replace := s.tokens.Upstream(p, authn.Credentials{}); replace {
		ok.HeadersToRemove = append(ok.HeadersToRemove, authn.HeaderMACPToken)
		if t != "" {
			ok.Headers = append(ok.Headers, header(authn.HeaderAuthorization, "Bearer "+t))
		} else {
			ok.HeadersToRemove = append(ok.HeadersToRemove, authn.HeaderAuthorization)
		}
	}
	resp := &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}
	if decisionID != "" {
		resp.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			"decision_id": structpb.NewStringValue(decisionID), "principal": structpb.NewStringValue(p.ID)}}
	}
	return resp
}

// header is one header to set, both of its messages in one allocation.
func header(k, v string) *corev3.HeaderValueOption {
	h := new(struct {
		opt corev3.HeaderValueOption
		val corev3.HeaderValue
	})
	h.val.Key, h.val.Value = k, v
	h.opt.Header, h.opt.AppendAction = &h.val, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	return &h.opt
}
