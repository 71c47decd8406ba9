// Package mcp is Warden's MCP sidecar: an HTTP reverse proxy in front of an
// MCP server over Streamable HTTP. It authenticates every request, hands
// clients principal-bound handles instead of upstream task and session IDs,
// decides task requests with the Enforcer (ownership, SEP-2669 status rules,
// tool-level taskSupport, steer bounds), and forwards everything else byte
// for byte, streaming SSE responses event by event.
//
// What the sidecar reads is what the upstream reads, or the request is
// refused:
//   - Messages are read by rules/mcp.Parse, which refuses member names that
//     differ only in case (as encoding/json folds them) where Warden reads,
//     and ids other than strings and canonical integers within ±2^53.
//   - Task methods, tools/call and tasks/list sent without an id (a
//     notification, which would not be decided) are refused.
//   - Routing headers (Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method,
//     Mcp-Name, Last-Event-ID) given more than once are refused.
//
// Identifiers are handles (handle.go): upstream task IDs, session IDs, SSE
// event ids and tasks/list cursors are sealed with XChaCha20-Poly1305 to the
// principal (event ids and cursors also to the upstream session), so they
// reveal nothing and open only for their owner. Every place a handle belongs
// (params.taskId, the related-task _meta, tasks/list's cursor,
// subscriptions/listen's params.notifications.taskIds, Mcp-Name,
// Mcp-Session-Id, Last-Event-ID) must hold one of the caller's, read after
// JSON decoding; anything else is refused as an unknown task (-32602 "Task
// not found"), an invalid cursor, or (Last-Event-ID) a 400, without asking
// the upstream.
//
// Answers fail closed: an answer that does not match the request of its
// exchange (an id spelled differently, any answer on the standalone GET
// stream), data that is JSON but not one object, and messages naming a task
// that is not the caller's are dropped (the answer to the caller's own
// request is replaced with a JSON-RPC error). An event stream is closed when
// the caller's credential expires. Each answer body or SSE event is read
// whole to be checked, within mcp.max_response_bytes; an answer over it
// becomes a JSON-RPC error for its request naming the limit (tooBig), never
// a silent drop. In dry-run mode nothing is sealed or withheld: the refusals
// are logged and the traffic passes as without Warden.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
	mcprules "github.com/agentwarden/warden/rules/mcp"
)

// Config is the MCP sidecar's part of the configuration: an HTTP sidecar's
// (its Upstream is the MCP server's endpoint URL, http://host:port/mcp; an
// answer over MaxResponseBytes on an SSE stream becomes an error event with
// the oversized event's id, so a resumed stream moves past it, and other
// oversized messages are dropped, each logged), and MCP's own.
type Config struct {
	listener.HTTPConfig `yaml:",inline"`
	// AllowedOrigins are the browser origins allowed besides those of
	// AllowedHosts; a request with any other Origin gets 403.
	AllowedOrigins []string `yaml:"allowed_origins" json:"allowed_origins"`
	// AllowedHosts are the names (host, any port, or host:port) this
	// endpoint is served under that a browser page may call it from as
	// same-origin. nil means the listen address's: the loopback names
	// (localhost, 127.0.0.1, [::1]) for a loopback or wildcard address, the
	// address itself for another IP literal, none for a host name. The
	// request's Host header is never trusted for it (DNS rebinding).
	AllowedHosts []string `yaml:"allowed_hosts" json:"allowed_hosts"`
	// Resource is this protected resource's URL (RFC 9728), and
	// AuthorizationServers the issuers clients get tokens from; with
	// authorization servers set, Warden serves the metadata document.
	Resource             string   `yaml:"resource" json:"resource"`
	AuthorizationServers []string `yaml:"authorization_servers" json:"authorization_servers"`
	// MaxSteerBytes bounds a tasks/steer message; MaxSteerQueue the steer
	// messages accepted for a task until its status changes.
	MaxSteerBytes int `yaml:"max_steer_bytes" json:"max_steer_bytes"`
	MaxSteerQueue int `yaml:"max_steer_queue" json:"max_steer_queue"`
}

