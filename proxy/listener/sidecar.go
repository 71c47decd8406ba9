package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"
)

// HTTPConfig is the part of an HTTP sidecar's configuration section (mcp:, a2a:)
// that every HTTP sidecar has, inline in the section.
type HTTPConfig struct {
	// Listen is the address the sidecar serves on (host:port).
	Listen string `yaml:"listen" json:"listen"`
	// Upstream is the server's endpoint URL (http://host:port/path).
	Upstream string `yaml:"upstream" json:"upstream"`
	// Plaintext serves without TLS (it must be set explicitly); otherwise
	// CertFile and KeyFile are the listener's certificate, and ClientCAFile,
	// when set, verifies client certificates (mTLS).
	Plaintext    bool   `yaml:"plaintext" json:"plaintext"`
	CertFile     string `yaml:"cert_file" json:"cert_file"`
	KeyFile      string `yaml:"key_file" json:"key_file"`
	ClientCAFile string `yaml:"client_ca_file" json:"client_ca_file"`
	// HandleKeyFile holds the key (at least 32 bytes) that binds handles
	// (task, session, context, event id, cursor) to principals, or a keyring
	// {"keys":[{"id":"2","secret":"..."},{"id":"1","secret":"..."}]}: the
	// first key seals new handles, every listed key opens its own, so a key
	// is rotated by prepending the new one and reloading (SIGHUP). Replicas
	// share it; with none, a random key is made at start and handles do not
	// survive a restart.
	HandleKeyFile string `yaml:"handle_key_file" json:"handle_key_file"`
	// MaxBodyBytes bounds a request body. A larger one is answered 413 with
	// a JSON-RPC error that names the setting; the upstream never sees it.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// MaxResponseBytes bounds one message from the upstream: an answer body
	// or one SSE event, which Warden reads whole to check it before any of
	// it reaches the caller. An answer over it becomes a JSON-RPC error for
	// its request that names the setting. -1 sets no bound of Warden's own.
	MaxResponseBytes int64 `yaml:"max_response_bytes" json:"max_response_bytes"`
	// ShutdownTimeout bounds how long in-flight requests may drain.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
	// Limits bounds the listener's connections and the dial to the upstream;
	// zero fields take the defaults.
	Limits Limits `yaml:"limits" json:"limits"`
	// Streams bounds the requests forwarded upstream and held open at
	// once, in total and per principal.
	Streams StreamLimits `yaml:"streams" json:"streams"`
	// TLS is the listener's TLS material when the caller loaded it (warden
	// serve, to reload it on SIGHUP); nil: read from the files when serving.
	TLS *TLS `yaml:"-" json:"-"`
}

// Defaults of HTTPConfig.
const (
	DefaultMaxBodyBytes     = 4 << 20
	DefaultMaxResponseBytes = 64 << 20
	DefaultShutdownTimeout  = 10 * time.Second
)

