package listener

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Sidecar is how an HTTP sidecar (MCP, A2A) serves: its name for logs and
// errors, TLS or plaintext, the connection bounds and the drain time.
type Sidecar struct {
	Name, Upstream                  string
	Plaintext                       bool
	CertFile, KeyFile, ClientCAFile string
	Limits                          Limits
	ShutdownTimeout                 time.Duration
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