// Defaults.
const (
	DefaultMaxBodyBytes     = listener.DefaultMaxBodyBytes
	DefaultMaxResponseBytes = listener.DefaultMaxResponseBytes
	DefaultMaxSteerBytes    = 16 << 10
	DefaultMaxSteerQueue    = 32
	DefaultShutdownTimeout  = listener.DefaultShutdownTimeout
	maxTools                = 16384 // taskSupport entries (principal, session, tool) remembered
)

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if err := c.Sidecar().Validate(); err != nil {
		return err
	}
	if c.MaxBodyBytes < 0 || c.MaxSteerBytes < 0 || c.MaxSteerQueue < 0 {
		return errors.New("mcp: limits must not be negative")
	}
	if err := mcprules.ValidHosts(c.AllowedHosts); err != nil {
		return fmt.Errorf("mcp.allowed_hosts: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults()
	if c.MaxSteerBytes == 0 {
		c.MaxSteerBytes = DefaultMaxSteerBytes
	}
	if c.MaxSteerQueue == 0 {
		c.MaxSteerQueue = DefaultMaxSteerQueue
	}
	if c.AllowedHosts == nil {
		c.AllowedHosts = defaultHosts(c.Listen)
	}
	return c
}

// defaultHosts are the allowed hosts of a listen address
// (Config.AllowedHosts), any port: names no DNS answer can give another
// site (as the MCP TypeScript SDK's localhost default).
func defaultHosts(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil
	}
	ip, ipErr := netip.ParseAddr(host)
	switch {
	case host == "" || strings.EqualFold(host, "localhost") || ipErr == nil && (ip.IsLoopback() || ip.IsUnspecified()):
		return []string{"localhost", "127.0.0.1", "[::1]"}
	case ipErr == nil:
		return []string{strings.TrimSuffix(net.JoinHostPort(host, "0"), ":0")} // [v6] bracketed
	}
	return nil // a name someone else's DNS could point here: configure it
}

// Server is the MCP sidecar, an http.Handler.
type Server struct {
	cfg      Config
	enforcer *proxy.Enforcer
	upstream *url.URL
	client   *http.Client
	handles  handles
	log      *slog.Logger

	implicit *implicitCalls

	tools *lru.Cache[toolKey, string] // execution.taskSupport

	streams *listener.Streams // the forwarded requests open
}

// New builds the sidecar. key binds handles to principals (see handle.LoadKey);
// client reaches the upstream (nil means a default one).
func New(cfg Config, e *proxy.Enforcer, key []byte, client *http.Client, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Upstream)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("mcp.upstream: %q is not an http(s) URL", cfg.Upstream)
	}
	if len(key) < 32 {
		return nil, errors.New("mcp: the handle key must have at least 32 bytes")
	}
	if client == nil {
		client = listener.UpstreamClient(cfg.Limits, cfg.Streams)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := newHandles(key)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	tools, err := lru.New[toolKey, string](maxTools)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Server{cfg: cfg, enforcer: e, upstream: u, client: client, handles: h, log: log, tools: tools, implicit: newImplicitCalls(),
		streams: listener.NewStreams("mcp", cfg.Streams)}, nil
}

// ShutdownTimeout is how long in-flight requests may drain on shutdown.
func (s *Server) ShutdownTimeout() time.Duration { return s.cfg.ShutdownTimeout }

const metadataPath = "/.well-known/oauth-protected-resource"

