package frames

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is one HTTP/2 connection of the relay: a client's (server side,
// down) or an upstream's (client side). Its reader goroutine owns fr; every
// other field behind mu is shared with the readers of the connections its
// streams are paired with. A goroutine holds at most one conn's mu at a
// time, so the pairs never deadlock.
type conn struct {
	r      *Relay
	nc     net.Conn
	io     sysIO // nc's reads (the reader's) and writes (the writer's)
	server bool
	fr     *http2.Framer // reads; reader goroutine only
	hr     *headerReader // decodes fr's header blocks; reader goroutine only
	br     *bufio.Reader // fr's
	// rb is what the reader queued on other connections (and its own),
	// written once the frames already read are handled; reader goroutine
	// only.
	rb batch
	// bodyDue is the streams whose BodyTimeout the reader arms before it
	// waits (bodyDeadline); reader goroutine only.
	bodyDue []due
	// jobs is the exchanges the reader hands to workers before it waits
	// (start); reader goroutine only.
	jobs []job
	// scratch collects the credit a drain owes other connections; reader
	// goroutine only (the writer has its own).
	scratch []credit

	wake       chan struct{} // cap 1: out has frames
	quit       chan struct{} // closed by the reader when it ends
	writerDone chan struct{}

	mu      sync.Mutex
	out     []byte        // frames queued for the writer
	wbuf    []byte        // out's spare: the two take turns being written
	writing bool          // out's last take is being written (by the writer or a batch)
	held    int           // batches that write what is queued themselves (batch.go)
	wfr     *http2.Framer // writes into out
	enc     *hpack.Encoder
	hbuf    bytes.Buffer
	dead    bool // nothing more is written
	streams map[uint32]*leg
	blocked []*leg // legs with DATA waiting for send window

	sendWin        int64 // connection-level send window
	recvWin        int64 // connection-level: what the peer may still send
	connOwed       int64 // connection-level credit not yet returned
	peerInitWin    int64
	peerMaxFrame   uint32
	peerMaxStreams uint32
	goneAway       bool // GOAWAY received (upstream: no new streams)
	draining       bool // down: GOAWAY sent; closes when its last stream ends

	maxClientID uint32    // down: highest client stream id seen
	resets      int       // down: streams the client reset since resetsFrom
	lastPing    time.Time // down: when the client last pinged
	pingStrikes int       // down: pings too early since data was last sent to the client
	resetsFrom  time.Time // down: start of the current one-second window
	nextID      uint32    // up: next stream id
	lastOK      uint32    // up: the last stream id of a GOAWAY

	lastRead   atomic.Int64         // unix nanoseconds of the last frame read, for keepalive
	tls        *tls.ConnectionState // down: the client's TLS state, set before the first stream
	peer       net.Addr             // down: the client's address (peerAddr)
	noTrailers bool                 // up: request trailers become an empty DATA frame (Upstream.NoRequestTrailers)
}

// credit is stream credit owed to a leg's peer after its DATA went out.
type credit struct {
	l *leg
	n int
}

// outWriter lets the write framer append to out; it runs under mu.
type outWriter struct{ c *conn }

func (w outWriter) Write(p []byte) (int, error) {
	if !w.c.dead {
		w.c.out = append(w.c.out, p...)
	}
	return len(p), nil
}

