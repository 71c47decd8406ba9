package frames

import (
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// leg is one side of a relayed stream: the stream on a client connection
// or the stream on an upstream connection it is paired with (peer). Its
// fields are guarded by c.mu; c, id and peer are set before a leg is
// shared, but for the upstream leg of an exchange: the Handler's Forward
// sets its c and id (under the upstream connection's mu) while the client
// connection may be ending, so the client side never reads them. It ends
// that upstream stream by cancelling the exchange's context instead.
type leg struct {
	c    *conn
	id   uint32
	peer *leg

	sendWin   int64  // what may still be sent to the peer on this stream
	recvWin   int64  // what the peer may still send on this stream
	owed      int64  // receive credit not yet returned
	pend      []byte // DATA waiting for send window
	pendEnd   bool   // END_STREAM after pend
	pendTrail []hpack.HeaderField
	queued    bool // in c.blocked

	remoteDone bool // END_STREAM received
	localDone  bool // END_STREAM sent
	gone       bool // no longer in c.streams

	wantLen, gotLen int64 // content-length of a request (-1: none)

	x    *exchange // client side of a stream a Handler handles
	hold *held     // upstream side of a stream a Handler forwarded

	body *time.Timer // client side: Route.BodyTimeout, until END_STREAM
}

// resetPeer ends the other side of l after l ended with code: the paired
// stream is reset, or a Handler waiting for the upstream's answer on l is
// told it will not come. The upstream stream of an exchange is the
// Handler's: it resets it when the exchange's context ends (remove and
// finish cancel it), so it is not touched here.
func (l *leg) resetPeer(code http2.ErrCode) {
	if l.x != nil {
		return
	}
	if l.hold != nil {
		l.hold.fail(http2.StreamError{StreamID: l.id, Code: code})
		return
	}
	if p := l.peer; p != nil && p.c != nil {
		p.c.resetLeg(p, code)
	}
}

// remove drops l from its connection; it runs under c.mu.
func (c *conn) remove(l *leg) {
	if l.gone {
		return
	}
	l.gone = true
	l.pend = nil
	l.pendTrail = nil
	if l.body != nil {
		l.body.Stop()
	}
	delete(c.streams, l.id)
	if l.x != nil {
		l.x.end()
	}
	switch {
	case len(c.streams) > 0:
	case c.server && c.draining:
		_ = c.nc.SetReadDeadline(time.Now()) // the reader ends; the connection closes
	case c.server:
		c.armIdle()
	case c.goneAway || c.nextID > maxStreamID:
		c.nc.Close() // an upstream connection that takes no more streams
	}
}

// maybeRemove drops l once both directions ended; it runs under c.mu.
func (c *conn) maybeRemove(l *leg) {
	if l.remoteDone && l.localDone {
		c.remove(l)
	}
}

// resetLeg sends RST_STREAM for l, if it is still open, and drops it.
func (c *conn) resetLeg(l *leg, code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone {
		return
	}
	_ = c.wfr.WriteRSTStream(l.id, code)
	c.remove(l)
	c.kick()
}

// bodyLate resets l, a client stream whose request did not end within its
// Route's BodyTimeout, and its pair.
func (c *conn) bodyLate(l *leg) {
	c.mu.Lock()
	if l.gone || l.remoteDone {
		c.mu.Unlock()
		return
	}
	_ = c.wfr.WriteRSTStream(l.id, http2.ErrCodeCancel)
	c.remove(l)
	c.kick()
	c.mu.Unlock()
	l.resetPeer(http2.ErrCodeCancel)
}

// resetPair resets stream id on this connection with code (a stream error)
// and the stream paired with it with cancel. On a client connection it
// reports a flood: a stream the client made the relay reset after it was
// opened cost an upstream stream as a client reset does, so it counts toward
// the rapid-reset limit (MadeYouReset, CVE-2025-8671); a refused one did not.
func (c *conn) resetPair(id uint32, code, cancel http2.ErrCode) (flood bool) {
	c.mu.Lock()
	_ = c.wfr.WriteRSTStream(id, code)
	c.kick()
	l := c.streams[id]
	if l != nil {
		c.remove(l)
		flood = c.server && code != http2.ErrCodeRefusedStream && c.countReset()
	}
	c.mu.Unlock()
	if l != nil {
		l.resetPeer(cancel)
	}
	return flood
}

// sendData queues data (and END_STREAM) on l as far as the send windows
// allow and keeps the rest for drain. It returns the bytes sent now, the
// credit to return to the sender. b, when not nil, writes what is queued
// (see batch).
func (c *conn) sendData(l *leg, data []byte, end bool, b *batch) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone || c.dead {
		return 0
	}
	if len(l.pend) > 0 {
		l.pend = append(l.pend, data...)
		l.pendEnd = l.pendEnd || end
		return 0
	}
	n := c.writeData(l, data, end)
	if n < len(data) {
		l.pend = append(l.pend, data[n:]...)
		l.pendEnd = end
		c.block(l)
	} else if end {
		l.localDone = true
		c.maybeRemove(l)
	}
	b.add(c)
	c.kick()
	return n
}

