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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/mcp"
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
	// messages accepted for a task since the server last reported a step
	// (a new lastUpdatedAt) or a status change.
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
	// shareOf is the part of a table of what principals hold (tools,
	// client-side tasks) one principal may fill: as the owner table's
	// default share (enforcer.sessions_per_principal), an eighth.
	shareOf = 8
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
	if err := mcp.ValidHosts(c.AllowedHosts); err != nil {
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
	tasks    *tasks.Decider // the MCP decision, on enforcer
	upstream *url.URL
	client   *http.Client
	send     func(*http.Request) (*http.Response, error) // with client (listener.Send)
	// endpointURL is the target of a request without a query when the
	// upstream names its endpoint (target), read once.
	endpointURL relay.Target
	handles     handles
	log         *slog.Logger
	gate        *gate.Gate[mcp.Call]

	// tools are execution.taskSupport and the mirrored arguments, and
	// clientTasks the client-side tasks clients created (clienttasks.go):
	// each principal holds a share of each (newToolTables, newClientTasks).
	tools       *owners.Cache[toolKey, tool]
	lists       *lists // the sessions whose tools/list was read whole
	clientTasks *owners.Cache[clientTaskKey, struct{}]

	streams *listener.Streams // the forwarded requests open
	sse     relay.Readers     // the buffers event streams are read through
	bufs    relay.Buffers     // the buffers answers are read into (relayBody)
}

// New builds the sidecar. keys bind handles to principals (see
// handle.LoadKeyring; a reload swaps the ring's keys); client reaches the
// upstream (nil means a default one).
func New(cfg Config, e *proxy.Enforcer, keys *handle.Ring, client *http.Client, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Upstream)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("mcp.upstream: %q is not an http(s) URL", cfg.Upstream)
	}
	if keys == nil {
		return nil, errors.New("mcp: no handle keys")
	}
	client, send := listener.Send(client, u, cfg.Limits, cfg.Streams)
	e0 := *u
	e0.RawQuery = ""
	endpointURL, err := relay.NewTarget(e0.String())
	if err != nil {
		return nil, fmt.Errorf("mcp.upstream: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := newHandles(keys)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, enforcer: e, tasks: tasks.New(e), upstream: u, client: client, send: send, endpointURL: endpointURL, handles: h, log: log,
		clientTasks: newClientTasks(maxClientTasks, e.ShareWatch()), streams: listener.NewStreams("mcp", cfg.Streams)}
	s.tools, s.lists = newToolTables(maxTools, e.ShareWatch(), e.Now)
	gc := gate.MCPConfig{Path: s.endpoint(), Hosts: s.cfg.AllowedHosts, Origins: s.cfg.AllowedOrigins, MaxBody: s.cfg.MaxBodyBytes, MaxBodyKey: "mcp.max_body_bytes"}
	if len(s.cfg.AuthorizationServers) > 0 {
		gc.Metadata, gc.MetadataDoc = s.metadataURL, s.metadataDocPath()
	}
	s.gate = gate.New(gate.MCP(gc), e, log)
	return s, nil
}

// ShutdownTimeout is how long in-flight requests may drain on shutdown.
func (s *Server) ShutdownTimeout() time.Duration { return s.cfg.ShutdownTimeout }

// Answers is the state of the answer bytes in flight budget
// (streams.answer_bytes), for the metrics.
func (s *Server) Answers() listener.AnswerStats { return s.streams.Answers() }

// ServeHTTP admits the request at the gate, decides it and forwards it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.gate.Serve(w, r, s.serve)
}

