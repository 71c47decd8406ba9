// Package extauthz runs Warden as an Envoy external authorization service
// (envoy.service.auth.v3.Authorization/Check). Envoy buffers a request, sends
// its headers and body, and forwards or refuses it on Warden's answer. Warden
// sees one request at a time and never the upstream's reply, so state is
// committed when a message is allowed; later messages of a gRPC stream are
// not seen at all (the README lists which rules need the standalone sidecar).
package extauthz

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
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
	// MaxSteerBytes bounds a tasks/steer message (MCP; default 16 KiB).
	MaxSteerBytes int `yaml:"max_steer_bytes" json:"max_steer_bytes"`
	// Limits bounds the listener's connections; zero fields take listener's
	// defaults.
	Limits listener.Limits `yaml:"limits" json:"limits"`
}

// DefaultPrincipalHeader is the header an allowed request gains.
const DefaultPrincipalHeader = "x-warden-principal"

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
	return nil
}

// Server answers Check calls.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	cfg Config
	enf *proxy.Enforcer
	log *slog.Logger
}

// New builds the server; it starts no goroutines.
func New(cfg Config, enf *proxy.Enforcer, log *slog.Logger) (*Server, error) {
	if cfg.PrincipalHeader == "" {
		cfg.PrincipalHeader = DefaultPrincipalHeader
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, enf: enf, log: log}, nil
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
	srv := grpc.NewServer(listener.GRPCServerOptions(lim)...)
	authv3.RegisterAuthorizationServer(srv, s)
	s.log.Info("ext_authz listening", "listen", lis.Addr().String(), "max_connections", lim.MaxConnections)
	if err := listener.Serve(ctx, srv, listener.Cap(lis, lim.MaxConnections, s.log), shutdownTimeout, s.log); err != nil {
		return fmt.Errorf("extauthz serve: %w", err)
	}
	return nil
}

const service = "/macp.v1.MACPRuntimeService/"

var controlOps = map[string]string{service + "CancelSession": rules.OpCancel, service + "SuspendSession": rules.OpSuspend, service + "ResumeSession": rules.OpResume}

var discovery = map[string]bool{
	service + "Initialize": true, service + "GetManifest": true, service + "ListModes": true, service + "ListRoots": true,
	service + "ListExtModes": true, service + "WatchModeRegistry": true, service + "WatchRoots": true,
}

// Check decides one request as Envoy describes it. A request Warden cannot
// make sense of is denied, never allowed.
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	h := req.GetAttributes().GetRequest().GetHttp()
	if h == nil {
		return denyHTTP(400, "malformed CheckRequest: no HTTP request attributes"), nil
	}
	path, _, _ := strings.Cut(h.GetPath(), "?")
	creds := credentials(h.GetHeaders(), req.GetAttributes().GetSource())
	if !strings.HasPrefix(h.GetHeaders()["content-type"], "application/grpc") {
		if s.cfg.MCP {
			return s.checkMCP(ctx, h, creds), nil
		}
		return denyHTTP(415, "warden ext_authz: only MACP gRPC requests are understood here (set extauthz.mcp for MCP)"), nil
	}
	// The rebuilder calls the runtime with the client's own credentials.
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+creds.Bearer))

	switch {
	case path == service+"Send":
		body, err := grpcMessage(h)
		if err != nil {
			return denyGRPC(rules.CodeInvalidEnvelope, err.Error(), ""), nil
		}
		var sr macpv1.SendRequest
		if err := proto.Unmarshal(body, &sr); err != nil || sr.GetEnvelope() == nil {
			return denyGRPC(rules.CodeInvalidEnvelope, "SendRequest does not decode or carries no envelope", ""), nil
		}
		return s.decide(ctx, proxy.Request{Credentials: creds, Envelope: sr.GetEnvelope()})
	case controlOps[path] != "":
		body, err := grpcMessage(h)
		if err != nil {
			return denyGRPC(rules.CodeInvalidEnvelope, err.Error(), ""), nil
		}
		var cr macpv1.CancelSessionRequest // the three requests share {session_id, reason}
		if err := proto.Unmarshal(body, &cr); err != nil || cr.GetSessionId() == "" {
			return denyGRPC(rules.CodeInvalidEnvelope, "control request does not decode or names no session", ""), nil
		}
		return s.decide(ctx, proxy.Request{Credentials: creds, Op: controlOps[path], SessionID: cr.GetSessionId()})
	case discovery[path] && s.cfg.PublicDiscovery:
		return allow("", "", s.cfg.PrincipalHeader), nil
	}
	// Every other call, StreamSession included: the caller must be
	// authenticated; what it sends later on a stream is not seen here.
	p, err := s.enf.Authenticate(ctx, creds)
	if errors.Is(err, authn.ErrKeysUnavailable) {
		return denyGRPC(rules.CodeInternal, "authentication keys unavailable; retry", ""), nil
	}
	if err != nil {
		return denyGRPC(rules.CodeUnauthenticated, "authentication failed: "+authn.Reason(err), ""), nil
	}
	return allow(p.ID, "", s.cfg.PrincipalHeader), nil
}

