// Package pushrelay is the A2A sidecar's push-notification relay: Warden
// owns the egress of push notifications instead of checking a webhook URL's
// string and letting the A2A server call it.
//
// Every push config a client sets through the sidecar is rewritten before
// the server sees it: its URL becomes one of the relay's, whose path is a
// sealed Target (the principal, the client's URL, the task and context the
// config was set for) that only Warden's key opens, so a relay URL is
// neither guessable nor forgeable. The server pushes to the relay; the relay
// opens the path, checks that everything the notification names is the
// principal's, rewrites the server's task and context ids into the
// principal's handles, and delivers to the client's URL: it dials only
// addresses rules/a2a.CheckDial allows (the address a name actually resolved
// to, checked as the socket connects: loopback, private, link-local,
// metadata and embedded IPv4 are refused unless allowlisted), follows no
// redirect, uses no proxy, and bounds the body, the time and the answer.
// The relay never answers the server with a redirect. Push config reads
// give the client its own URL back (Restore).
package pushrelay

import (
	"bytes"
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Config is the relay's part of the A2A sidecar's configuration (a2a.push_relay).
type Config struct {
	// Listen is the address the relay serves the A2A server on, plain HTTP
	// (default 127.0.0.1:0: loopback, a port chosen at start; give a fixed
	// port for push configs to outlive a restart).
	Listen string `yaml:"listen" json:"listen"`
	// URL is the relay's base URL as the A2A server reaches it (default
	// http:// and the address the relay listens on).
	URL string `yaml:"url" json:"url"`
	// Timeout bounds one delivery: the dial, the request and the webhook's
	// answer (default 10s).
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// MaxBodyBytes bounds a notification the server pushes (default 4 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// MaxAge is how long a push config set through the relay is delivered
	// to, from when it was set (default 24h; negative: no bound). Past it
	// the relay answers the server 410 Gone: the client sets it again.
	MaxAge time.Duration `yaml:"max_age" json:"max_age"`
}

// Defaults.
const (
	DefaultListen       = "127.0.0.1:0"
	DefaultTimeout      = 10 * time.Second
	DefaultMaxBodyBytes = 4 << 20
	DefaultMaxAge       = 24 * time.Hour
	// maxAnswerBytes bounds what of a webhook's answer is read.
	maxAnswerBytes = 64 << 10
	// maxDepth bounds how deep a notification or a push config is walked.
	maxDepth = 32
)

// WithDefaults fills the zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("a2a.push_relay.listen: %q is not host:port", c.Listen)
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("a2a.push_relay.url: %q is not an http(s) base URL", c.URL)
		}
	}
	if c.Timeout < 0 || c.MaxBodyBytes < 0 {
		return errors.New("a2a.push_relay: timeout and max_body_bytes must not be negative")
	}
	return nil
}

// Describe says, for warden check, how long a push config is delivered to.
func Describe(c Config) string {
	c = c.WithDefaults()
	age := "with no bound of age (a2a.push_relay.max_age negative)"
	if c.MaxAge > 0 {
		age = "for at most " + c.MaxAge.String() + " from when it was set (a2a.push_relay.max_age)"
	}
	return "a push config is delivered to while the credential that set it holds (a static token still configured; a JWT unexpired, its key still in the JWKS, the issuer, audiences and principal claim configured unchanged; a certificate unexpired, its CA still in its trust domain's bundle) and " + age + "; otherwise the A2A server is answered 410 Gone"
}

// Target is what a relay URL stands for: whose config it is, and where and
// about what it delivers.
type Target struct {
	Principal string `json:"p"`
	URL       string `json:"u"`
	// Task is the task the config was set for ("" for a config a message
	// set before its task existed); Context the message's context.
	Task    string `json:"t,omitempty"`
	Context string `json:"c,omitempty"`
	// Grant is what the credential that set the config proved, and when:
	// a notification is delivered only while it holds (Grants) and the
	// config is younger than max_age.
	Grant authn.Grant `json:"g"`
}