// ServeHTTP authenticates the request, decides it and forwards it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, metadataPath) && len(s.cfg.AuthorizationServers) > 0 {
		s.metadata(w, r)
		return
	}
	if !mcprules.OriginAllowed(r.Header.Get("Origin"), s.cfg.AllowedHosts, s.cfg.AllowedOrigins) {
		s.refuse(w, "", rules.CodeForbidden, rules.ReasonOriginRefused, http.StatusForbidden, nil, mcprules.ErrInvalidRequest, "Forbidden: Origin "+r.Header.Get("Origin")+" is not allowed")
		return
	}
	if status, msg := mcprules.CheckHTTPMethod(r.Method, r.ContentLength != 0); status != 0 {
		s.refuse(w, "", rules.CodeInvalidRequest, rules.ReasonMalformedRequest, status, nil, mcprules.ErrInvalidRequest, msg)
		return
	}
	if k, ok := repeatedHeader(r.Header); !ok {
		s.refuse(w, "", rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusBadRequest, nil, mcprules.ErrInvalidRequest, "invalid request: the "+k+" header is given more than once")
		return
	}
	creds, err := authn.FromHTTP(r)
	var p authn.Principal
	if err == nil {
		p, err = s.enforcer.Authenticate(r.Context(), creds)
	}
	if errors.Is(err, authn.ErrKeysUnavailable) {
		s.log.Warn("cannot authenticate: signing keys unavailable", "err", err)
		relay.WriteError(w, http.StatusServiceUnavailable, nil, mcprules.ErrInternal, "authentication is unavailable; retry later")
		return
	}
	if err != nil {
		s.unauthorized(w, r, err)
		return
	}
	dry := s.enforcer.DryRun()
	sid, ok := s.session(r, p.ID)
	if !ok && dry {
		// Dry-run mode hands out the server's own session IDs; only
		// another principal's handle is a refusal to log.
		sid, ok = r.Header.Get("Mcp-Session-Id"), true
		if strings.HasPrefix(sid, handlePrefix) {
			s.log.Info("refused", "dry_run", true, "protocol", "mcp", "principal", p.ID, "reason", "not_owner", "detail", "Mcp-Session-Id is not a session of the caller")
		}
	}
	if !ok {
		s.refuse(w, p.ID, rules.CodeSessionNotFound, rules.ReasonSessionUnknown, http.StatusNotFound, nil, mcprules.ErrSessionNotFound, "Session not found")
		return
	}
	x := &exchange{s: s, principal: p.ID, sid: sid, expiry: p.Expiry, strip: authn.StripsCredentials(p), dry: dry,
		guard: func(ctx context.Context) (context.Context, func()) {
			return s.enforcer.Guard(ctx, creds, p, proxy.DefaultCredentialCheck, errCredentialGone)
		}}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		// A stream is resumed only from an event id given to this
		// principal in this session; the upstream is not asked otherwise.
		id, ok := s.handles.openIn(kindEvent, p.ID, sid, v)
		if !ok && dry {
			id, ok = v, true
			if strings.HasPrefix(v, handlePrefix) {
				s.log.Info("refused", "dry_run", true, "protocol", "mcp", "principal", p.ID, "reason", "not_owner", "detail", "Last-Event-ID is not an event of this session")
			}
		}
		if !ok {
			s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusBadRequest, nil, mcprules.ErrInvalidRequest, "invalid request: Last-Event-ID is not an event of this session")
			return
		}
		x.resume(id, r.Method)
	}
	if r.Method == http.MethodPost {
		s.post(w, r, p, x)
		return
	}
	// GET (the standalone SSE stream) and DELETE (end of session), without
	// a body: forwarded, with task notifications filtered on the way back.
	s.forward(w, r, x, nil, "")
}

// routingHeaders are read once by Warden and by the upstream; a second value
// could be the one the upstream reads.
var routingHeaders = []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id"}

// repeatedHeader returns a routing header given more than once (ok false).
func repeatedHeader(h http.Header) (string, bool) {
	for _, k := range routingHeaders {
		if len(h.Values(k)) > 1 {
			return k, false
		}
	}
	return "", true
}

// session returns the upstream session ID of the request's Mcp-Session-Id
// handle; ok is false when the handle is not the caller's.
func (s *Server) session(r *http.Request, principal string) (string, bool) {
	h := r.Header.Get("Mcp-Session-Id")
	if h == "" {
		return "", true
	}
	return s.handles.open(kindSession, principal, h)
}

// errCredentialGone ends an event stream whose credential expired or was
// revoked while it was open.
var errCredentialGone = errors.New("the credential expired or was revoked")