// decide runs the Enforcer and commits on allow: the upstream's reply is
// invisible here.
func (s *Server) decide(ctx context.Context, r proxy.Request) (*authv3.CheckResponse, error) {
	d, err := s.enf.Enforce(ctx, r)
	if err != nil {
		// Could not decide: refuse, retryable.
		return denyGRPC(rules.CodeInternal, "warden could not decide this message; retry: "+err.Error(), ""), nil
	}
	d.Settle(d.Allow)
	if !d.Allow {
		return denyGRPC(d.Code, d.Message, d.ID), nil
	}
	return allow(d.Principal, d.ID, s.cfg.PrincipalHeader), nil
}

// grpcMessage returns the single gRPC message of a buffered unary request:
// the 5-byte prefix (compression flag, big-endian length) is checked, and a
// compressed, truncated or multi-message body is refused.
func grpcMessage(h *authv3.AttributeContext_HttpRequest) ([]byte, error) {
	body := h.GetRawBody()
	if len(body) == 0 && h.GetBody() != "" {
		body = []byte(h.GetBody())
	}
	switch {
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

// credentials reads the bearer (authorization or x-macp-token) and, when
// Envoy terminated mTLS, the client certificate it forwards.
func credentials(headers map[string]string, src *authv3.AttributeContext_Peer) authn.Credentials {
	var c authn.Credentials
	if b, ok := strings.CutPrefix(headers["authorization"], "Bearer "); ok {
		c.Bearer = strings.TrimSpace(b)
	} else if t := headers["x-macp-token"]; t != "" {
		c.Bearer = strings.TrimSpace(t)
	}
	if pemURL := src.GetCertificate(); pemURL != "" {
		if pem, err := url.QueryUnescape(pemURL); err == nil {
			if cert := parsePEM(pem); cert != nil {
				c.PeerCerts = cert
			}
		}
	}
	return c
}

// denyGRPC answers a gRPC client: HTTP 200 with a trailers-only gRPC status,
// the MACP error code in macp-error-code, and the decision id.
func denyGRPC(c rules.Code, msg, decisionID string) *authv3.CheckResponse {
	st := code.Code(c.GRPCStatus())
	text := string(c) + ": " + msg
	if decisionID != "" {
		text += " (warden decision " + decisionID + ")"
	}
	headers := []*corev3.HeaderValueOption{
		header("content-type", "application/grpc"),
		header("grpc-status", fmt.Sprint(int32(st))),
		header("grpc-message", url.PathEscape(text)),
		header("macp-error-code", string(c)),
	}
	if decisionID != "" {
		headers = append(headers, header("x-warden-decision", decisionID))
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(st), Message: text},
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

// allow lets the request through with the principal in a header and the
// decision id in the dynamic metadata.
func allow(principal, decisionID, principalHeader string) *authv3.CheckResponse {
	ok := &authv3.OkHttpResponse{}
	if principal != "" {
		ok.Headers = []*corev3.HeaderValueOption{header(principalHeader, principal)}
	}
	resp := &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code.Code_OK)}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}
	if decisionID != "" {
		md, _ := structpb.NewStruct(map[string]any{"decision_id": decisionID, "principal": principal})
		resp.DynamicMetadata = md
	}
	return resp
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}
