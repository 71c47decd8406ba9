package a2a

import (
	"context"
	"fmt"
	"net"

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
	// Both serve until ctx ends or either stops; the first error is the
	// answer.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	relayed := make(chan error, 1)
	go func() { relayed <- s.relay.Serve(ctx, push, s.cfg.ShutdownTimeout); cancel() }()
	err = listener.ServeSidecar(ctx, s, lis, s.cfg.Sidecar(), s.log)
	cancel()
	if rerr := <-relayed; err == nil {
		err = rerr
	}
	return err
}
