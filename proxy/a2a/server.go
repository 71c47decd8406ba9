// Package a2a is Warden's A2A sidecar: an HTTP reverse proxy in front of an
// A2A 1.0 server's JSON-RPC binding (HTTP with SSE). It authenticates every
// request, hands clients principal-bound handles (proxy/handle) instead of
// upstream task and context ids and page tokens, decides every request with
// the Enforcer (ownership, task states, webhook URLs), and forwards what it
// decided, rewriting ids in answers and SSE events and withholding
// push-notification credentials.
//
// What the sidecar reads is what the upstream reads, or the request is
// refused: requests are read by rules/a2a.Parse (member names that differ
// only in case where Warden reads, ids other than strings and canonical
// integers, batches and notifications are refused), and only the methods of
// A2A 1.0 are served (anything else: -32601, never forwarded).
//
// Every place a handle belongs (the task a method names, a message's taskId,
// contextId and referenceTaskIds, ListTasks' contextId and pageToken) must
// hold one of the caller's handles; anything else (a raw upstream id, another
// principal's handle, a made-up id) gets TaskNotFoundError (-32001, "Task not
// found"), the same bytes for each, without asking the upstream.
//
// Answers fail closed: an answer whose id is not the request's, or that is
// not one JSON object, is replaced with an error; ListTasks keeps only the
// caller's tasks. The public agent card is passed through with the JSON-RPC
// interface's URL rewritten to Warden's listener and the bindings Warden does
// not enforce (HTTP+JSON, gRPC) left out; every other path is refused with
// the HTTP+JSON binding's 404.
package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/pushrelay"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules"
	a2arules "github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Config is the A2A sidecar's part of the configuration: an HTTP sidecar's
// (its Upstream is the A2A server's JSON-RPC endpoint URL,
// http://host:port/jsonrpc, and its agent card is read from the same
// origin), and the agent card's URL and the webhooks allowed.
type Config struct {
	listener.HTTPConfig `yaml:",inline"`
	// PublicURL is the JSON-RPC endpoint as clients reach Warden, written
	// into the agent card; empty means the listen address (a wildcard's as
	// localhost) with the upstream's path, never the request's Host.
	PublicURL string `yaml:"public_url" json:"public_url"`
	// WebhookAllow lists networks (CIDR), addresses, hosts and host:port
	// pairs a push-notification URL may name although they are loopback,
	// private or link-local.
	WebhookAllow []string `yaml:"webhook_allow" json:"webhook_allow"`
	// WebhookAllowOnly lets push notifications go to what WebhookAllow
	// names only.
	WebhookAllowOnly bool `yaml:"webhook_allow_only" json:"webhook_allow_only"`
	// PushRelay is the push relay the server's notifications go through.
	PushRelay pushrelay.Config `yaml:"push_relay" json:"push_relay"`
}

// Defaults.
const (
	DefaultMaxBodyBytes     = listener.DefaultMaxBodyBytes
	DefaultMaxResponseBytes = listener.DefaultMaxResponseBytes
	DefaultShutdownTimeout  = listener.DefaultShutdownTimeout
)

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	if err := c.Sidecar().Validate(); err != nil {
		return err
	}
	if c.PublicURL != "" {
		if p, err := url.Parse(c.PublicURL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("a2a.public_url: %q is not an http(s) URL", c.PublicURL)
		}
	}
	if c.MaxBodyBytes < 0 {
		return errors.New("a2a.max_body_bytes must not be negative")
	}
	if _, err := a2arules.ParseAllow(c.WebhookAllow); err != nil {
		return fmt.Errorf("a2a.webhook_allow: %w", err)
	}
	if c.WebhookAllowOnly && len(c.WebhookAllow) == 0 {
		return errors.New("a2a.webhook_allow_only: give the webhooks allowed in a2a.webhook_allow")
	}
	return c.PushRelay.Validate()
}

func (c Config) withDefaults() Config {
	c.HTTPConfig = c.HTTPConfig.WithDefaults()
	return c
}