// serve is one request, stamped and in its flight (gate.Serve).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	in, refused := s.gate.Admit(r.Context(), gate.FromHTTP(w, r))
	if refused != nil {
		refused.Write(w)
		return
	}
	if in.Public != "" {
		s.metadata(w, r)
		return
	}
	p, creds := in.Principal, in.Creds
	dry := s.enforcer.DryRun()
	sid, ok := s.session(r, p.ID)
	if !ok && dry && !strings.HasPrefix(r.Header.Get("Mcp-Session-Id"), handlePrefix) {
		// Dry-run mode hands out the server's own session IDs: one is no
		// refusal; only a handle that is not the caller's is.
		sid, ok = r.Header.Get("Mcp-Session-Id"), true
	}
	if !ok {
		if a := s.gate.DenySession(r.Context(), p.ID); a != nil {
			a.Write(w)
			return
		}
		sid = r.Header.Get("Mcp-Session-Id") // dry run: recorded, forwarded as sent
	}
	x := &exchange{s: s, principal: p.ID, sid: sid, expiry: p.Expiry, strip: authn.StripsCredentials(p), dry: dry, req: r, who: p, creds: creds}
	if v := r.Header.Get("Last-Event-Id"); v != "" {
		// A stream is resumed only from an event id given to this
		// principal in this session; the upstream is not asked otherwise.
		id, ok := s.handles.openIn(kindEvent, p.ID, sid, v)
		if !ok && dry && !strings.HasPrefix(v, handlePrefix) {
			id, ok = v, true // the server's own event id, as dry run hands out
		}
		if !ok {
			if a := s.gate.Deny(r.Context(), p.ID, rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: "invalid request: Last-Event-ID is not an event of this session"},
				http.StatusBadRequest, mcp.ErrInvalidRequest, nil); a != nil {
				a.Write(w)
				return
			}
			id = v
		}
		x.resume(id, r.Method)
	}
	if in.Message {
		s.post(w, r, p, x, in.Call, in.Body)
		return
	}
	// GET (the standalone SSE stream) and DELETE (end of session), without
	// a body: forwarded, with task notifications filtered on the way back.
	s.forward(w, r, x, nil, "")
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

// metadataURL is the protected-resource metadata URL of the 401 challenge:
// from mcp.resource, or this endpoint's own origin (ownOrigin) and path,
// never the request's path.
func (s *Server) metadataURL(r *gate.Request) string {
	if s.cfg.Resource != "" {
		u, err := url.Parse(s.cfg.Resource)
		if err == nil {
			return u.Scheme + "://" + u.Host + gate.MetadataPath(u.EscapedPath())
		}
	}
	return s.ownOrigin(r.Host, r.TLS) + gate.MetadataPath(s.endpoint())
}

// metadataDocPath is where the sidecar serves the protected-resource
// metadata: the path the challenge names.
func (s *Server) metadataDocPath() string {
	if u, err := url.Parse(s.cfg.Resource); err == nil && s.cfg.Resource != "" {
		return gate.MetadataPath(u.EscapedPath())
	}
	return gate.MetadataPath(s.endpoint())
}

// endpoint is the MCP endpoint's path, the upstream's ("/" when it names
// none).
func (s *Server) endpoint() string {
	if s.upstream.Path == "" {
		return "/"
	}
	return s.upstream.EscapedPath()
}

// ownOrigin is the origin of this endpoint as the client reached it, for
// the protected-resource metadata when mcp.resource is not set: the
// request's Host only when it is one of mcp.allowed_hosts (a name no other
// site can take), else the listen address (listener.HTTPConfig.ListenOrigin):
// a metadata document or challenge cached by a shared client must not point
// the next caller at a host the first one chose.
func (s *Server) ownOrigin(host string, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if o := scheme + "://" + host; host != "" && mcp.OriginAllowed(o, s.cfg.AllowedHosts, nil) {
		return o
	}
	return s.cfg.ListenOrigin()
}

// metadata serves the RFC 9728 protected-resource metadata document.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	resource := s.cfg.Resource
	if resource == "" {
		resource = s.ownOrigin(r.Host, r.TLS != nil) + s.endpoint()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(gate.MetadataDocument(resource, s.cfg.AuthorizationServers))
}

