// Package listener bounds what a client can hold open on Warden's listeners
// and how Warden reconnects to its upstreams. It holds the Limits every
// adapter (MACP, MCP, ext_authz) applies: a connection cap per listener below
// the process's file limit, header, body and idle timeouts for HTTP,
// connection and keepalive limits for gRPC, and a capped reconnect backoff
// upstream; with them the listener wrapper, the http.Server and gRPC options
// built from them, the one TLS server configuration, and the serve-then-drain
// loop the three listeners share.
package listener

import (
	"errors"
	"fmt"
	"time"
)

// Limits bounds one listener's connections and its reconnects upstream. A
// zero field takes its default (see WithDefaults); a negative one is an
// error.
type Limits struct {
	// MaxConnections caps the connections the listener holds open at once;
	// one more is accepted and closed at once. The default is
	// min(4096, (RLIMIT_NOFILE - 256) / 4), so the three listeners together,
	// and the upstream connection an MCP request holds, stay below the file
	// limit.
	MaxConnections int `yaml:"max_connections" json:"max_connections"`
	// MaxConnectionsPerSource caps the connections one source address holds
	// (an IPv6 address counts by its /64); one more is closed at once
	// (default a quarter of MaxConnections, at least 32 or MaxConnections).
	// Clients behind one address (a NAT, a proxy) share it.
	MaxConnectionsPerSource int `yaml:"max_connections_per_source" json:"max_connections_per_source"`
	// MaxUnauthenticated caps the connections on which no request has yet
	// presented a valid credential, all sources together (default a quarter
	// of MaxConnections, at least 8 or MaxConnections), and
	// MaxUnauthenticatedPerSource those of one source address (default 64,
	// at most MaxUnauthenticated). When the listener or this share is full,
	// a newcomer takes the place of the oldest unauthenticated connection of
	// the address holding the most, when that address holds more than the
	// newcomer's would; an authenticated connection is never closed for
	// one.
	MaxUnauthenticated          int `yaml:"max_unauthenticated" json:"max_unauthenticated"`
	MaxUnauthenticatedPerSource int `yaml:"max_unauthenticated_per_source" json:"max_unauthenticated_per_source"`
	// AuthTimeout closes a connection on which no request has presented a
	// valid credential within this long of its accept (default 10s): the
	// TLS handshake, the first request's headers (a gRPC call's) and their
	// check must fit in it. Calls without credentials (the gRPC health
	// service, public discovery) do not count: a client making only those
	// reconnects every AuthTimeout. In dry run a refused credential counts
	// as presented. ext_authz, whose client is Envoy, applies
	// MaxConnections alone of these four.
	AuthTimeout time.Duration `yaml:"auth_timeout" json:"auth_timeout"`
	// HeaderTimeout bounds the TLS handshake, request line and headers of an
	// HTTP request, counted from the connection's first byte (default 10s).
	HeaderTimeout time.Duration `yaml:"header_timeout" json:"header_timeout"`
	// BodyTimeout bounds reading a whole HTTP request, body included, from its
	// first byte (default 60s, nginx's client_body_timeout), and the wait for
	// a MACP call's one request message after its headers. It does not bound
	// the response: an SSE stream may last as long as it needs.
	BodyTimeout time.Duration `yaml:"body_timeout" json:"body_timeout"`
	// IdleTimeout closes an HTTP keep-alive connection that has no request, or
	// a gRPC connection that has had no call, for this long (default 75s,
	// nginx's keepalive_timeout; gRPC MaxConnectionIdle, then a GOAWAY and up
	// to 5 s more).
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// GRPCConnectionTimeout bounds a new gRPC connection's TLS handshake and
	// HTTP/2 preface and settings (default 10s; gRPC's own is 120s).
	GRPCConnectionTimeout time.Duration `yaml:"grpc_connection_timeout" json:"grpc_connection_timeout"`
	// GRPCKeepaliveTime is how long a gRPC connection may be silent before
	// Warden pings it, and GRPCKeepaliveTimeout how long the ping may go
	// unanswered before the connection is closed (defaults 60s and 20s), so
	// a peer that stopped answering is closed within their sum even with
	// calls open.
	GRPCKeepaliveTime    time.Duration `yaml:"grpc_keepalive_time" json:"grpc_keepalive_time"`
	GRPCKeepaliveTimeout time.Duration `yaml:"grpc_keepalive_timeout" json:"grpc_keepalive_timeout"`
	// GRPCKeepaliveMinTime is the shortest interval at which clients may ping;
	// pings without calls are allowed (default 10s; a client that pings more
	// often is sent GOAWAY).
	GRPCKeepaliveMinTime time.Duration `yaml:"grpc_keepalive_min_time" json:"grpc_keepalive_min_time"`
	// UpstreamBackoffMax caps the delay between attempts to reconnect to a
	// gRPC upstream (default 1s; attempts start 100ms apart and grow 1.6x,
	// with 20% jitter), so Warden follows an upstream back within about a
	// second of its return.
	UpstreamBackoffMax time.Duration `yaml:"upstream_backoff_max" json:"upstream_backoff_max"`
	// UpstreamConnectTimeout bounds one attempt to connect to the upstream:
	// TCP and TLS for gRPC, the TCP dial for MCP (default 2s).
	UpstreamConnectTimeout time.Duration `yaml:"upstream_connect_timeout" json:"upstream_connect_timeout"`
	// TLSReloadInterval is how often the listener's certificate, key and
	// client CA files are read again; a change is installed for new
	// handshakes and the connections whose client chain no longer verifies
	// are closed (default 10s; SIGHUP reloads at once).
	TLSReloadInterval time.Duration `yaml:"tls_reload_interval" json:"tls_reload_interval"`
}