func newConn(r *Relay, nc net.Conn, server bool) *conn {
	c := &conn{r: r, nc: nc, server: server,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), writerDone: make(chan struct{}),
		streams:     map[uint32]*leg{},
		sendWin:     65535,
		recvWin:     65535,
		peerInitWin: 65535, peerMaxFrame: 16384, peerMaxStreams: 100,
		nextID: 1,
	}
	c.lastRead.Store(time.Now().UnixNano())
	writes := &r.upstreamWrites
	if server {
		writes = &r.clientWrites
		c.peer = newPeerAddr(nc.RemoteAddr())
	}
	c.io = newSysIO(nc, writes)
	c.br = bufio.NewReaderSize(c.io.r, 32<<10)
	c.fr = http2.NewFramer(nil, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(maxReadFrame)
	c.hr = newHeaderReader(r.cfg.MaxHeaderListSize)
	c.wfr = http2.NewFramer(outWriter{c}, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	return c
}

// preface queues the relay's SETTINGS and connection window; b, when not
// nil, writes them (see batch), with what else its goroutine queues on c
// before it waits: a client's SETTINGS acknowledgement, an upstream
// connection's first stream.
func (c *conn) preface(b *batch) {
	cfg := &c.r.cfg
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.server {
		c.out = append(c.out, http2.ClientPreface...)
	}
	settings := []http2.Setting{
		{ID: http2.SettingInitialWindowSize, Val: cfg.StreamWindow},
		{ID: http2.SettingMaxHeaderListSize, Val: cfg.MaxHeaderListSize},
	}
	if c.server {
		settings = append(settings, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: cfg.MaxStreams})
	} else {
		settings = append(settings, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	}
	_ = c.wfr.WriteSettings(settings...)
	if inc := int64(cfg.ConnWindow) - c.recvWin; inc > 0 {
		_ = c.wfr.WriteWindowUpdate(0, uint32(inc))
		c.recvWin += inc
	}
	b.add(c)
	c.kick()
}

// kick wakes the writer, unless a batch holds c and writes what is queued
// itself; it runs under mu. A peer that lets more than MaxWriteBuffer pile
// up is cut off.
func (c *conn) kick() {
	if len(c.out) > c.r.cfg.MaxWriteBuffer {
		c.dead = true
		c.out = nil
		c.nc.Close()
		return
	}
	if c.held == 0 {
		c.signal()
	}
}

// signal wakes the writer.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes what the others queued, in batches: whatever piled up
// while the last write was in the kernel goes out in one write. Two
// buffers take turns (out and wbuf), so the steady state allocates
// nothing. While a batch writes (release), the writer waits for it; the
// batch wakes it when something is left.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	// the write deadline is moved only when less than half of WriteTimeout
	// is left (setting it costs about as much as a small write's framing):
	// a write gets between half and all of WriteTimeout
	var deadline time.Time
	wt := c.r.cfg.WriteTimeout
	ka := keepalive{every: c.r.cfg.KeepaliveTime, timeout: c.r.cfg.KeepaliveTimeout}
	tick := time.NewTicker(min(ka.every, ka.timeout) / 2)
	defer tick.Stop()
	var owed []credit // credit the writer's drains collect
	for {
		quit := false
		select {
		case <-c.wake:
			c.r.writerWakes.Add(1)
		case <-c.quit:
			quit = true
		case now := <-tick.C:
			if !ka.check(c, now) {
				c.nc.Close() // the peer stopped answering; the reader ends
			}
			continue
		}
		c.mu.Lock()
		if quit {
			c.dead = true
			for c.writing { // a batch's write, which never waits for the socket
				c.mu.Unlock()
				time.Sleep(50 * time.Microsecond)
				c.mu.Lock()
			}
		} else if c.writing {
			c.mu.Unlock()
			continue // the batch wakes the writer when it leaves something
		}
		buf := c.out
		c.out, c.wbuf = c.wbuf[:0], nil
		c.writing = true
		c.mu.Unlock()
		if len(buf) > 0 {
			if now := time.Now(); deadline.Sub(now) < wt/2 {
				deadline = now.Add(wt)
				_ = c.nc.SetWriteDeadline(deadline)
			}
			if _, err := c.io.w.Write(buf); err != nil {
				c.mu.Lock()
				c.dead = true
				c.out = nil
				c.writing = false
				c.mu.Unlock()
				c.nc.Close() // the reader sees it and ends
				return
			}
		}
		c.mu.Lock()
		c.writing = false
		if cap(buf) <= 1<<20 {
			c.wbuf = buf[:0]
		}
		if quit {
			c.mu.Unlock()
			return
		}
		// DATA held back for room in out goes now
		if len(c.blocked) > 0 && !c.dead {
			c.drain(&owed)
		}
		if len(c.out) > 0 && c.held == 0 {
			c.signal() // queued while the write was in the kernel
		}
		c.mu.Unlock()
		payCredits(&owed)
	}
}

// readFrame reads the next frame; when it is not already read in whole,
// before the reader may wait for it, what the reader queued for other
// connections is written, the body timeouts of streams still sending are
// armed and the exchanges it started go to workers. That happens at the latest once a read buffer's worth of frames
// (32 KiB) is handled, however fast the client sends.
func (c *conn) readFrame() (http2.Frame, error) {
	if (c.rb.holds() || len(c.bodyDue) > 0 || len(c.jobs) > 0) && !c.frameBuffered() {
		if len(c.bodyDue) > 0 {
			c.armBodies()
		}
		c.rb.flush()
		c.startJobs()
	}
	f, err := c.fr.ReadFrame()
	if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
		return c.hr.read(c.fr, hf)
	}
	return f, err
}

// frameBuffered reports whether the next frame is read in whole and
// reading it takes no more: a header block not ended in its first frame
// (readFrame reads its CONTINUATION frames in the same call, which
// may wait for them) is not.
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < 9 {
		return false
	}
	h, _ := c.br.Peek(5)
	switch http2.FrameType(h[3]) {
	case http2.FrameHeaders, http2.FramePushPromise, http2.FrameContinuation:
		if http2.Flags(h[4])&http2.FlagHeadersEndHeaders == 0 {
			return false
		}
	}
	return n >= 9+(int(h[0])<<16|int(h[1])<<8|int(h[2]))
}

// keepalive pings a peer that has been silent for every and gives up on it
// when the ping is not answered (nor anything else read) within timeout.
// The writer runs it; the reader stamps lastRead.
type keepalive struct {
	every, timeout time.Duration
	pingAt         time.Time // zero: no ping outstanding
}

