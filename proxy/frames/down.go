package frames

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// serveDown runs a client connection: the handshake, then one frame at a
// time until the connection ends.
func (c *conn) serveDown() {
	go c.writeLoop()
	code, say := c.handshake()
	c.rb.flush() // the relay's SETTINGS and the acknowledgement of the client's
	if say {
		if tc, ok := c.nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
			cs := tc.ConnectionState() // the handshake completed with the preface
			c.tls = &cs
		}
		code, say = c.readDown()
	}
	if say {
		c.goAway(code)
	}
	c.finish(http2.ErrCodeCancel)
}

// handshake reads the client preface (a connection without it is closed
// without a word), answers with the relay's SETTINGS and reads the first
// frame, which must be SETTINGS, all within HandshakeTimeout. The relay's
// SETTINGS go out with their acknowledgement of the client's when those
// came with the preface, as clients send them; before the reader waits for
// them otherwise.
func (c *conn) handshake() (http2.ErrCode, bool) {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.r.cfg.HandshakeTimeout))
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil || !bytes.Equal(pre[:], []byte(http2.ClientPreface)) {
		return 0, false
	}
	c.preface(&c.rb)
	f, err := c.readFrame()
	if err != nil {
		return connErrCode(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return http2.ErrCodeProtocol, true
	}
	if err := c.onSettings(sf); err != nil {
		return connErrCode(err)
	}
	c.mu.Lock()
	c.armIdle()
	c.mu.Unlock()
	return 0, true
}

// armIdle sets the idle deadline of a client connection without streams;
// it runs under mu.
func (c *conn) armIdle() {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.r.cfg.IdleTimeout))
}

// readDown reads and relays frames; it returns the GOAWAY code to end with
// (and false when there is nothing to say: the connection closed or timed
// out idle).
func (c *conn) readDown() (http2.ErrCode, bool) {
	defer c.startJobs()
	defer c.rb.flush()
	for {
		f, err := c.readFrame()
		c.lastRead.Store(time.Now().UnixNano())
		if err == nil {
			err = c.downFrame(f)
		}
		if err == nil {
			continue
		}
		var se http2.StreamError
		if errors.As(err, &se) {
			c.mu.Lock()
			c.maxClientID = max(c.maxClientID, se.StreamID)
			c.mu.Unlock()
			if c.resetPair(se.StreamID, se.Code, http2.ErrCodeCancel) {
				return http2.ErrCodeEnhanceYourCalm, true
			}
			continue
		}
		if isIOError(err) {
			c.mu.Lock()
			idle := len(c.streams) == 0
			c.mu.Unlock()
			// a client idle past IdleTimeout is told why it is closed
			return http2.ErrCodeNo, idle && isTimeout(err)
		}
		return connErrCode(err)
	}
}

func (c *conn) downFrame(f http2.Frame) error {
	if ok, err := c.handle(f); ok {
		return err
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if f.HasPriority() && f.Priority.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
		return c.downHeaders(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.goneAway = true
		c.mu.Unlock()
	}
	return nil // PRIORITY and unknown frames are ignored
}

// downHeaders opens a stream upstream for a request, or relays trailers.
func (c *conn) downHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	if l := c.streams[id]; l != nil {
		return c.downTrailers(l, f) // unlocks c.mu
	}
	if id <= c.maxClientID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.maxClientID = id
	if c.goneAway || c.draining || len(c.streams) >= int(c.r.cfg.MaxStreams) {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	c.mu.Unlock()
	if f.Truncated {
		c.refuse(id, "431")
		return nil
	}
	wantLen, err := checkRequest(f)
	if err == nil && f.StreamEnded() && wantLen > 0 {
		err = errContentLength
	}
	if err != nil {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol, Cause: err}
	}
	rt, err := c.r.route(f.Fields, c.peer, c.tls)
	if err != nil {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeInternal, Cause: err}
	}
	d := newStream(c, id, wantLen, rt, f.Fields)
	u := d.peer
	end := f.StreamEnded()
	d.remoteDone = end
	c.mu.Lock()
	d.sendWin = c.peerInitWin
	if c.dead {
		c.mu.Unlock()
		return nil
	}
	if len(c.streams) == 0 {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	c.streams[id] = d
	c.mu.Unlock()
	if d.x != nil {
		switch {
		case d.x.admitting:
			c.start(job{d.x, true})
		case d.x.in != nil:
			c.start(job{d.x, false})
		}
		if end {
			d.x.body(nil, true)
		} else {
			c.bodyDeadline(d, rt.BodyTimeout)
		}
		return nil
	}
	header := f.Fields
	if rt.Header != nil {
		header = rt.Header
	}
	if err := c.r.pools[rt.Pool].open(u, header, end, &c.rb); err != nil {
		c.r.log.Debug("relay: stream refused", "err", err)
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream, Cause: err}
	}
	if !end {
		c.bodyDeadline(d, rt.BodyTimeout) // after open: its timer may reset u
	}
	return nil
}