// post decides one JSON-RPC message, admitted by the gate, and forwards it.
func (s *Server) post(w http.ResponseWriter, r *http.Request, p authn.Principal, x *exchange, call mcp.Call, body []byte) {
	sid := x.sid
	x.call = call
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
	if call.Kind != mcp.KindResponse || !refused.OK() {
		// net/http keeps each field line a value of its own: not Joined
		h := mcp.Headers{ProtocolVersion: r.Header.Get("Mcp-Protocol-Version"), Method: r.Header.Get("Mcp-Method"), Params: mcp.Params(r.Header)}
		h.Name, h.HasName = headerValue(r.Header, "Mcp-Name")
		req := tasks.Request{Principal: p, Call: call, Limits: mcp.Limits{MaxSteerBytes: s.cfg.MaxSteerBytes, MaxSteerQueue: s.cfg.MaxSteerQueue}, IDReason: x.idReason}
		req.Refused = mcp.CheckHeaders(call, h)
		if req.Refused.OK() && !refused.OK() && !(why == refuseTask && mcp.TaskMethod(call.Method)) {
			req.Refused = refused
		}
		if mcp.TaskMethod(call.Method) && call.HasTaskID {
			req.TaskID, req.Owner = owner, why == refuseNone && owner != ""
			if why == refuseTask {
				req.IDReason = s.enforcer.IDReason(r.Context(), x.idReason, string(handle.ReasonRawID), taskKey(call.TaskID))
			}
			if x.dry && why == refuseTask {
				// The raw ID a client sees in dry-run mode: decided on the
				// owner Warden knows (none when the store cannot be read),
				// forwarded as it is.
				o, err := s.enforcer.Owners(r.Context(), p.ID, taskKey(call.TaskID))
				req.TaskID, req.Owner, owner = call.TaskID, err == nil && o[0] == p.ID, call.TaskID
			}
			if h.HasName && req.Owner {
				name = owner
			}
			x.statusOf = owner
			req.Status = x // ReadStatus
		}
		if call.Method == mcp.MethodToolsCall && req.Refused.OK() {
			t, err := s.taskSupport(r.Context(), r, x.strip, p.ID, sid, call.Params, call.Tool)
			if busy := relay.Refusal(nil); errors.As(err, &busy) {
				// a read past the caller's share (X3) or the answer budget:
				// refused as the limit refuses
				s.gate.Unavailable(r.Context(), p.ID, call.Method, call.ID, err).Write(w)
				return
			}
			if err != nil {
				// Fail closed: whether the call may run as it asks cannot
				// be told.
				s.log.Warn("could not learn a tool's taskSupport; refusing the call", "tool", call.Tool, "principal", p.ID, "err", err)
				cause, _ := gate.Cause(err)
				req.Refused = mcp.UnknownSupport(call.Tool, errors.Is(err, errUnlisted), cause)
			} else {
				// the schema known: each Mcp-Param-* header is the argument
				// it mirrors, as the policy judges it, and each argument of
				// the type the tool reads it as
				if req.Refused = mcp.CheckParams(call, h.Params, t.mirrored, h.ProtocolVersion); req.Refused.OK() {
					req.Arguments, req.Refused = mcp.CheckTypes(call, t.types)
				}
			}
			req.Support, x.support = t.support, t.support
		}
		// Every message whose routing headers disagree with its body, or
		// that names a task or cursor not the caller's, is refused; the
		// others that name a task or a tool are decided.
		if decides(call) || !req.Refused.OK() {
			d, err := s.tasks.Enforce(r.Context(), req)
			if err != nil {
				s.gate.Unavailable(r.Context(), p.ID, call.Method, call.ID, err).Write(w)
				return
			}
			if !d.Allow {
				d.Settle(false)
				s.gate.Refused(d, call.ID).Write(w)
				return
			}
			x.decision = &d
		}
	}
	x.taskID = owner
	x.learnClientTask()
	s.forward(w, r, x, body, name)
}

// unavailable is the message of Warden's answer when it could not decide (a
// task's status or the shared state could not be read): the client may
// retry.
const unavailable = gate.Undecided

// decides reports whether a message goes through the Enforcer.
func decides(c mcp.Call) bool {
	return c.Kind == mcp.KindRequest && decided(c.Method)
}

// decided reports whether requests of method are decided.
func decided(method string) bool { return mcp.Decided(method) }

func headerValue(h http.Header, key string) (string, bool) {
	v, ok := h[http.CanonicalHeaderKey(key)]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}
