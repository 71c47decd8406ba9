package a2a

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sync/errgroup"

	"github.com/agentwarden/warden/proxy/listener"
)

// Sidecar is how the sidecar serves (listener.Sidecar).
func (c Config) Sidecar() listener.Sidecar {
	return listener.Sidecar{Name: "a2a", HTTPConfig: c.HTTPConfig}
}

// Run serves the sidecar on cfg.Listen, and the push relay on its own
// listener, until ctx ends, then drains in-flight requests for at most the
// shutdown timeout.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("a2a listen: %w", err)
	}
	return s.Serve(ctx, lis)
}

// Serve is Run on a listener the caller opened (listener.ServeSidecar); the
// push relay listens on a2a.push_relay.listen.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	push, err := s.relay.Listen()
	if err != nil {
		lis.Close()
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.relay.Serve(gctx, push, s.cfg.ShutdownTimeout) })
	g.Go(func() error { return listener.ServeSidecar(gctx, s, lis, s.cfg.Sidecar(), s.log) })
	return g.Wait()
}
