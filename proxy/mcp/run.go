package mcp

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/agentwarden/warden/proxy/listener"
)

// Run serves the sidecar on cfg.Listen until ctx ends, then drains in-flight
// requests for at most the shutdown timeout.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("mcp listen: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve is Run on a listener the caller opened. Connections are capped and
// bounded by the configured limits: a request's headers must arrive within
// the header timeout and its body within the body timeout, a keep-alive
// connection closes after the idle timeout, and a request refused before its
// body was read (bad credentials) is answered at once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	lim := s.cfg.Limits.WithDefaults()
	srv := listener.NewHTTPServer(s, lim)
	lis = listener.Cap(lis, lim.MaxConnections, s.log)
	if !s.cfg.Plaintext {
		tc, err := listener.ServerTLS(s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile, "h2", "http/1.1")
		if err != nil {
			lis.Close()
			return fmt.Errorf("mcp tls: %w", err)
		}
		srv.TLSConfig = tc
		lis = tls.NewListener(lis, tc)
	}
	s.log.Info("mcp sidecar listening", "listen", lis.Addr().String(), "upstream", s.cfg.Upstream, "plaintext", s.cfg.Plaintext,
		"max_connections", lim.MaxConnections)
	if err := listener.Serve(ctx, listener.HTTP(srv), lis, s.cfg.ShutdownTimeout, s.log); err != nil {
		return fmt.Errorf("mcp serve: %w", err)
	}
	return nil
}
