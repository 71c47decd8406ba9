package listener

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
)

// Server is what Serve runs: *grpc.Server is one, HTTP makes an
// *http.Server one.
type Server interface {
	// Serve accepts connections on lis until stopped.
	Serve(lis net.Listener) error
	// GracefulStop stops accepting and returns when in-flight calls are done.
	GracefulStop()
	// Stop closes every connection.
	Stop()
}

// HTTP adapts an *http.Server to Server.
func HTTP(srv *http.Server) Server { return httpServer{srv} }

type httpServer struct{ *http.Server }

func (s httpServer) GracefulStop() { _ = s.Shutdown(context.Background()) }
func (s httpServer) Stop()         { _ = s.Close() }

// Serve runs srv on lis until ctx ends, then stops accepting and lets
// in-flight calls finish for at most shutdownTimeout before closing them
// (logged on log). It returns nil after such a shutdown and, when serving
// ended by itself, what ended it.
func Serve(ctx context.Context, srv Server, lis net.Listener, shutdownTimeout time.Duration, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
			err = errors.New("stopped serving")
		}
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	timer := time.NewTimer(shutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		log.Warn("shutdown timeout: closing the remaining connections", "listen", lis.Addr().String(), "timeout", shutdownTimeout)
		srv.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