// Grants tells whether a credential's grant still holds under the
// configuration loaded now, and records a refusal as every door's is
// (proxy.Enforcer, following reloads: the refused log line, metrics and
// the decision log).
type Grants interface {
	Holds(ctx context.Context, g authn.Grant, now time.Time, cas authn.ClientCAs) error
	Refuse(ctx context.Context, protocol, principal, typ string, v rules.Verdict) proxy.Decision
}

// MessageType is the message type a delivery's decision names (a metric
// label, the decision log's type).
const MessageType = "push_notification"

// Owners tells whose A2A tasks and contexts are (proxy.Enforcer): "" when
// unknown; an error when it cannot be told.
type Owners interface {
	A2AOwners(ctx context.Context, taskIDs []string) ([]string, error)
	A2AContextOwner(ctx context.Context, contextID string) (string, error)
}

// Handles names an upstream id to a principal: the sidecar's handle.
type Handles func(kind a2a.Kind, principal, id string) string

// Relay is the push relay, an http.Handler for the A2A server.
type Relay struct {
	cfg     Config
	limits  listener.Limits
	allow   a2a.Allow
	sealer  handle.Sealer
	owners  Owners
	handles Handles
	grants  Grants
	cas     func() authn.ClientCAs // nil: the door's client CAs are not Warden's
	now     func() time.Time
	client  *http.Client
	log     *slog.Logger
	base    atomic.Pointer[string] // the base URL, once listening
}

// kindTarget is the one kind of the relay's sealed paths.
const kindTarget = 'p'

// pathPrefix is the path relay URLs are under.
const pathPrefix = "/push/"

// New builds the relay. keys are the sidecar's handle keys (relay URLs open
// with them, on any replica that shares them, while their key is in the
// ring); allow is the webhook allowlist; grants tells whether the
// credential that set a config still holds, with cas the CAs the sidecar's
// listener verifies client certificates with now (nil: none).
func New(cfg Config, limits listener.Limits, allow a2a.Allow, keys *handle.Ring, owners Owners, handles Handles, grants Grants, cas func() authn.ClientCAs, log *slog.Logger) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sealer, err := handle.NewSealer(keys, "a2a push relay", []byte{kindTarget})
	if err != nil {
		return nil, fmt.Errorf("a2a push relay: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{cfg: cfg.WithDefaults(), limits: limits.WithDefaults(), allow: allow, sealer: sealer, owners: owners, handles: handles, grants: grants, cas: cas, now: time.Now, log: log}
	r.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // never a proxy from the environment: the relay dials what it checked
			DialContext:            r.dial,
			TLSHandshakeTimeout:    r.cfg.Timeout,
			ResponseHeaderTimeout:  r.cfg.Timeout,
			MaxResponseHeaderBytes: maxAnswerBytes,
			MaxIdleConns:           64,
			IdleConnTimeout:        30 * time.Second,
			DisableCompression:     true,
		},
		// A redirect is the webhook's answer, never followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       r.cfg.Timeout,
	}
	if r.cfg.URL != "" {
		b := strings.TrimSuffix(r.cfg.URL, "/")
		r.base.Store(&b)
	}
	return r, nil
}

// dial connects to a webhook, refusing every address CheckDial refuses: the
// check runs on the address each connection attempt dials (after name
// resolution, for every address a name has), so a name that resolves inside
// is refused like the address itself.
func (r *Relay) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	named := r.allow.Named(host, port)
	d := net.Dialer{Timeout: r.cfg.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: %w", address, err)
		}
		return a2a.CheckDial(ap.Addr(), named, r.allow)
	}}
	return d.DialContext(ctx, network, addr)
}

// Listen opens the relay's listener; the relay's URL is known from then on.
func (r *Relay) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", r.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("a2a push relay listen: %w", err)
	}
	r.Bound(lis.Addr())
	return lis, nil
}

// Bound sets the relay's base URL from the address it listens on, unless
// one is configured.
func (r *Relay) Bound(addr net.Addr) {
	if r.cfg.URL == "" {
		b := "http://" + addr.String()
		r.base.Store(&b)
	}
}

// Serve serves the relay on lis until ctx ends.
func (r *Relay) Serve(ctx context.Context, lis net.Listener, shutdown time.Duration) error {
	srv := listener.NewHTTPServer(r, r.limits)
	r.log.Info("a2a push relay listening", "listen", lis.Addr().String(), "url", r.base.Load())
	if err := listener.Serve(ctx, listener.HTTP(srv), listener.Cap(lis, r.limits.MaxConnections, r.log), shutdown, r.log); err != nil {
		return fmt.Errorf("a2a push relay serve: %w", err)
	}
	return nil
}

