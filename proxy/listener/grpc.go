package listener

import (
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
)

// GRPCMaxStreams is how many calls one client connection may have open at
// once: the MACP runtime's own limit (and nginx's http2_max_concurrent_streams);
// a client needing more opens more connections, within the listener's cap.
const GRPCMaxStreams = 128

// GRPCServerOptions bounds a gRPC server's connections by l (WithDefaults
// applied by the caller): at most GRPCMaxStreams calls a connection at
// once; a connection that has not finished its TLS
// handshake and HTTP/2 preface within GRPCConnectionTimeout is closed; one
// with no call for IdleTimeout is sent GOAWAY and closed; one silent for
// GRPCKeepaliveTime is pinged and closed if the ping is not answered within
// GRPCKeepaliveTimeout; clients may ping every GRPCKeepaliveMinTime, with or
// without calls.
func GRPCServerOptions(l Limits) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(GRPCMaxStreams),
		grpc.ConnectionTimeout(l.GRPCConnectionTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: l.IdleTimeout,
			Time:              l.GRPCKeepaliveTime,
			Timeout:           l.GRPCKeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             l.GRPCKeepaliveMinTime,
			PermitWithoutStream: true,
		}),
	}
}

// Upstream reconnect backoff, besides its cap: gRPC's defaults but for the
// first delay (1 s in gRPC).
const (
	backoffBase       = 100 * time.Millisecond
	backoffMultiplier = 1.6
	backoffJitter     = 0.2
)

// GRPCDialOptions bounds how a gRPC client reconnects to its upstream (l
// WithDefaults applied by the caller): attempts 100ms apart at first, growing
// 1.6x with 20% jitter up to UpstreamBackoffMax, each allowed
// UpstreamConnectTimeout. gRPC's own backoff grows to 120 s, so after a long
// outage the upstream could be back for minutes before Warden noticed.
func GRPCDialOptions(l Limits) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(connectParams(l))}
}

// connectParams is the reconnect backoff GRPCDialOptions sets.
func connectParams(l Limits) grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  min(backoffBase, l.UpstreamBackoffMax),
			Multiplier: backoffMultiplier,
			Jitter:     backoffJitter,
			MaxDelay:   l.UpstreamBackoffMax,
		},
		MinConnectTimeout: l.UpstreamConnectTimeout,
	}
}

// Dialer is the dialer an HTTP upstream transport uses: a connection attempt
// is bounded by UpstreamConnectTimeout (l WithDefaults applied by the
// caller), and open connections send TCP keepalives.
func Dialer(l Limits) *net.Dialer {
	return &net.Dialer{Timeout: l.UpstreamConnectTimeout, KeepAlive: 30 * time.Second}
}
