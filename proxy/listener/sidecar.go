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

// Sidecar is how an HTTP sidecar (MCP, A2A) serves: its name for logs and
// errors (its configuration section), the address it listens on, its
// upstream, TLS or plaintext, the connection bounds and the drain time.
type Sidecar struct {
	Name, Listen, Upstream          string
	Plaintext                       bool
	CertFile, KeyFile, ClientCAFile string
	Limits                          Limits
	ShutdownTimeout                 time.Duration
}

// Validate checks what every HTTP sidecar needs: an http(s) upstream URL,
// TLS or plaintext chosen explicitly, and valid limits. Errors name the keys
// of sc.Name's section.
func (sc Sidecar) Validate() error {
	u, err := url.Parse(sc.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.upstream: %q is not an http(s) URL", sc.Name, sc.Upstream)
	}
	if !sc.Plaintext && (sc.CertFile == "" || sc.KeyFile == "") {
		return errors.New(sc.Name + ": give a TLS certificate and key, or serve plaintext explicitly")
	}
	if err := sc.Limits.Validate(); err != nil {
		return fmt.Errorf("%s.limits: %w", sc.Name, err)
	}
	return nil
}

// UpstreamClient is the HTTP client a sidecar reaches its upstream with: no
// proxy from the environment, no compression (answers are read as sent),
// keep-alive connections, and the dial bounded by l (Dialer).
func UpstreamClient(l Limits) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true, DialContext: Dialer(l.WithDefaults()).DialContext,
	}}
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
// requests for at most the shutdown timeout. Connections are capped and
// bounded by the limits: a request's headers must arrive within the header
// timeout and its body within the body timeout, a keep-alive connection
// closes after the idle timeout.
func ServeSidecar(ctx context.Context, h http.Handler, lis net.Listener, sc Sidecar, log *slog.Logger) error {
	lim := sc.Limits.WithDefaults()
	srv := NewHTTPServer(h, lim)
	lis = Cap(lis, lim.MaxConnections, log)
	if !sc.Plaintext {
		tc, err := ServerTLS(sc.CertFile, sc.KeyFile, sc.ClientCAFile, "h2", "http/1.1")
		if err != nil {
			lis.Close()
			return fmt.Errorf("%s tls: %w", sc.Name, err)
		}
		srv.TLSConfig = tc
		lis = tls.NewListener(lis, tc)
	}
	log.Info(sc.Name+" sidecar listening", "listen", lis.Addr().String(), "upstream", sc.Upstream, "plaintext", sc.Plaintext,
		"max_connections", lim.MaxConnections)
	if err := Serve(ctx, HTTP(srv), lis, sc.ShutdownTimeout, log); err != nil {
		return fmt.Errorf("%s serve: %w", sc.Name, err)
	}
	return nil
}