// URL returns the relay URL standing for t; "" when the relay is not
// listening.
func (r *Relay) URL(t Target) string {
	b := r.base.Load()
	if b == nil {
		return ""
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	// The handle's prefix is left out: a relay URL is no handle of the
	// client's.
	return *b + pathPrefix + strings.TrimPrefix(r.sealer.Seal(kindTarget, "", string(raw)), handle.Prefix)
}

// target opens a relay URL's path (the token after pathPrefix).
func (r *Relay) target(token string) (Target, bool) {
	raw, ok := r.sealer.Open(kindTarget, "", handle.Prefix+token)
	if !ok {
		return Target{}, false
	}
	var t Target
	if json.Unmarshal([]byte(raw), &t) != nil || t.Principal == "" || t.URL == "" {
		return Target{}, false
	}
	return t, true
}

// targetOf opens a relay URL whatever its origin (the relay may have moved
// since the config was set); ok is false for any other URL.
func (r *Relay) targetOf(v string) (Target, bool) {
	u, err := url.Parse(v)
	if err != nil || !strings.HasPrefix(u.Path, pathPrefix) {
		return Target{}, false
	}
	return r.target(strings.TrimPrefix(u.Path, pathPrefix))
}

// Rewrite replaces every "url" member at any depth of v (a push config, or
// a message's configuration: the places rules/a2a reads webhooks from) with
// the relay URL standing for it, t naming the rest. It returns false when
// the relay is not listening (the config must then be refused).
func (r *Relay) Rewrite(v any, t Target) bool {
	return walkURLs(v, 0, func(u string) (string, bool) {
		t.URL = u
		ru := r.URL(t)
		return ru, ru != ""
	})
}

// Restore gives a push config read back from the server the client's own
// URL where the server holds a relay URL, at any depth, the config read for
// splicing. It returns false when a relay URL in it is another principal's
// (the config is not the caller's), and c.Err when "url" is read two ways
// where it is read (jsonrpc.Object: given twice, or folding like another;
// in a protocol object, such as c, spelled otherwise alone): a client
// matching names without case would read the URL Warden did not restore.
func (r *Relay) Restore(c *jsonrpc.Object, principal string) (mine bool, err error) {
	mine = true
	c.Obj("pushNotificationConfig") // 0.3's nesting: a protocol object too
	c.Walk(func(o *jsonrpc.Object) {
		if !mine || o.Err() != nil {
			return
		}
		u, ok := o.Str("url")
		if !ok {
			return
		}
		t, ok := r.targetOf(u)
		if !ok {
			return // not the relay's: set by someone who bypassed Warden
		}
		if mine = t.Principal == principal; mine {
			o.SetStr("url", t.URL)
		}
	})
	err = c.Err()
	return mine && err == nil, err
}

// walkURLs calls f on every string "url" member at any depth of v,
// replacing it with what f returns; false as soon as f says so.
func walkURLs(v any, depth int, f func(string) (string, bool)) bool {
	if depth > maxDepth {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			if s, ok := m.(string); ok && k == "url" {
				n, ok := f(s)
				if !ok {
					return false
				}
				x[k] = n
				continue
			}
			if !walkURLs(m, depth+1, f) {
				return false
			}
		}
	case []any:
		for _, m := range x {
			if !walkURLs(m, depth+1, f) {
				return false
			}
		}
	}
	return true
}

// forwarded are the headers a delivery carries from the server's push: the
// notification token, the credentials the client set, and the A2A headers.
var forwarded = []string{"Authorization", "X-A2a-Notification-Token", "A2a-Notification-Token", "A2a-Version", "A2a-Extensions"}