// Server is the A2A sidecar, an http.Handler.
type Server struct {
	cfg      Config
	enforcer *proxy.Enforcer
	upstream *url.URL
	allow    a2arules.Allow
	client   *http.Client
	handles  handle.Sealer
	relay    *pushrelay.Relay
	log      *slog.Logger
	public   string            // the JSON-RPC endpoint written into agent cards
	streams  *listener.Streams // the forwarded requests open
}

// kinds are the identifiers A2A handles stand for.
var kinds = []byte{byte(a2arules.KindTask), byte(a2arules.KindContext), byte(a2arules.KindCursor), byte(a2arules.KindChosen)}

// New builds the sidecar. key binds handles to principals (at least 32
// bytes); client reaches the upstream (nil means a default one).
func New(cfg Config, e *proxy.Enforcer, key []byte, client *http.Client, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Upstream)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("a2a.upstream: %q is not an http(s) URL", cfg.Upstream)
	}
	if len(key) < 32 {
		return nil, errors.New("a2a: the handle key must have at least 32 bytes")
	}
	allow, err := a2arules.ParseAllow(cfg.WebhookAllow)
	if err != nil {
		return nil, fmt.Errorf("a2a.webhook_allow: %w", err)
	}
	allow.Only = cfg.WebhookAllowOnly
	if client == nil {
		client = listener.UpstreamClient(cfg.Limits, cfg.Streams)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := handle.New(key, "a2a", kinds)
	if err != nil {
		return nil, fmt.Errorf("a2a: %w", err)
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, enforcer: e, upstream: u, allow: allow, client: client, handles: h, log: log,
		streams: listener.NewStreams("a2a", cfg.Streams)}
	s.public = publicEndpoint(cfg, s.endpoint())
	if s.relay, err = pushrelay.New(cfg.PushRelay, cfg.Limits, allow, key, e, s.sealFor, log); err != nil {
		return nil, err
	}
	return s, nil
}

// ShutdownTimeout is how long in-flight requests may drain on shutdown.
func (s *Server) ShutdownTimeout() time.Duration { return s.cfg.ShutdownTimeout }

// Agent card paths: A2A 1.0's, and 0.3's which servers still serve.
const (
	cardPath    = "/.well-known/agent-card.json"
	oldCardPath = "/.well-known/agent.json"
)

// endpoint is the path of the JSON-RPC endpoint, the upstream's.
func (s *Server) endpoint() string {
	if s.upstream.Path == "" {
		return "/"
	}
	return s.upstream.Path
}

// ServeHTTP serves the agent card, and authenticates, decides and forwards
// JSON-RPC requests; every other path is refused.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == cardPath || r.URL.Path == oldCardPath:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			restError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "the agent card is read with GET")
			return
		}
		s.card(w, r)
		return
	case r.URL.Path != s.endpoint():
		// The HTTP+JSON (REST) binding and anything else: not enforced,
		// so not served.
		s.enforcer.Refuse("a2a", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonUnknownMethod, Detail: "path " + r.URL.Path + " is not served"})
		restError(w, http.StatusNotFound, "NOT_FOUND", "Warden serves A2A's JSON-RPC binding at "+s.endpoint()+" only")
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST")
		s.refuse(w, "", rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusMethodNotAllowed, nil, jsonrpc.ErrInvalidRequest, "the JSON-RPC binding takes POST")
		return
	}
	creds, err := authn.FromHTTP(r)
	var p authn.Principal
	if err == nil {
		p, err = s.enforcer.Authenticate(r.Context(), creds)
	}
	if errors.Is(err, authn.ErrKeysUnavailable) {
		s.log.Warn("cannot authenticate: signing keys unavailable", "err", err)
		relay.WriteError(w, http.StatusServiceUnavailable, nil, jsonrpc.ErrInternal, "authentication is unavailable; retry later")
		return
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", authn.Challenge("", err))
		s.refuse(w, "", rules.CodeUnauthenticated, rules.ReasonUnauthenticated, http.StatusUnauthorized, nil, jsonrpc.ErrInvalidRequest, "Unauthorized: "+authn.Reason(err))
		return
	}
	x := &exchange{s: s, principal: p.ID, expiry: p.Expiry, strip: authn.StripsCredentials(p), dry: s.enforcer.DryRun(),
		guard: func(ctx context.Context) (context.Context, func()) {
			return s.enforcer.Guard(ctx, creds, p, proxy.DefaultCredentialCheck, errCredentialGone)
		}}
	s.post(w, r, p, x)
}