// downTrailers relays the trailers that end stream l's request, or refuses
// a second header block that is not trailers. It is called with c.mu held
// and unlocks it.
func (c *conn) downTrailers(l *leg, f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if l.remoteDone {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	if !f.StreamEnded() || len(f.PseudoFields()) > 0 {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if l.wantLen >= 0 && l.gotLen != l.wantLen {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	l.remoteDone = true
	c.maybeRemove(l)
	c.mu.Unlock()
	if l.x != nil {
		l.x.body(nil, true) // request trailers end the body; they are not forwarded
		return nil
	}
	if p := l.peer; p.c.noTrailers {
		p.c.sendData(p, nil, true, &c.rb)
	} else {
		p.c.sendHeaders(p, f.Fields, true, &c.rb)
	}
	return nil
}

// bodyDeadline arms the BodyTimeout of d, a stream whose request is still
// coming (none when within is zero), once the reader has handled the
// frames it already read (armBodies): a request whose body came with its
// header list, as a unary call's does, never costs a timer.
func (c *conn) bodyDeadline(d *leg, within time.Duration) {
	if within > 0 {
		c.bodyDue = append(c.bodyDue, due{d, within})
	}
}

// start has j run on a worker once the reader handled the frames it
// already read (startJobs): an exchange whose body came with its header
// list, as a unary call's does, is admitted and handled by one worker in
// one go, its body whole by then; reader goroutine only.
func (c *conn) start(j job) { c.jobs = append(c.jobs, j) }

// startJobs hands the exchanges start queued to workers; reader goroutine
// only.
func (c *conn) startJobs() {
	for i, j := range c.jobs {
		c.r.spawn(j)
		c.jobs[i] = job{}
	}
	c.jobs = c.jobs[:0]
}

// due is a stream whose BodyTimeout is armed once the reader waits.
type due struct {
	l      *leg
	within time.Duration
}

// armBodies arms the BodyTimeout of the streams opened since the reader
// last waited whose request has not ended; reader goroutine only.
func (c *conn) armBodies() {
	c.mu.Lock()
	for i, b := range c.bodyDue {
		if d := b.l; !d.gone && !d.remoteDone {
			d.body = time.AfterFunc(b.within, func() { c.bodyLate(d) })
		}
		c.bodyDue[i] = due{}
	}
	c.bodyDue = c.bodyDue[:0]
	c.mu.Unlock()
}

// refuse answers a request with status and no body.
func (c *conn) refuse(id uint32, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeHeaders(id, []hpack.HeaderField{{Name: ":status", Value: status}}, true)
	_ = c.wfr.WriteRSTStream(id, http2.ErrCodeNo)
	c.kick()
}

var (
	errPseudo        = errors.New("request lacks :method, :scheme or :path, or carries :status")
	errConnHeader    = errors.New("connection-specific header field")
	errContentLength = errors.New("malformed content-length")
)

// checkRequest applies RFC 9113 §8.2 and §8.3 to a request's header list
// (the framer already checked names, pseudo-header order and duplicates)
// and returns its content-length, -1 if it has none.
func checkRequest(f *http2.MetaHeadersFrame) (int64, error) {
	if f.PseudoValue("method") == "" || f.PseudoValue("scheme") == "" || f.PseudoValue("path") == "" || f.PseudoValue("status") != "" {
		return 0, errPseudo
	}
	want := int64(-1)
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return 0, errConnHeader
		case "te":
			if hf.Value != "trailers" {
				return 0, errConnHeader
			}
		case "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || (want >= 0 && int64(n) != want) {
				return 0, errContentLength
			}
			want = int64(n)
		}
	}
	return want, nil
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