// ServeHTTP delivers one notification the server pushed to a relay URL.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "push notifications are POSTed", http.StatusMethodNotAllowed)
		return
	}
	t, ok := r.target(strings.TrimPrefix(req.URL.Path, pathPrefix))
	if !ok || !strings.HasPrefix(req.URL.Path, pathPrefix) {
		http.Error(w, "no such push config", http.StatusNotFound)
		return
	}
	if err := r.holds(req.Context(), t); err != nil {
		r.refuse(w, req, t, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("the notification could not be read whole (a2a.push_relay.max_body_bytes is %d)", r.cfg.MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	out, err := r.rewrite(req.Context(), body, t)
	if err != nil {
		r.log.Warn("a2a push relay: notification not delivered", "principal", t.Principal, "err", err)
		http.Error(w, "the notification is not delivered", http.StatusForbidden)
		return
	}
	status, err := r.deliver(req.Context(), req.Header, out, t)
	if err != nil {
		r.log.Warn("a2a push relay: delivery failed", "principal", t.Principal, "err", err)
		http.Error(w, "the webhook was not reached", http.StatusBadGateway)
		return
	}
	w.WriteHeader(status)
}

// refuse answers a notification to t not delivered because of err (holds):
// the credential that set the config no longer holds (revoked, expired,
// its method unconfigured, its key or CA withdrawn) or the config is too
// old, so the server should drop the config (410 Gone); or whether it
// holds cannot be told now (no JWKS fetched yet), so the server may push
// again (503). Logged, and recorded as a decision (the decision log).
func (r *Relay) refuse(w http.ResponseWriter, req *http.Request, t Target, err error) {
	status, msg := http.StatusGone, "the push config is no longer valid"
	v := rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonPushConfigRevoked, Detail: err.Error()}
	if errors.Is(err, authn.ErrKeysUnavailable) {
		status, msg = http.StatusServiceUnavailable, "whether the push config is still valid cannot be told now; retry later"
		v.Code, v.Reason = rules.CodeInternal, rules.ReasonUnavailable
	}
	r.log.Warn("a2a push relay: notification refused", "principal", t.Principal, "decision", "deny", "reason", string(v.Reason), "err", err)
	if r.grants != nil {
		r.grants.Refuse(req.Context(), "a2a", t.Principal, MessageType, v)
	}
	http.Error(w, msg, status)
}

// clientCAs are the CAs the sidecar's listener verifies client
// certificates with now; nil when they are not Warden's.
func (r *Relay) clientCAs() authn.ClientCAs {
	if r.cas == nil {
		return nil
	}
	return r.cas()
}

// holds reports why a target is no longer delivered to: its config is past
// max_age, or the credential that set it no longer holds.
func (r *Relay) holds(ctx context.Context, t Target) error {
	if t.Grant.Principal != t.Principal {
		return errors.New("the push config was set without a credential grant (before Warden sealed one)")
	}
	now := r.now()
	if set := time.Unix(t.Grant.Issued, 0); r.cfg.MaxAge > 0 && now.Sub(set) > r.cfg.MaxAge {
		return fmt.Errorf("the push config was set %s, past a2a.push_relay.max_age (%s)", set.UTC().Format(time.RFC3339), r.cfg.MaxAge)
	}
	if r.grants == nil {
		return errors.New("no authenticator to check the credential with")
	}
	if err := r.grants.Holds(ctx, t.Grant, now, r.clientCAs()); err != nil {
		return fmt.Errorf("the credential that set the push config no longer holds: %w", err)
	}
	return nil
}

// deliver POSTs the notification to the client's URL and returns the status
// to answer the server with: the webhook's own when it is 2xx or 4xx/5xx,
// never a redirect (a redirecting server would follow it).
func (r *Relay) deliver(ctx context.Context, h http.Header, body []byte, t Target) (int, error) {
	if err := a2a.CheckWebhook(t.URL, r.allow); err != nil {
		return 0, err // the allowlist may have changed since the config was set
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	out.Header.Set("Content-Type", "application/json")
	for _, k := range forwarded {
		for _, v := range h.Values(k) {
			out.Header.Add(k, v)
		}
	}
	resp, err := r.client.Do(out)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode/100 == 3 {
		return 0, fmt.Errorf("the webhook answered a redirect (%d), which the relay does not follow", resp.StatusCode)
	}
	if resp.StatusCode/100 == 1 {
		return http.StatusBadGateway, nil
	}
	return resp.StatusCode, nil
}
