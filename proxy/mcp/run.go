package mcp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
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

// Serve is Run on a listener the caller opened.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	if !s.cfg.Plaintext {
		tc, err := s.serverTLS()
		if err != nil {
			lis.Close()
			return err
		}
		srv.TLSConfig = tc
		lis = tls.NewListener(lis, tc)
	}
	s.log.Info("mcp sidecar listening", "listen", lis.Addr().String(), "upstream", s.cfg.Upstream, "plaintext", s.cfg.Plaintext)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mcp serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("mcp sidecar: shutdown timeout, closing remaining requests", "timeout", s.cfg.ShutdownTimeout)
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("mcp serve: %w", err)
	}
	return nil
}

func (s *Server) serverTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("mcp tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if s.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(s.cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("mcp tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mcp tls: no certificate in %s", s.cfg.ClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}