// errCredentialGone ends an event stream whose credential expired or was
// revoked while it was open.
var errCredentialGone = errors.New("the credential expired or was revoked")

// post decides one JSON-RPC request and forwards it.
func (s *Server) post(w http.ResponseWriter, r *http.Request, p authn.Principal, x *exchange) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusRequestEntityTooLarge, nil, jsonrpc.ErrInvalidRequest,
				fmt.Sprintf("the request exceeds Warden's limit a2a.max_body_bytes (%d bytes)", s.cfg.MaxBodyBytes))
			return
		}
		s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusBadRequest, nil, jsonrpc.ErrParse, "could not read the request body")
		return
	}
	if err := listener.CheckBodyEncoding(r.Header.Values("Content-Encoding")...); err != nil {
		s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusUnsupportedMediaType, nil, jsonrpc.ErrInvalidRequest, err.Error())
		return
	}
	call, err := a2arules.Parse(body)
	if err != nil {
		code := jsonrpc.CodeOf(err)
		var id json.RawMessage
		if jsonrpc.ValidID(call.ID) {
			id = call.ID
		}
		s.refuse(w, p.ID, rules.CodeInvalidRequest, rules.ReasonMalformedRequest, http.StatusOK, id, code, err.Error())
		return
	}
	if !a2arules.Known(call.Method) {
		s.refuse(w, p.ID, rules.CodeMethodNotFound, rules.ReasonUnknownMethod, http.StatusOK, call.ID, jsonrpc.ErrMethodNotFound, "Method not found")
		return
	}
	x.call = call
	req, out := x.toUpstream(call)
	req.Principal = p
	req.Status = func(ctx context.Context) (string, error) { return s.readState(ctx, r, x.strip, req.TaskID) }
	d, err := s.enforcer.EnforceA2A(r.Context(), req)
	if err != nil {
		s.log.Warn("could not decide an A2A request; refusing it", "method", call.Method, "principal", p.ID, "err", err)
		relay.WriteError(w, http.StatusServiceUnavailable, call.ID, jsonrpc.ErrInternal, unavailable)
		return
	}
	d.Settle(d.Allow)
	if !d.Allow {
		status, code, msg := a2arules.Answer(d.Code, d.Message)
		w.Header().Set("X-Warden-Decision", d.ID)
		relay.WriteError(w, status, call.ID, code, msg)
		return
	}
	x.taskID = req.TaskID
	if x.fresh {
		// The context Warden named is the caller's before the upstream
		// sees it (here and in the shared store).
		o, err := s.enforcer.A2AContextSeen(r.Context(), x.contextID, p.ID)
		if err != nil || o != p.ID {
			s.log.Warn("could not record a new A2A context; refusing the message", "principal", p.ID, "err", err)
			relay.WriteError(w, http.StatusServiceUnavailable, call.ID, jsonrpc.ErrInternal, unavailable)
			return
		}
		x.prove(a2arules.KindContext, x.contextID)
	}
	s.forward(w, r, x, out)
}

// unavailable is Warden's answer when it could not decide: retry.
const unavailable = "Warden could not decide this request; retry later"

// refuse answers a request refused at the front door and records the
// refusal as a decision, its ID in X-Warden-Decision.
func (s *Server) refuse(w http.ResponseWriter, principal string, c rules.Code, reason rules.Reason, status int, id json.RawMessage, code int, msg string) {
	d := s.enforcer.Refuse("a2a", principal, "", rules.Verdict{Code: c, Reason: reason, Detail: msg})
	w.Header().Set("X-Warden-Decision", d.ID)
	relay.WriteError(w, status, id, code, msg)
}

// restError answers in the HTTP+JSON binding's error shape (§11.6).
func restError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "status": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// encode writes v as JSON without HTML escaping (the upstream's text stays
// as it was).
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
