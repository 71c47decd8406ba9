package a2a

import (
	"context"
	"net"

	"github.com/agentwarden/warden/proxy/listener"
)

// Sidecar is how the sidecar serves (listener.Sidecar).
func (c Config) Sidecar() listener.Sidecar {
	return listener.Sidecar{Name: "a2a", HTTPConfig: c.HTTPConfig}
}

// Run serves the sidecar on cfg.Listen until ctx ends, then drains in-flight
// requests for at most the shutdown timeout.
func (s *Server) Run(ctx context.Context) error {
	return listener.RunSidecar(ctx, s, s.cfg.Sidecar(), s.log)
}

// Serve is Run on a listener the caller opened (listener.ServeSidecar).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	return listener.ServeSidecar(ctx, s, lis, s.cfg.Sidecar(), s.log)
}