// Defaults. The connection cap's default depends on the file limit; see
// DefaultMaxConnections.
const (
	DefaultHeaderTimeout          = 10 * time.Second
	DefaultBodyTimeout            = 60 * time.Second
	DefaultIdleTimeout            = 75 * time.Second
	DefaultGRPCConnectionTimeout  = 10 * time.Second
	DefaultGRPCKeepaliveTime      = 60 * time.Second
	DefaultGRPCKeepaliveTimeout   = 20 * time.Second
	DefaultGRPCKeepaliveMinTime   = 10 * time.Second
	DefaultUpstreamBackoffMax     = time.Second
	DefaultUpstreamConnectTimeout = 2 * time.Second
	DefaultAuthTimeout            = 10 * time.Second
	// DefaultMaxUnauthenticatedPerSource is the unauthenticated
	// connections one source address may hold by default.
	DefaultMaxUnauthenticatedPerSource = 64

	maxConnectionsCeiling = 4096
	// fileHeadroom is left for what is not a client connection: the admin
	// port, upstream gRPC connections, policy and key files, the log.
	fileHeadroom = 256
	// minConnections is the cap's floor on a tiny file limit.
	minConnections = 32
	// minUnauthenticated is the unauthenticated share's floor.
	minUnauthenticated = 8
)

// DefaultMaxConnections is the cap for a process whose soft file limit is
// fileLimit (0: unknown): min(4096, (fileLimit - 256) / 4), at least 32. The
// quarter leaves room for three listeners and the upstream connection an MCP
// request holds.
func DefaultMaxConnections(fileLimit uint64) int {
	if fileLimit == 0 || fileLimit >= fileHeadroom+4*maxConnectionsCeiling {
		return maxConnectionsCeiling
	}
	n := 0
	if fileLimit > fileHeadroom {
		n = int(fileLimit-fileHeadroom) / 4
	}
	return max(n, minConnections)
}

// WithDefaults returns l with every zero field set to its default; the
// connection cap's default reads the process's file limit.
func (l Limits) WithDefaults() Limits {
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections(FileLimit())
	}
	n := l.MaxConnections
	if l.MaxConnectionsPerSource == 0 {
		l.MaxConnectionsPerSource = max(n/4, min(n, minConnections))
	}
	if l.MaxUnauthenticated == 0 {
		l.MaxUnauthenticated = max(n/4, min(n, minUnauthenticated))
	}
	if l.MaxUnauthenticatedPerSource == 0 {
		l.MaxUnauthenticatedPerSource = min(DefaultMaxUnauthenticatedPerSource, l.MaxUnauthenticated)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&l.HeaderTimeout, DefaultHeaderTimeout)
	def(&l.BodyTimeout, DefaultBodyTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.GRPCConnectionTimeout, DefaultGRPCConnectionTimeout)
	def(&l.GRPCKeepaliveTime, DefaultGRPCKeepaliveTime)
	def(&l.GRPCKeepaliveTimeout, DefaultGRPCKeepaliveTimeout)
	def(&l.GRPCKeepaliveMinTime, DefaultGRPCKeepaliveMinTime)
	def(&l.UpstreamBackoffMax, DefaultUpstreamBackoffMax)
	def(&l.UpstreamConnectTimeout, DefaultUpstreamConnectTimeout)
	def(&l.TLSReloadInterval, DefaultTLSReloadInterval)
	def(&l.AuthTimeout, DefaultAuthTimeout)
	return l
}