// WithDefaults fills the zero bounds with their defaults.
func (h HTTPConfig) WithDefaults() HTTPConfig {
	if h.MaxBodyBytes == 0 {
		h.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if h.MaxResponseBytes == 0 {
		h.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if h.ShutdownTimeout == 0 {
		h.ShutdownTimeout = DefaultShutdownTimeout
	}
	h.Streams = h.Streams.WithDefaults(h.Limits.WithDefaults().MaxConnections)
	return h
}

// Sidecar is how an HTTP sidecar (MCP, A2A) serves: its name for logs and
// errors (its configuration section) and its configuration.
type Sidecar struct {
	Name string
	HTTPConfig
}

// ListenOrigin is the origin clients reach the sidecar at when no public
// URL is configured: the listen address (a wildcard's as localhost), https
// unless the listener is plaintext; "" when Listen is not host:port. It is
// what Warden writes into documents that name its own URL (agent cards,
// protected-resource metadata) instead of the request's Host, which the
// client chose: a document cached by a shared client or gateway would send
// the next caller where the first one named.
func (h HTTPConfig) ListenOrigin() string {
	host, port, err := net.SplitHostPort(h.Listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	scheme := "https"
	if h.Plaintext {
		scheme = "http"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// Validate checks what every HTTP sidecar needs: an http(s) upstream URL,
// TLS or plaintext chosen explicitly, a response bound, and valid limits. Errors name the keys
// of sc.Name's section.
func (sc Sidecar) Validate() error {
	u, err := url.Parse(sc.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.upstream: %q is not an http(s) URL", sc.Name, sc.Upstream)
	}
	if !sc.Plaintext && (sc.CertFile == "" || sc.KeyFile == "") {
		return errors.New(sc.Name + ": give a TLS certificate and key, or serve plaintext explicitly")
	}
	if sc.MaxResponseBytes < -1 {
		return errors.New(sc.Name + ".max_response_bytes: give a positive bound, or -1 for none")
	}
	if err := sc.Limits.Validate(); err != nil {
		return fmt.Errorf("%s.limits: %w", sc.Name, err)
	}
	if err := sc.Streams.Validate(); err != nil {
		return fmt.Errorf("%s.streams: %w", sc.Name, err)
	}
	return nil
}

// UpstreamClient is the HTTP client a sidecar reaches its upstream with: no
// proxy from the environment, no compression (answers are read as sent;
// relay.Identity asks the upstream for none), HTTP/1.1 only (DialContext
// set, HTTP/2 not forced: TestUpstreamClientHTTP1), keep-alive connections, at most s.UpstreamConns() of them (a request
// beyond waits for one, within its context), and the dial bounded by l
// (Dialer). It follows no redirect: an upstream's 3xx is its answer, passed
// to the client as it came (a request Warden decided is never sent again to
// another address, credentials and all).
func UpstreamClient(l Limits, s StreamLimits) *http.Client {
	l = l.WithDefaults()
	s = s.WithDefaults(l.MaxConnections)
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		MaxConnsPerHost:    s.UpstreamConns(),
		DisableCompression: true, DialContext: Dialer(l).DialContext,
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// LoadTLS is the listener's TLS material: sc.TLS, or read from the files.
func (sc Sidecar) LoadTLS(log *slog.Logger) (*TLS, error) {
	if sc.TLS != nil {
		return sc.TLS, nil
	}
	t, err := NewTLS(sc.CertFile, sc.KeyFile, sc.ClientCAFile, log)
	if err != nil {
		return nil, fmt.Errorf("%s tls: %w", sc.Name, err)
	}
	return t, nil
}

// RunSidecar listens on sc.Listen and serves h there (ServeSidecar).
func RunSidecar(ctx context.Context, h http.Handler, sc Sidecar, log *slog.Logger) error {
	lis, err := net.Listen("tcp", sc.Listen)
	if err != nil {
		return fmt.Errorf("%s listen: %w", sc.Name, err)
	}
	return ServeSidecar(ctx, h, lis, sc, log)
}

// ServeSidecar serves h on lis until ctx ends, then drains in-flight
// requests for at most the shutdown timeout. Connections are held within
// the limits (Bound; a request whose credential the handler's
// authentication accepts proves its connection): a request's headers must
// arrive within the header timeout and its body within the body timeout, a
// keep-alive connection closes after the idle timeout.
func ServeSidecar(ctx context.Context, h http.Handler, lis net.Listener, sc Sidecar, log *slog.Logger) error {
	lim := sc.Limits.WithDefaults()
	srv := NewHTTPServer(h, lim)
	capped := Bound(lis, lim.Conns(), log)
	srv.ConnContext = capped.ConnContext
	lis = capped
	if !sc.Plaintext {
		t, err := sc.LoadTLS(log)
		if err != nil {
			lis.Close()
			return err
		}
		tc := t.Config("h2", "http/1.1")
		srv.TLSConfig = tc
		lis = tls.NewListener(t.Track(lis), tc)
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = t.Watch(wctx, lim.TLSReloadInterval) }()
	}
	log.Info(sc.Name+" sidecar listening", "listen", lis.Addr().String(), "upstream", sc.Upstream, "plaintext", sc.Plaintext,
		"max_connections", lim.MaxConnections)
	if err := Serve(ctx, HTTP(srv), lis, sc.ShutdownTimeout, log); err != nil {
		return fmt.Errorf("%s serve: %w", sc.Name, err)
	}
	return nil
}

// Send is how a sidecar sends a request to its upstream (u): with client,
// or, when client is nil, with the one UpstreamClient builds, whose
// transport's RoundTrip it is. That client follows no redirect, keeps no
// cookie and sets no timeout, so http.Client.Do would add only what it
// keeps for redirects, a copy of the request's headers, per request; with
// credentials in u, Do adds them (basic authentication) and is kept.
func Send(client *http.Client, u *url.URL, l Limits, s StreamLimits) (*http.Client, func(*http.Request) (*http.Response, error)) {
	if client != nil {
		return client, client.Do
	}
	client = UpstreamClient(l, s)
	if u.User != nil {
		return client, client.Do
	}
	return client, client.Transport.RoundTrip
}