// writeData writes as much of data as the windows allow, in frames of at
// most the peer's frame size, END_STREAM on the last if all of it fits; it
// runs under mu and returns the bytes written.
func (c *conn) writeData(l *leg, data []byte, end bool) int {
	if len(data) == 0 {
		if end {
			_ = c.wfr.WriteData(l.id, true, nil)
		}
		return 0
	}
	sent := 0
	for sent < len(data) {
		// DATA waits in the leg rather than in out once out holds half of
		// MaxWriteBuffer: the writer drains it after its next write
		room := int64(c.r.cfg.MaxWriteBuffer/2 - len(c.out))
		n := int(min(c.sendWin, l.sendWin, int64(c.peerMaxFrame), int64(len(data)-sent), room))
		if n <= 0 {
			break
		}
		last := sent+n == len(data)
		_ = c.wfr.WriteData(l.id, end && last, data[sent:sent+n])
		c.pingStrikes = 0 // pings after data are welcome (BDP estimation)
		c.sendWin -= int64(n)
		l.sendWin -= int64(n)
		sent += n
	}
	return sent
}

func (c *conn) block(l *leg) {
	if !l.queued {
		l.queued = true
		c.blocked = append(c.blocked, l)
	}
}

// sendHeaders queues a header block on l; trailers wait behind pending
// DATA. It runs without locks held; b as for sendData.
func (c *conn) sendHeaders(l *leg, fields []hpack.HeaderField, end bool, b *batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone || c.dead {
		return
	}
	if len(l.pend) > 0 {
		l.pendTrail = fields
		l.pendEnd = true
		return
	}
	c.writeHeaders(l.id, fields, end)
	if end {
		l.localDone = true
		c.maybeRemove(l)
	}
	b.add(c)
	c.kick()
}

// drain sends what blocked legs hold as far as the windows now allow; it
// runs under mu and appends the credit owed to their peers to *owed.
func (c *conn) drain(owed *[]credit) {
	before := len(c.out)
	kept := c.blocked[:0]
	for _, l := range c.blocked {
		if l.gone {
			l.queued = false
			continue
		}
		n := c.writeData(l, l.pend, l.pendEnd && l.pendTrail == nil)
		if n > 0 && l.x == nil && l.hold == nil { // an exchange's legs owe no one credit
			*owed = append(*owed, credit{l.peer, n})
		}
		l.pend = l.pend[n:]
		if len(l.pend) > 0 {
			kept = append(kept, l)
			continue
		}
		l.pend = nil
		l.queued = false
		l.woken()
		if l.pendEnd {
			if l.pendTrail != nil {
				c.writeHeaders(l.id, l.pendTrail, true)
				l.pendTrail = nil
			}
			l.localDone = true
			c.maybeRemove(l)
		}
	}
	clear(c.blocked[len(kept):])
	c.blocked = kept
	if len(c.out) != before {
		c.kick()
	}
}

// payCredits returns the credit a drain collected in owed and empties it;
// it runs without locks held.
func payCredits(owed *[]credit) {
	for i, cr := range *owed {
		cr.l.c.credit(cr.l, cr.n)
		(*owed)[i] = credit{}
	}
	*owed = (*owed)[:0]
}

// credit returns n bytes of stream receive window to the peer of l once
// half the window is owed (connection credit is returned on receipt).
func (c *conn) credit(l *leg, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone || l.remoteDone {
		return
	}
	c.returnCredit(l, int64(n))
}

