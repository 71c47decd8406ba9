package frames

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// maxStreamID is the last stream id a client may open on a connection;
// an upstream connection that used them all takes no more streams.
const maxStreamID = 1<<31 - 1

var (
	// ErrPoolFull refuses a stream when every connection of its pool is at
	// its stream limit and the pool at its cap.
	ErrPoolFull = errors.New("frames: every upstream connection is at its stream limit")
	errBackoff  = errors.New("frames: upstream unreachable, backing off")
)

// pool is the relay's upstream connections. A stream goes to the first
// connection with room under the upstream's SETTINGS_MAX_CONCURRENT_STREAMS;
// when none has room and the pool is below its cap (Upstream.MaxConns, or
// Config.MaxUpstreamConns), one more is dialed.
type pool struct {
	r  *Relay
	up Upstream

	mu        sync.Mutex
	conns     []*conn
	closed    bool
	failUntil time.Time
	backoff   time.Duration
}

// open opens u on an upstream connection and sends the request's header
// block; b as for sendData.
func (p *pool) open(u *leg, fields []hpack.HeaderField, end bool, b *batch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	for _, c := range p.conns {
		if c.tryOpen(u, fields, end, p.up.MaxStreams, b) {
			return nil
		}
	}
	if len(p.conns) >= p.maxConns() {
		return ErrPoolFull
	}
	if time.Now().Before(p.failUntil) {
		return errBackoff
	}
	b.flush() // what the caller queued does not wait for the dial
	c, err := p.dial(b)
	if err != nil {
		p.backoff = min(max(2*p.backoff, 50*time.Millisecond), p.r.cfg.MaxBackoff)
		p.failUntil = time.Now().Add(p.backoff)
		return err
	}
	p.backoff = 0
	p.conns = append(p.conns, c)
	if c.tryOpen(u, fields, end, p.up.MaxStreams, b) {
		return nil
	}
	return ErrPoolFull
}

// maxConns is the pool's connection cap.
func (p *pool) maxConns() int {
	if p.up.MaxConns > 0 {
		return p.up.MaxConns
	}
	return p.r.cfg.MaxUpstreamConns
}

// dial connects to the upstream and starts the connection's reader and
// writer; it runs under p.mu. The client preface and SETTINGS are queued
// for b (as for sendData), which writes them with the stream the
// connection is dialed for.
func (p *pool) dial(b *batch) (*conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.r.cfg.DialTimeout)
	defer cancel()
	dial := p.up.Dial
	if dial == nil {
		dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", p.up.Addr)
		}
	}
	nc, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial upstream: %w", err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := newConn(p.r, nc, false)
	c.noTrailers = p.up.NoRequestTrailers
	c.preface(b)
	p.r.wg.Go(c.writeLoop)
	p.r.wg.Go(func() { c.serveUp(); p.drop(c) })
	return c, nil
}

// drop forgets a connection that ended.
func (p *pool) drop(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = slices.DeleteFunc(p.conns, func(x *conn) bool { return x == c })
}

// closeAll closes every upstream connection; their readers end.
func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		c.nc.Close()
	}
}

// tryOpen opens u on c if c has room under the upstream's limit and
// maxStreams (0: none); it sends the header block.
func (c *conn) tryOpen(u *leg, fields []hpack.HeaderField, end bool, maxStreams uint32, b *batch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.peerMaxStreams
	if maxStreams > 0 {
		limit = min(limit, maxStreams)
	}
	if c.dead || c.goneAway || uint32(len(c.streams)) >= limit || c.nextID > maxStreamID {
		return false
	}
	u.c, u.id = c, c.nextID
	c.nextID += 2
	u.sendWin = c.peerInitWin
	u.localDone = end
	c.streams[u.id] = u
	c.writeHeaders(u.id, fields, end)
	b.add(c)
	c.kick()
	return true
}

// serveUp reads an upstream connection's frames until it ends; then every
// stream it carried is reset toward its client.
func (c *conn) serveUp() {
	for {
		f, err := c.readFrame()
		c.lastRead.Store(time.Now().UnixNano())
		if err == nil {
			err = c.upFrame(f)
		}
		if err == nil {
			continue
		}
		var se http2.StreamError
		if errors.As(err, &se) {
			_ = c.resetPair(se.StreamID, se.Code, se.Code) // an upstream's: no flood to count
			continue
		}
		if !isIOError(err) {
			ec, _ := connErrCode(err)
			c.goAway(ec)
			c.r.log.Warn("relay: upstream protocol error", "err", err)
		}
		break
	}
	c.rb.flush()
	c.finish(http2.ErrCodeInternal)
}

func (c *conn) upFrame(f http2.Frame) error {
	if ok, err := c.handle(f); ok {
		return err
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.upHeaders(f)
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	}
	return nil
}

// upHeaders relays a response header block or trailers to the client.
func (c *conn) upHeaders(f *http2.MetaHeadersFrame) error {
	c.mu.Lock()
	l := c.streams[f.StreamID]
	if l == nil {
		c.mu.Unlock()
		return nil // a stream the relay reset
	}
	if l.remoteDone {
		c.mu.Unlock()
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeStreamClosed}
	}
	end := f.StreamEnded()
	if end {
		l.remoteDone = true
		c.maybeRemove(l)
	}
	c.mu.Unlock()
	fields := slices.DeleteFunc(f.Fields, hopByHop)
	if l.hold != nil {
		l.hold.headers(fields, end, &c.rb)
		return nil
	}
	l.peer.c.sendHeaders(l.peer, fields, end, &c.rb)
	return nil
}

// hopByHop reports a connection-specific field, never relayed.
func hopByHop(hf hpack.HeaderField) bool {
	switch hf.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// onGoAway stops new streams on c and refuses, toward their clients, the
// streams the upstream says it never processed (they can be retried).
func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	if f.ErrCode != http2.ErrCodeNo {
		c.r.log.Warn("relay: upstream sent GOAWAY", "code", f.ErrCode, "last_stream", f.LastStreamID, "debug", string(f.DebugData()))
	}
	c.mu.Lock()
	c.goneAway = true
	c.lastOK = f.LastStreamID
	var refused []*leg
	for id, l := range c.streams {
		if id > f.LastStreamID {
			c.remove(l)
			refused = append(refused, l)
		}
	}
	idle := len(c.streams) == 0
	c.mu.Unlock()
	for _, l := range refused {
		l.resetPeer(http2.ErrCodeRefusedStream)
	}
	if idle {
		c.nc.Close()
	}
}