func (s *Server) metadataURL(r *http.Request) string {
	if s.cfg.Resource != "" {
		u, err := url.Parse(s.cfg.Resource)
		if err == nil {
			return u.Scheme + "://" + u.Host + metadataPath + strings.TrimSuffix(u.Path, "/")
		}
	}
	return s.ownOrigin(r) + metadataPath + strings.TrimSuffix(r.URL.Path, "/")
}

// ownOrigin is the origin of this endpoint as the client reached it, for
// the protected-resource metadata when mcp.resource is not set: the
// request's Host only when it is one of mcp.allowed_hosts (a name no other
// site can take), else the listen address (listener.HTTPConfig.ListenOrigin):
// a metadata document or challenge cached by a shared client must not point
// the next caller at a host the first one chose.
func (s *Server) ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if o := scheme + "://" + r.Host; r.Host != "" && mcprules.OriginAllowed(o, s.cfg.AllowedHosts, nil) {
		return o
	}
	return s.cfg.ListenOrigin()
}

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	var metadata string
	if len(s.cfg.AuthorizationServers) > 0 {
		metadata = s.metadataURL(r)
	}
	w.Header().Set("WWW-Authenticate", authn.Challenge(metadata, err))
	s.refuse(w, "", rules.CodeUnauthenticated, rules.ReasonUnauthenticated, http.StatusUnauthorized, nil, mcprules.ErrUnauthorized, "Unauthorized: "+authn.Reason(err))
}

// metadata serves the RFC 9728 protected-resource metadata document.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	resource := s.cfg.Resource
	if resource == "" {
		resource = s.ownOrigin(r) + strings.TrimPrefix(r.URL.Path, metadataPath)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 resource,
		"authorization_servers":    s.cfg.AuthorizationServers,
		"bearer_methods_supported": []string{"header"},
	})
}