// onData relays a DATA frame to the paired stream.
func (c *conn) onData(f *http2.DataFrame) error {
	id, data, flen := f.StreamID, f.Data(), int64(f.Length)
	end := f.StreamEnded()
	c.mu.Lock()
	if flen > c.recvWin {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvWin -= flen
	c.connOwed += flen
	if c.connOwed >= int64(c.r.cfg.ConnWindow)/4 {
		_ = c.wfr.WriteWindowUpdate(0, uint32(c.connOwed))
		c.recvWin += c.connOwed
		c.connOwed = 0
		c.rb.add(c) // the reader writes it
		c.kick()
	}
	l := c.streams[id]
	if l == nil {
		err := c.unknownStream(id)
		c.mu.Unlock()
		if err == nil && c.server {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
		}
		return err // nil: a stream the relay reset; the upstream may still send
	}
	if l.remoteDone {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	if flen > l.recvWin {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	l.recvWin -= flen
	l.owed += flen - int64(len(data)) // padding is never forwarded
	if l.wantLen >= 0 {
		l.gotLen += int64(len(data))
		if l.gotLen > l.wantLen || (end && l.gotLen != l.wantLen) {
			c.mu.Unlock()
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
	}
	if end {
		l.remoteDone = true
		c.maybeRemove(l)
	}
	if l.x != nil || l.hold != nil {
		// kept here, not relayed: the window is returned at once (the
		// buffer is bounded by the Route's MaxBody), but for a stream not
		// admitted yet
		// or a streamed body (Route.Stream), whose window Read returns
		if l.x == nil || l.x.in == nil && !l.x.withhold(int64(len(data))) {
			c.returnCredit(l, int64(len(data)))
		}
		c.mu.Unlock()
		if l.x != nil {
			l.x.body(data, end)
		} else {
			l.hold.data(c, l, data, end, &c.rb)
		}
		return nil
	}
	p := l.peer
	c.mu.Unlock()
	if n := p.c.sendData(p, data, end, &c.rb); n > 0 && !end {
		c.credit(l, n)
	}
	return nil
}

// returnCredit owes n bytes of l's receive window back to its sender and
// returns what is owed once it is half the window; it runs under mu.
func (c *conn) returnCredit(l *leg, n int64) {
	l.owed += n
	if !l.remoteDone && l.owed >= int64(c.r.cfg.StreamWindow)/2 {
		_ = c.wfr.WriteWindowUpdate(l.id, uint32(l.owed))
		l.recvWin += l.owed
		l.owed = 0
		c.kick()
	}
}

// onWindowUpdate grows a send window and sends what waited for it.
func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	if f.StreamID == 0 {
		c.sendWin += int64(f.Increment)
		if c.sendWin > maxWindow {
			c.mu.Unlock()
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
	} else {
		l := c.streams[f.StreamID]
		if l == nil {
			err := c.unknownStream(f.StreamID)
			c.mu.Unlock()
			return err
		}
		l.sendWin += int64(f.Increment)
		if l.sendWin > maxWindow {
			c.mu.Unlock()
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
		}
	}
	c.drain(&c.scratch)
	c.mu.Unlock()
	payCredits(&c.scratch)
	return nil
}

// onSettings applies the peer's SETTINGS and sends what a larger initial
// window lets through.
func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	err := c.applySettings(f)
	if err == nil {
		c.drain(&c.scratch)
	}
	c.mu.Unlock()
	payCredits(&c.scratch)
	return err
}

// onRST ends a stream the peer reset and resets its pair.
func (c *conn) onRST(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	l := c.streams[f.StreamID]
	if l == nil {
		err := c.unknownStream(f.StreamID)
		c.mu.Unlock()
		return err
	}
	c.remove(l)
	flood := c.server && c.countReset()
	c.mu.Unlock()
	code := f.ErrCode
	if c.server {
		code = http2.ErrCodeCancel
	}
	if flood {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	l.resetPeer(code)
	return nil
}

// countReset counts a stream the client reset, or made the relay reset, and
// reports a rapid-reset flood (CVE-2023-44487, CVE-2025-8671): more than
// twice MaxStreams resets in a second, each of which cost an upstream
// stream. It runs under mu.
func (c *conn) countReset() bool {
	now := time.Now()
	if now.Sub(c.resetsFrom) > time.Second {
		c.resetsFrom, c.resets = now, 0
	}
	c.resets++
	return c.resets > 2*int(c.r.cfg.MaxStreams)
}

// unknownStream answers a frame for a stream c does not hold: from a client,
// a stream never opened is a connection error; one that ended, or one the
// relay reset upstream, is left to the caller. It runs under mu.
func (c *conn) unknownStream(id uint32) error {
	if c.server && id > c.maxClientID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil
}

// onPing answers a PING.
func (c *conn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if every := c.r.cfg.MinPingInterval; c.server && every > 0 {
		// grpc-go's keepalive enforcement: a client pinging more often
		// than MinPingInterval, three times with nothing sent to it in
		// between, is sent GOAWAY ENHANCE_YOUR_CALM
		now := time.Now()
		if now.Sub(c.lastPing) < every {
			if c.pingStrikes++; c.pingStrikes > maxPingStrikes {
				return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
			}
		}
		c.lastPing = now
	}
	_ = c.wfr.WritePing(true, f.Data)
	c.rb.add(c) // the reader writes it
	c.kick()
	return nil
}

// maxPingStrikes is how many pings too early a client is forgiven (grpc-go's).
const maxPingStrikes = 2

// handle dispatches the frames both sides treat alike; it reports false for
// a frame the caller handles.
func (c *conn) handle(f http2.Frame) (bool, error) {
	switch f := f.(type) {
	case *http2.DataFrame:
		return true, c.onData(f)
	case *http2.WindowUpdateFrame:
		return true, c.onWindowUpdate(f)
	case *http2.SettingsFrame:
		return true, c.onSettings(f)
	case *http2.RSTStreamFrame:
		return true, c.onRST(f)
	case *http2.PingFrame:
		return true, c.onPing(f)
	case *http2.PushPromiseFrame:
		return true, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return false, nil
}
