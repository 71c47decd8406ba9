// Package frames is a protocol-neutral HTTP/2 frame relay: it serves HTTP/2
// with prior knowledge (h2c, or over a TLS listener the caller wraps) and
// maps every client stream onto a stream of a small pool of multiplexed
// upstream connections, passing DATA frames through with flow control kept
// on both sides, header blocks decoded and encoded again per connection
// (HPACK state belongs to a connection), write buffers reused and writes
// batched. A passed-through stream costs no goroutine: two per connection,
// one reading frames, one writing what the others queued.
//
// It makes no decisions itself. A Router, chosen by the consumer, picks
// each stream's route from its request header list: pass it through to one
// of the upstream pools, or buffer its request body and hand it to a
// Handler, which answers locally or forwards the original bytes and sees
// the upstream's whole answer before the client does (one goroutine for
// such a stream, while it is handled; a Handler that forwards with
// ForwardThen sees the answer on the upstream reader instead, without
// waiting for it).
package frames

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config bounds a relay. Zero fields take the defaults New documents.
type Config struct {
	// Upstream is the h2c server every stream goes to (host:port) unless
	// Upstreams is set; it is then ignored.
	Upstream string
	// Upstreams are the upstream pools a Router routes to by index; pool 0
	// takes every stream when there is no Router.
	Upstreams []Upstream
	// Router picks each stream's route; nil passes every stream through to
	// pool 0.
	Router Router
	// MaxConns caps the client connections served at once (default 1024);
	// one more is closed on accept.
	MaxConns int
	// MaxStreams is SETTINGS_MAX_CONCURRENT_STREAMS toward clients
	// (default 256); a stream beyond it is refused (REFUSED_STREAM).
	MaxStreams uint32
	// MaxUpstreamConns caps the upstream pool (default 16). A connection
	// takes streams until the upstream's SETTINGS_MAX_CONCURRENT_STREAMS
	// (100 until its SETTINGS arrive); then the next one is dialed.
	MaxUpstreamConns int
	// StreamWindow is the receive window of every stream, on both sides
	// (default 64 KiB): what a stream may hold in the relay while its
	// other side has no send window.
	StreamWindow uint32
	// ConnWindow is the connection-level receive window (default 1 MiB).
	ConnWindow uint32
	// MaxHeaderListSize bounds a header list (default 64 KiB).
	MaxHeaderListSize uint32
	// IdleTimeout closes a client connection without streams (default 75 s,
	// nginx's keepalive_timeout).
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the client preface and first SETTINGS
	// (default 10 s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds a batched write (default 30 s; the deadline is
	// moved at most every WriteTimeout/2, so a write gets at least half).
	WriteTimeout time.Duration
	// KeepaliveTime: a connection silent this long is pinged (default
	// 60 s), and closed, its streams reset, when nothing is read within
	// KeepaliveTimeout after the ping (default 20 s): Warden's gRPC
	// keepalive defaults.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MinPingInterval is how often a client may ping: one that pings
	// sooner three times with nothing sent to it in between is sent GOAWAY
	// ENHANCE_YOUR_CALM, as grpc-go's keepalive enforcement does. Zero
	// answers every ping.
	MinPingInterval time.Duration
	// DialTimeout bounds an upstream dial (default 5 s); after a failed dial
	// streams are refused for a backoff that doubles up to MaxBackoff.
	DialTimeout time.Duration
	// MaxBackoff caps the upstream redial backoff (default 1 s).
	MaxBackoff time.Duration
	// MaxWriteBuffer bounds the bytes queued toward one peer (default
	// 4 MiB): DATA waits in its stream once half of it is queued, and a
	// peer that lets control frames pile up beyond it (it does not read
	// while it pings or resets) is cut off.
	MaxWriteBuffer int
	// DrainTimeout is how long, once Serve's context ends, the streams
	// already open may finish: every client is sent GOAWAY at once, new
	// streams are refused, a connection closes when its last stream ends,
	// and what is still open after DrainTimeout is closed. Zero closes every
	// connection at once.
	DrainTimeout time.Duration
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

func (c *Config) defaults() {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set32 := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.MaxConns, 1024)
	set32(&c.MaxStreams, 256)
	set(&c.MaxUpstreamConns, 16)
	set32(&c.StreamWindow, 1<<16)
	set32(&c.ConnWindow, 1<<20)
	set32(&c.MaxHeaderListSize, 1<<16)
	setD(&c.IdleTimeout, 75*time.Second)
	setD(&c.HandshakeTimeout, 10*time.Second)
	setD(&c.WriteTimeout, 30*time.Second)
	setD(&c.DialTimeout, 5*time.Second)
	setD(&c.KeepaliveTime, 60*time.Second)
	setD(&c.KeepaliveTimeout, 20*time.Second)
	setD(&c.MaxBackoff, time.Second)
	set(&c.MaxWriteBuffer, 4<<20)
}

// maxWindow is the largest flow-control window HTTP/2 allows.
const maxWindow = 1<<31 - 1