// post decides one JSON-RPC message and forwards it.
func (s *Server) post(w http.ResponseWriter, r *http.Request, p authn.Principal, x *exchange) {
	sid := x.sid
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			// Answered for the request's id when its first bytes show it.
			var id json.RawMessage
			if h := scanHead(body); h.id != nil {
				if v, ok := idValue(h.id); ok && (isString(v) || isNumber(v)) {
					id = h.id
				}
			}
			s.log.Warn("MCP request over mcp.max_body_bytes refused", "principal", p.ID, "limit", s.cfg.MaxBodyBytes)
			s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusRequestEntityTooLarge, id, mcprules.ErrInvalidRequest,
				fmt.Sprintf("the request exceeds Warden's limit mcp.max_body_bytes (%d bytes)", s.cfg.MaxBodyBytes))
			return
		}
		s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusBadRequest, nil, mcprules.ErrParse, "could not read the request body")
		return
	}
	if err := listener.CheckBodyEncoding(r.Header.Values("Content-Encoding")...); err != nil {
		// The server would read other bytes than the ones decided on.
		s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusUnsupportedMediaType, nil, mcprules.ErrInvalidRequest, err.Error())
		return
	}
	call, err := mcprules.Parse(body)
	if err != nil {
		code := jsonrpc.CodeOf(err)
		s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusBadRequest, nil, code, err.Error())
		return
	}
	x.call = call
	if v := mcprules.CheckKind(call); !v.OK() {
		s.refuse(w, p.ID, v.Code, v.Reason, http.StatusBadRequest, nil, mcprules.ErrInvalidRequest, v.Detail)
		return
	}
	// Every place a handle belongs (params.taskId, related-task metadata,
	// the tasks/list cursor) must hold one of the caller's; they become
	// upstream IDs.
	rewritten, owner, why := x.toUpstream(body)
	var refused rules.Verdict
	switch why {
	case refuseTask:
		refused = rules.Verdict{Code: rules.CodeTaskNotFound, Reason: rules.ReasonUnknownTask, Detail: "Task not found"}
	case refuseCursor:
		refused = rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonUnknownTask, Detail: "Invalid cursor"}
	default:
		body = rewritten
	}
	name := ""
	if call.Kind != mcprules.KindResponse || !refused.OK() {
		h := mcprules.Headers{ProtocolVersion: r.Header.Get("MCP-Protocol-Version"), Method: r.Header.Get("Mcp-Method")}
		h.Name, h.HasName = headerValue(r.Header, "Mcp-Name")
		req := proxy.TaskRequest{Principal: p, Call: call, Limits: mcprules.Limits{MaxSteerBytes: s.cfg.MaxSteerBytes, MaxSteerQueue: s.cfg.MaxSteerQueue}}
		req.Refused = mcprules.CheckHeaders(call, h)
		if req.Refused.OK() && !refused.OK() && !(why == refuseTask && mcprules.TaskMethod(call.Method)) {
			req.Refused = refused
		}
		if mcprules.TaskMethod(call.Method) && call.HasTaskID {
			req.TaskID, req.Owner = owner, why == refuseNone && owner != ""
			if x.dry && why == refuseTask {
				// The raw ID a client sees in dry-run mode: decided on the
				// owner Warden knows, forwarded as it is.
				o, known := s.enforcer.TaskOwner(call.TaskID)
				req.TaskID, req.Owner, owner = call.TaskID, known && o == p.ID, call.TaskID
			}
			if h.HasName && req.Owner {
				name = owner
			}
			req.Status = func(ctx context.Context) (string, error) {
				return s.readStatus(ctx, r, x.strip, sid, call.Params, owner)
			}
		}
		if call.Method == mcprules.MethodToolsCall && req.Refused.OK() {
			support, err := s.taskSupport(r.Context(), r, x.strip, p.ID, sid, call.Params, call.Tool)
			if err != nil {
				// Fail closed: whether the call may run as it asks cannot
				// be told.
				s.log.Warn("could not learn a tool's taskSupport; refusing the call", "tool", call.Tool, "principal", p.ID, "err", err)
				req.Refused = mcprules.UnknownSupport(call.Tool, errors.Is(err, errUnlisted))
			}
			req.Support, x.support = support, support
		}
		// Every message whose routing headers disagree with its body, or
		// that names a task or cursor not the caller's, is refused; the
		// others that name a task or a tool are decided.
		if decides(call) || !req.Refused.OK() {
			d, err := s.enforcer.EnforceTask(r.Context(), req)
			if err != nil {
				s.log.Warn("could not decide an MCP request; refusing it", "method", call.Method, "principal", p.ID, "err", err)
				relay.WriteError(w, http.StatusServiceUnavailable, call.ID, mcprules.ErrInternal, unavailable)
				return
			}
			if !d.Allow {
				d.Settle(false)
				status, code, msg := mcprules.Answer(d.Code, d.Message)
				relay.WriteError(w, status, call.ID, code, msg)
				return
			}
			x.decision = &d
		}
	}
	x.taskID = owner
	s.forward(w, r, x, body, name)
}

// unavailable is the message of Warden's answer when it could not decide (a
// task's status or the shared state could not be read): the client may
// retry.
const unavailable = "Warden could not decide this request; retry later"

// decides reports whether a message goes through the Enforcer.
func decides(c mcprules.Call) bool {
	return c.Kind == mcprules.KindRequest && decided(c.Method)
}

// decided reports whether requests of method are decided.
func decided(method string) bool { return mcprules.Decided(method) }

func headerValue(h http.Header, key string) (string, bool) {
	v, ok := h[http.CanonicalHeaderKey(key)]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func isString(v any) bool { _, ok := v.(string); return ok }

func isNumber(v any) bool { _, ok := v.(json.Number); return ok }

// refuse answers a request refused at the front door (before there is a
// message to decide) and records the refusal as a decision: logged, counted
// and in the decision log, its ID in X-Warden-Decision.
func (s *Server) refuse(w http.ResponseWriter, principal string, c rules.Code, reason rules.Reason, status int, id json.RawMessage, code int, msg string) {
	d := s.enforcer.Refuse("mcp", principal, "", rules.Verdict{Code: c, Reason: reason, Detail: msg})
	w.Header().Set("X-Warden-Decision", d.ID)
	relay.WriteError(w, status, id, code, msg)
}