// check runs on the writer's tick: it queues a ping when the peer has
// been silent for every and reports false when a ping went unanswered.
func (k *keepalive) check(c *conn, now time.Time) bool {
	last := time.Unix(0, c.lastRead.Load())
	if !k.pingAt.IsZero() {
		if last.After(k.pingAt) {
			k.pingAt = time.Time{}
		} else if now.Sub(k.pingAt) >= k.timeout {
			return false
		}
		return true
	}
	if now.Sub(last) >= k.every {
		k.pingAt = now
		c.mu.Lock()
		_ = c.wfr.WritePing(false, [8]byte{'k', 'e', 'e', 'p'})
		c.kick()
		c.mu.Unlock()
	}
	return true
}

// finish ends the connection after its reader stopped: the writer flushes
// what is queued (a GOAWAY), the socket closes, and every stream's other
// side is reset with code.
func (c *conn) finish(code http2.ErrCode) {
	c.mu.Lock()
	c.dead = true // what is queued still goes out; nothing more is, and no stream opens
	legs := make([]*leg, 0, len(c.streams))
	for _, l := range c.streams {
		l.gone = true
		l.pend = nil
		if l.x != nil {
			l.x.end()
		}
		legs = append(legs, l)
	}
	clear(c.streams)
	c.blocked = nil
	c.mu.Unlock()
	close(c.quit)
	select {
	case <-c.writerDone:
	case <-time.After(c.r.cfg.WriteTimeout):
	}
	if c.server {
		lingerClose(c.nc)
	}
	c.nc.Close()
	for _, l := range legs {
		l.resetPeer(code)
	}
}

// lingerClose half-closes a client connection and reads what the client
// still sends for a moment, so that the last frames (a GOAWAY) reach it
// rather than a TCP reset for unread data.
func lingerClose(nc net.Conn) {
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = nc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, 1<<16))
}

// abort sends GOAWAY(NO_ERROR) and makes the reader stop.
func (c *conn) abort() {
	c.mu.Lock()
	if c.server {
		_ = c.wfr.WriteGoAway(c.maxClientID, http2.ErrCodeNo, nil)
	}
	c.kick()
	c.mu.Unlock()
	_ = c.nc.SetReadDeadline(time.Now())
}

// windDown sends a client GOAWAY(NO_ERROR): streams it opened so far may
// finish, later ones are refused, and the connection closes once it has
// none.
func (c *conn) windDown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	_ = c.wfr.WriteGoAway(c.maxClientID, http2.ErrCodeNo, nil)
	c.kick()
	if len(c.streams) == 0 {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// goAway queues GOAWAY with code; the caller then ends the reader.
func (c *conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	_ = c.wfr.WriteGoAway(c.maxClientID, code, nil)
	c.kick()
	c.mu.Unlock()
}

// connErrCode maps a read error onto the GOAWAY code it calls for, or false
// for a connection that failed or closed (nothing to say).
func connErrCode(err error) (http2.ErrCode, bool) {
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		return http2.ErrCode(ce), true
	case errors.Is(err, http2.ErrFrameTooLarge):
		return http2.ErrCodeFrameSize, true
	case isIOError(err):
		return 0, false
	}
	return http2.ErrCodeProtocol, true
}

// writeHeaders encodes fields with this connection's HPACK state and
// queues HEADERS and CONTINUATION frames; it runs under mu.
func (c *conn) writeHeaders(id uint32, fields []hpack.HeaderField, end bool) {
	c.pingStrikes = 0
	c.hbuf.Reset()
	for _, f := range fields {
		_ = c.enc.WriteField(f)
	}
	block := c.hbuf.Bytes()
	max := int(c.peerMaxFrame)
	first := block
	if len(first) > max {
		first = first[:max]
	}
	block = block[len(first):]
	_ = c.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		n := min(len(block), max)
		_ = c.wfr.WriteContinuation(id, n == len(block), block[:n])
		block = block[n:]
	}
}

// applySettings applies a peer's SETTINGS and acknowledges them; it runs
// under mu and returns legs to drain.
func (c *conn) applySettings(f *http2.SettingsFrame) error {
	var delta int64
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta += int64(s.Val) - (c.peerInitWin + delta)
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingHeaderTableSize:
			c.enc.SetMaxDynamicTableSizeLimit(s.Val)
		case http2.SettingMaxConcurrentStreams:
			c.peerMaxStreams = s.Val
		}
		return nil
	})
	if err != nil {
		return err
	}
	if delta != 0 {
		c.peerInitWin += delta
		for _, l := range c.streams {
			l.sendWin += delta
			if l.sendWin > maxWindow {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
		}
	}
	_ = c.wfr.WriteSettingsAck()
	c.rb.add(c) // applySettings runs on the reader, which writes it
	c.kick()
	return nil
}