// Conns is how the listener holds its connections (Bound), l WithDefaults
// applied by the caller.
func (l Limits) Conns() ConnBounds {
	return ConnBounds{Max: l.MaxConnections, PerSource: l.MaxConnectionsPerSource,
		Unproven: l.MaxUnauthenticated, UnprovenPerSource: l.MaxUnauthenticatedPerSource, ProofTimeout: l.AuthTimeout}
}

// Inherit returns l with every zero field taken from parent: a listener's
// own limits over the configuration's top-level ones.
func (l Limits) Inherit(parent Limits) Limits {
	inheritN := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	inheritN(&l.MaxConnections, parent.MaxConnections)
	inheritN(&l.MaxConnectionsPerSource, parent.MaxConnectionsPerSource)
	inheritN(&l.MaxUnauthenticated, parent.MaxUnauthenticated)
	inheritN(&l.MaxUnauthenticatedPerSource, parent.MaxUnauthenticatedPerSource)
	inherit := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	inherit(&l.HeaderTimeout, parent.HeaderTimeout)
	inherit(&l.BodyTimeout, parent.BodyTimeout)
	inherit(&l.IdleTimeout, parent.IdleTimeout)
	inherit(&l.GRPCConnectionTimeout, parent.GRPCConnectionTimeout)
	inherit(&l.GRPCKeepaliveTime, parent.GRPCKeepaliveTime)
	inherit(&l.GRPCKeepaliveTimeout, parent.GRPCKeepaliveTimeout)
	inherit(&l.GRPCKeepaliveMinTime, parent.GRPCKeepaliveMinTime)
	inherit(&l.UpstreamBackoffMax, parent.UpstreamBackoffMax)
	inherit(&l.UpstreamConnectTimeout, parent.UpstreamConnectTimeout)
	inherit(&l.TLSReloadInterval, parent.TLSReloadInterval)
	inherit(&l.AuthTimeout, parent.AuthTimeout)
	return l
}

// Validate checks the limits: none negative, and the connection cap below
// the process's file limit.
func (l Limits) Validate() error {
	var errs []error
	for _, n := range []struct {
		name string
		v    int
	}{
		{"max_connections", l.MaxConnections}, {"max_connections_per_source", l.MaxConnectionsPerSource},
		{"max_unauthenticated", l.MaxUnauthenticated}, {"max_unauthenticated_per_source", l.MaxUnauthenticatedPerSource},
	} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s: negative", n.name))
		}
	}
	if d := l.WithDefaults(); l.MaxConnections >= 0 && l.MaxConnectionsPerSource >= 0 && l.MaxUnauthenticated >= 0 {
		if d.MaxConnectionsPerSource > d.MaxConnections {
			errs = append(errs, fmt.Errorf("max_connections_per_source: %d is above max_connections (%d)", d.MaxConnectionsPerSource, d.MaxConnections))
		}
		if d.MaxUnauthenticated > d.MaxConnections {
			errs = append(errs, fmt.Errorf("max_unauthenticated: %d is above max_connections (%d)", d.MaxUnauthenticated, d.MaxConnections))
		}
		if d.MaxUnauthenticatedPerSource > min(d.MaxUnauthenticated, d.MaxConnectionsPerSource) {
			errs = append(errs, fmt.Errorf("max_unauthenticated_per_source: %d is above max_unauthenticated (%d) or max_connections_per_source (%d)",
				d.MaxUnauthenticatedPerSource, d.MaxUnauthenticated, d.MaxConnectionsPerSource))
		}
	}
	if fl := FileLimit(); fl > 0 && uint64(l.MaxConnections) >= fl {
		errs = append(errs, fmt.Errorf("max_connections: %d is not below the file limit (%d); raise the limit (ulimit -n) or lower the cap", l.MaxConnections, fl))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"header_timeout", l.HeaderTimeout}, {"body_timeout", l.BodyTimeout}, {"idle_timeout", l.IdleTimeout},
		{"grpc_connection_timeout", l.GRPCConnectionTimeout}, {"grpc_keepalive_time", l.GRPCKeepaliveTime},
		{"grpc_keepalive_timeout", l.GRPCKeepaliveTimeout}, {"grpc_keepalive_min_time", l.GRPCKeepaliveMinTime},
		{"upstream_backoff_max", l.UpstreamBackoffMax}, {"upstream_connect_timeout", l.UpstreamConnectTimeout},
		{"tls_reload_interval", l.TLSReloadInterval}, {"auth_timeout", l.AuthTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: negative", d.name))
		}
	}
	return errors.Join(errs...)
}
