package frames

import (
	"context"
	"errors"
	"io"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ErrStreamEnded is the error of a streamed answer's write once the stream
// can take no more of it: the client reset it, its connection ended, or the
// Handler returned.
var ErrStreamEnded = errors.New("frames: the client stream ended")

// streamed is the answer a Handler streams to its client (Request.SendHeader
// and Request.Write) in place of returning it whole. Its writes never
// buffer more than one write beyond the client's flow-control window: a
// write waits until what the last one left pending went out, woken by the
// client's WINDOW_UPDATE (drain), and ends with the stream.
type streamed struct {
	mu     sync.Mutex // one write at a time, and none once ended
	header bool       // the header list went out
	ended  bool       // the Handler returned: the answer is complete
	wake   chan struct{}
}

// SendHeader sends the answer's header list now: the answer is then
// streamed, and the Response the Handler returns is its rest (its Body and
// Trailer; its Header is ignored). A second call does nothing.
func (r *Request) SendHeader(fields []hpack.HeaderField) error {
	x := r.x
	s := x.stream()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return ErrStreamEnded
	}
	if s.header {
		return nil
	}
	if len(fields) == 0 {
		return errors.New("frames: an answer's header list must not be empty")
	}
	s.header = true
	x.c.sendHeaders(x.d, fields, false, nil)
	return nil
}

// Write sends data on the answer whose header list SendHeader sent. It
// waits while an earlier write still waits for the client's window, until
// ctx ends or the stream does (ErrStreamEnded); data is not retained.
func (r *Request) Write(ctx context.Context, data []byte) error {
	x := r.x
	s := x.stream()
	c, l := x.c, x.d
	for {
		c.mu.Lock()
		gone, pending := l.gone || c.dead || l.localDone, len(l.pend) > 0
		c.mu.Unlock()
		if gone {
			return ErrStreamEnded
		}
		if !pending {
			break
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-x.ctx.Done():
			return x.endErr()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
		return ErrStreamEnded
	case !s.header:
		return errors.New("frames: Write before SendHeader")
	}
	c.sendData(l, data, false, nil) // copies what does not fit the window
	return nil
}

// stream is the exchange's streamed answer, made on first use.
func (x *exchange) stream() *streamed {
	x.c.mu.Lock()
	defer x.c.mu.Unlock()
	if x.out == nil {
		x.out = &streamed{wake: make(chan struct{}, 1)}
	}
	return x.out
}

// woken tells a streamed answer's write waiting on l that l's pending DATA
// went out; it runs under c.mu.
func (l *leg) woken() {
	if l.x != nil && l.x.out != nil && len(l.pend) == 0 {
		select {
		case l.x.out.wake <- struct{}{}:
		default:
		}
	}
}

// end ends a streamed answer: nothing is written after; it reports whether
// its header list went out (the Handler's Response is then its rest).
func (s *streamed) end() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	return s.header
}

// finishStreamed sends the rest of a streamed answer on l: resp's body and
// trailers, END_STREAM on the last.
func (c *conn) finishStreamed(l *leg, resp Response) {
	var b batch
	switch {
	case len(resp.Body) > 0 || resp.Trailer == nil:
		c.sendData(l, resp.Body, resp.Trailer == nil, &b)
		if resp.Trailer != nil {
			c.sendHeaders(l, resp.Trailer, true, &b)
		}
	default:
		c.sendHeaders(l, resp.Trailer, true, &b)
	}
	c.stopClient(l)
	b.flush()
}

// stopClient tells a client still sending its request, whose answer went
// out whole, to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1).
func (c *conn) stopClient(l *leg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !l.gone && l.localDone && !l.remoteDone {
		_ = c.wfr.WriteRSTStream(l.id, http2.ErrCodeNo)
		c.remove(l)
		c.kick()
	}
}

// inbox is a request body the Handler reads as it comes (Route.Stream):
// what the client sent that was not read yet, never more than the stream's
// receive window, whose credit is returned only as it is read.
type inbox struct {
	mu   sync.Mutex
	buf  []byte
	end  bool
	wake chan struct{} // one token: buf or end changed
}

// put takes the next piece of the body on the client reader.
func (in *inbox) put(data []byte, end bool) {
	in.mu.Lock()
	in.buf = append(in.buf, data...)
	in.end = in.end || end
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// Read returns the request body received since the last Read, waiting
// until some comes; io.EOF once the client ended its request and all of it
// was read. Its window goes back to the client now: what it returns is the
// caller's. Only for a Route.Stream request.
func (r *Request) Read(ctx context.Context) ([]byte, error) {
	x := r.x
	in := x.in
	if in == nil {
		return nil, errors.New("frames: Read on a buffered request")
	}
	for {
		in.mu.Lock()
		b, end := in.buf, in.end
		in.buf = nil
		in.mu.Unlock()
		if len(b) > 0 {
			x.c.credit(x.d, len(b))
			return b, nil
		}
		if end {
			return nil, io.EOF
		}
		select {
		case <-in.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-x.ctx.Done():
			return nil, x.endErr()
		}
	}
}