// Validate reports a configuration the relay cannot run with.
func (c *Config) Validate() error {
	var errs []error
	if c.Upstream == "" && len(c.Upstreams) == 0 {
		errs = append(errs, errors.New("upstream is required"))
	}
	for i, u := range c.Upstreams {
		if u.Addr == "" && u.Dial == nil {
			errs = append(errs, fmt.Errorf("upstream %d: an address or a dialer is required", i))
		}
		if u.MaxConns < 0 {
			errs = append(errs, fmt.Errorf("upstream %d: negative connection cap", i))
		}
	}
	if c.MaxConns < 0 || c.MaxUpstreamConns < 0 || c.MaxWriteBuffer < 0 {
		errs = append(errs, errors.New("connection and buffer bounds must not be negative"))
	}
	if c.StreamWindow > maxWindow || c.ConnWindow > maxWindow {
		errs = append(errs, fmt.Errorf("windows must be at most %d", maxWindow))
	}
	if c.StreamWindow != 0 && c.StreamWindow < 1<<14 {
		errs = append(errs, errors.New("stream window must be at least 16 KiB (one frame)"))
	}
	return errors.Join(errs...)
}

// Relay relays client streams to the upstream. Serve runs it.
type Relay struct {
	cfg   Config
	log   *slog.Logger
	pools []*pool
	sem   chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	downs    map[*conn]struct{}
	done     bool
	draining bool
	drained  chan struct{} // closed once draining and no client connection is left

	work chan job // exchanges handed to idle workers
	// writerWakes counts the writers' wake-ups to write (tests and
	// benchmarks read it: the hand-offs between goroutines a message costs).
	writerWakes atomic.Int64
	// handlerWakes counts the wake-ups of the goroutines that run Handlers
	// (tests and benchmarks read it): an exchange handed to a worker, and a
	// Forward that waited for its answer and was woken by the upstream
	// reader (or by its context's end).
	handlerWakes atomic.Int64
	// clientWrites and upstreamWrites count the write system calls made
	// on client and upstream connections (tests and benchmarks read them:
	// on loopback each costs the sender the receiver's network stack too).
	clientWrites, upstreamWrites atomic.Int64
	closing                      chan struct{} // closed by shutdown: idle workers end
}

// New checks cfg and returns a relay; it starts nothing.
func New(cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("relay config: %w", err)
	}
	cfg.defaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{cfg: cfg, log: log, sem: make(chan struct{}, cfg.MaxConns), downs: map[*conn]struct{}{},
		work: make(chan job), closing: make(chan struct{}), drained: make(chan struct{})}
	ups := cfg.Upstreams
	if len(ups) == 0 {
		ups = []Upstream{{Addr: cfg.Upstream}}
	}
	for _, u := range ups {
		r.pools = append(r.pools, &pool{r: r, up: u})
	}
	return r, nil
}

// Serve accepts client connections on lis until ctx ends, then lets open
// streams finish for at most DrainTimeout, closes every connection
// (clients get GOAWAY) and waits for their goroutines.
func (r *Relay) Serve(ctx context.Context, lis net.Listener) error {
	stop := context.AfterFunc(ctx, func() {
		lis.Close()
		if r.cfg.DrainTimeout > 0 {
			r.drain()
			t := time.NewTimer(r.cfg.DrainTimeout)
			select {
			case <-r.drained:
			case <-t.C:
				r.log.Warn("relay: drain timeout, closing the remaining connections", "timeout", r.cfg.DrainTimeout)
			}
			t.Stop()
		}
		r.shutdown()
	})
	defer stop()
	var backoff time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			if ctx.Err() != nil {
				r.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			r.shutdown()
			r.wg.Wait()
			return fmt.Errorf("relay accept: %w", err)
		}
		backoff = 0
		select {
		case r.sem <- struct{}{}:
		default:
			r.log.Warn("relay: connection cap reached, closing a new connection", "cap", r.cfg.MaxConns)
			nc.Close()
			continue
		}
		r.wg.Go(func() {
			defer func() { <-r.sem }()
			r.ServeConn(nc)
		})
	}
}

// ServeConn serves one client connection until it ends, and closes it.
func (r *Relay) ServeConn(nc net.Conn) {
	c := newConn(r, nc, true)
	if !r.track(c) {
		nc.Close()
		return
	}
	defer r.untrack(c)
	c.serveDown()
}

func (r *Relay) track(c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	r.downs[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c *conn) {
	r.mu.Lock()
	delete(r.downs, c)
	if r.draining && len(r.downs) == 0 {
		close(r.drained)
		r.draining = false
	}
	r.mu.Unlock()
}

// drain tells every client to open no more streams (GOAWAY NO_ERROR) and
// has each connection close once its last stream ended.
func (r *Relay) drain() {
	r.mu.Lock()
	r.done = true // no new connection is served
	downs := make([]*conn, 0, len(r.downs))
	for c := range r.downs {
		downs = append(downs, c)
	}
	if len(downs) == 0 {
		close(r.drained)
	} else {
		r.draining = true
	}
	r.mu.Unlock()
	for _, c := range downs {
		c.windDown()
	}
}

// shutdown sends GOAWAY to every client and ends every connection.
func (r *Relay) shutdown() {
	r.mu.Lock()
	select {
	case <-r.closing:
	default:
		close(r.closing)
	}
	r.done = true
	downs := make([]*conn, 0, len(r.downs))
	for c := range r.downs {
		downs = append(downs, c)
	}
	r.mu.Unlock()
	for _, c := range downs {
		c.abort()
	}
	for _, p := range r.pools {
		p.closeAll()
	}
}

// isIOError reports whether err came from the connection rather than from
// what the peer sent.
func isIOError(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrClosedPipe) || errors.As(err, &ne)
}
