package a2a

import (
	"context"
	"fmt"
	"net"

	"github.com/agentwarden/warden/proxy/listener"
)

// Run serves the sidecar on cfg.Listen until ctx ends, then drains in-flight
// requests for at most the shutdown timeout.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("a2a listen: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve is Run on a listener the caller opened (listener.ServeSidecar).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	return listener.ServeSidecar(ctx, s, lis, listener.Sidecar{Name: "a2a", Upstream: s.cfg.Upstream, Plaintext: s.cfg.Plaintext,
		CertFile: s.cfg.CertFile, KeyFile: s.cfg.KeyFile, ClientCAFile: s.cfg.ClientCAFile, Limits: s.cfg.Limits, ShutdownTimeout: s.cfg.ShutdownTimeout}, s.log)
}
