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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/pushrelay"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/a2a"
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
	if _, err := a2a.ParseAllow(c.WebhookAllow); err != nil {
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
	tenancy  *tenancy.Decider // the A2A decision, on enforcer
	upstream *url.URL
	target   relay.Target // the upstream, as requests to it are made
	allow    a2a.Allow
	client   *http.Client
	send     func(*http.Request) (*http.Response, error) // with client (listener.Send)
	handles  handle.Sealer
	relay    *pushrelay.Relay
	log      *slog.Logger
	gate     *gate.Gate[a2a.Call]
	public   string            // the JSON-RPC endpoint written into agent cards
	streams  *listener.Streams // the forwarded requests open
	bufs     relay.Buffers     // the answers written for the caller
	sse      relay.Readers     // the buffers event streams are read through
}

// kinds are the identifiers A2A handles stand for.
var kinds = []byte{byte(a2a.KindTask), byte(a2a.KindContext), byte(a2a.KindCursor), byte(a2a.KindChosen)}

// New builds the sidecar. keys bind handles to principals (see
// handle.LoadKeyring; a reload swaps the ring's keys); client reaches the
// upstream (nil means a default one).
func New(cfg Config, e *proxy.Enforcer, keys *handle.Ring, client *http.Client, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Upstream)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("a2a.upstream: %q is not an http(s) URL", cfg.Upstream)
	}
	if keys == nil {
		return nil, errors.New("a2a: no handle keys")
	}
	allow, err := a2a.ParseAllow(cfg.WebhookAllow)
	if err != nil {
		return nil, fmt.Errorf("a2a.webhook_allow: %w", err)
	}
	allow.Only = cfg.WebhookAllowOnly
	target, err := relay.NewTarget(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("a2a.upstream: %w", err)
	}
	client, send := listener.Send(client, u, cfg.Limits, cfg.Streams)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := handle.NewSealer(keys, "a2a", kinds)
	if err != nil {
		return nil, fmt.Errorf("a2a: %w", err)
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, enforcer: e, tenancy: tenancy.New(e), upstream: u, target: target, allow: allow, client: client, send: send, handles: h, log: log,
		streams: listener.NewStreams("a2a", cfg.Streams)}
	s.public = publicEndpoint(cfg, s.endpoint())
	if s.relay, err = pushrelay.New(cfg.PushRelay, cfg.Limits, allow, keys, pushOwners{e}, s.sealFor, e, cfg.TLS.ClientCAs, log); err != nil {
		return nil, err
	}
	s.gate = gate.New(gate.A2A(s.endpoint(), s.cfg.MaxBodyBytes, "a2a.max_body_bytes"), e, log)
	return s, nil
}

// ShutdownTimeout is how long in-flight requests may drain on shutdown.
func (s *Server) ShutdownTimeout() time.Duration { return s.cfg.ShutdownTimeout }

// Answers is the state of the answer bytes in flight budget
// (streams.answer_bytes), for the metrics.
func (s *Server) Answers() listener.AnswerStats { return s.streams.Answers() }

// endpoint is the path of the JSON-RPC endpoint, the upstream's.
func (s *Server) endpoint() string {
	if s.upstream.Path == "" {
		return "/"
	}
	return s.upstream.EscapedPath()
}

// ServeHTTP serves the agent card, and admits (proxy/gate), decides and
// forwards JSON-RPC requests; every other path is refused.
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
		s.card(w, r)
		return
	}
	p, creds := in.Principal, in.Creds
	x := &exchange{s: s, req: r, principal: p.ID, expiry: p.Expiry, grant: authn.GrantOf(p, creds, time.Now()), strip: authn.StripsCredentials(p), dry: s.enforcer.DryRun(),
		who: p, creds: creds}
	s.post(w, r, p, x, in.Call, in.Body)
}

// post decides one JSON-RPC request, admitted by the gate, and forwards it.
func (s *Server) post(w http.ResponseWriter, r *http.Request, p authn.Principal, x *exchange, call a2a.Call, body []byte) {
	x.call = call
	req, out := x.toUpstream(call, body)
	req.Principal = p
	x.taskID = req.TaskID
	req.Status = x // ReadStatus
	d, err := s.tenancy.Enforce(r.Context(), req)
	if err != nil {
		s.gate.Unavailable(r.Context(), p.ID, call.Method, call.ID, err).Write(w)
		return
	}
	d.Settle(d.Allow)
	if !d.Allow {
		s.gate.Refused(d, call.ID).Write(w)
		return
	}
	x.decision = &d
	if x.fresh {
		// The context Warden named is the caller's before the upstream
		// sees it (here and in the shared store).
		o, err := d.Learn(r.Context(), owners.Fact{Key: ownerKey(a2a.KindContext, x.contextID), Created: true})
		if err != nil || o[0] != p.ID {
			if err == nil {
				err = errors.New("the new context is another principal's")
			}
			s.gate.Unavailable(r.Context(), p.ID, call.Method, call.ID, fmt.Errorf("record a new A2A context: %w", err)).Write(w)
			return
		}
		x.prove(a2a.KindContext, x.contextID)
	}
	s.forward(w, r, x, out)
}

// unavailable is Warden's answer when it could not decide: retry.
const unavailable = gate.Undecided

// restError answers in the HTTP+JSON binding's error shape (§11.6).
func restError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "status": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
