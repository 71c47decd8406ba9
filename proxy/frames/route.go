package frames

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Upstream is one pool's upstream: HTTP/2 with prior knowledge on whatever
// Dial returns (a TLS client negotiating h2, an in-memory pipe), or on a TCP
// connection to Addr when Dial is nil.
type Upstream struct {
	Addr string
	Dial func(ctx context.Context) (net.Conn, error)
	// MaxStreams, when not zero, caps the streams open on one connection
	// below the upstream's SETTINGS_MAX_CONCURRENT_STREAMS: an upstream
	// counts a stream the relay reset until its handler ended, so opening
	// right up to its limit races with it (REFUSED_STREAM).
	MaxStreams uint32
	// MaxConns, when not zero, caps this pool's connections in place of
	// Config.MaxUpstreamConns: a pool whose streams clients can hold open
	// (an in-process server behind the relay) needs room for every
	// client's, MaxConns x MaxStreams of Config over its MaxStreams.
	MaxConns int
	// NoRequestTrailers ends a stream whose client sent trailers with an
	// empty DATA frame instead of relaying them: for a gRPC upstream, which
	// has no use for request trailers, and grpc-go in particular, which
	// treats HEADERS on a stream it already ended as an error of the whole
	// connection (not ignored, as RFC 9113 §5.1 asks), so that one client's
	// trailers racing with its answer would reset every stream on it.
	NoRequestTrailers bool
}

// Router picks what the relay does with a stream from its request header
// list (pseudo-header fields first, as received), the client connection's
// address and, on a TLS listener, its TLS state (nil without TLS). It runs
// on the client connection's reader, so it must not block.
type Router interface {
	Route(header []hpack.HeaderField, peer net.Addr, tls *tls.ConnectionState) Route
}

// Route is what the relay does with one stream.
type Route struct {
	// Pool is the index in Config.Upstreams of the pool a passed-through
	// stream goes to.
	Pool int
	// Header, when not nil, is the header list a passed-through stream
	// opens upstream with, in place of the client's.
	Header []hpack.HeaderField
	// Handler, when set, handles the stream instead: the relay buffers the
	// request body (up to MaxBody bytes) and calls it once the body ended
	// or outgrew MaxBody.
	Handler Handler
	// MaxBody bounds a buffered request body, and the upstream answer a
	// Handler forwards for (default 4 MiB).
	MaxBody int
	// BodyTimeout, when not zero, bounds how long after its HEADERS the
	// client may take to end its request (END_STREAM): a stream still
	// sending then is reset (CANCEL) toward the client and upstream, so a
	// client that opens streams and sends nothing holds them no longer.
	// For requests of one message (a gRPC unary or server-streaming call).
	BodyTimeout time.Duration
	// Timeout, with a Handler, when above zero, ends the stream's context
	// (the one Admit and Handle get) that long after its HEADERS arrived:
	// a gRPC call's grpc-timeout, counted from where grpc-go's server
	// counts it. One context of the exchange's own carries it, so a
	// Handler need not derive another (a timer and a child registered
	// with its parent for every call).
	Timeout time.Duration
	// Stream, with a Handler, does not buffer the request body: the
	// Handler starts once the stream is admitted and reads the body as it
	// comes (Request.Read), its window returned to the client as it is
	// read, so a client sending faster than the Handler reads is held back
	// by flow control. MaxBody does not apply.
	Stream bool
}

// DefaultMaxBody is Route.MaxBody's default.
const DefaultMaxBody = 4 << 20

// Handler answers a stream whose request the relay buffered. Handle runs
// in a goroutine of its own; ctx ends when the client resets the stream or
// the connection ends. It returns the answer the client gets: its own, or
// the upstream's from Request.Forward. An answer without a header list
// resets the stream (INTERNAL_ERROR). A Handler may instead stream its
// answer (Request.SendHeader, Request.Write); it then returns the rest.
type Handler interface {
	Handle(ctx context.Context, req *Request) Response
}

// Admitter is a Handler that admits a stream on its header list before any
// of its body is kept: Admit runs on a worker as soon as the HEADERS
// arrived. Until it returns, the stream's body is not read further than
// the receive window the client already had (none of it is returned); a
// refusal (not nil) is the client's answer at once, and whatever body came
// or comes is dropped. Otherwise the window is returned, the body taken up
// to MaxBody, and Handle called with Request.Admitted set to admitted, on
// the context Admit got (a context Admit derived from it, with values of
// its own, may stand for it there).
type Admitter interface {
	Admit(ctx context.Context, header []hpack.HeaderField, tls *tls.ConnectionState) (admitted any, refusal *Response)
}

// Abandoner is what an Admitter admits (admitted) when it must learn that
// its stream went before Handle was called for it (reset, body timeout,
// connection gone): Abandon is then called once, on a goroutine of its
// own, and Handle may still be called after it (with a context that has
// ended). A stream that reaches Handle is never abandoned.
type Abandoner interface {
	Abandon()
}

// Request is a buffered request.
type Request struct {
	// Header is the request's header list as the client sent it.
	Header []hpack.HeaderField
	// Body is the request body: all of it, or its first MaxBody bytes
	// when Truncated.
	Body      []byte
	Truncated bool
	// TLS is the client connection's TLS state; nil without TLS.
	TLS *tls.ConnectionState
	// Admitted is what an Admitter's Admit returned for the stream.
	Admitted any

	x *exchange
}

// Response is a whole answer: the header list, the body and the trailers
// (none when Trailer is nil). An answer without body and trailers is one
// HEADERS frame that ends the stream.
type Response struct {
	Header  []hpack.HeaderField
	Body    []byte
	Trailer []hpack.HeaderField
}

// Errors of Forward.
var (
	ErrTruncated      = errors.New("frames: the request body is incomplete")
	ErrForwarded      = errors.New("frames: the request was already forwarded")
	ErrAnswerTooLarge = errors.New("frames: the upstream's answer exceeds the body bound")
	// ErrNotSent wraps the errors of a Forward that sent nothing upstream:
	// ctx had ended, or no stream could be opened (ErrPoolFull, a dial that
	// failed or is backing off).
	ErrNotSent         = errors.New("frames: nothing was sent upstream")
	errNoSuchPool      = errors.New("frames: no such upstream pool")
	errIncompleteReply = errors.New("frames: the upstream ended the stream without an answer")
)

// route asks the Router for a stream's route.
func (r *Relay) route(header []hpack.HeaderField, peer net.Addr, tls *tls.ConnectionState) (Route, error) {
	if r.cfg.Router == nil {
		return Route{}, nil
	}
	rt := r.cfg.Router.Route(header, peer, tls)
	if rt.Pool < 0 || rt.Pool >= len(r.pools) {
		return Route{}, fmt.Errorf("%w: %d", errNoSuchPool, rt.Pool)
	}
	if rt.MaxBody <= 0 {
		rt.MaxBody = DefaultMaxBody
	}
	return rt, nil
}

// exchange is a stream a Handler handles, on its client side. Its fields
// but cancel are the client reader's until the Handler starts, then the
// Handler's.
type exchange struct {
	c      *conn
	d      *leg
	rt     Route
	header []hpack.HeaderField
	max    int
	ctx    context.Context // &xc
	xc     exchangeCtx

	buf       []byte
	truncated bool
	started   bool // the body is whole: the client reader takes no more of it
	forwarded bool
	later     bool      // forwarded with ForwardThen: the Answerer answers
	held      held      // Forward's
	out       *streamed // an answer the Handler streams (made under c.mu)
	in        *inbox    // a request body the Handler reads as it comes (Route.Stream)
	req       Request   // the Handler's, held here so that it costs no allocation of its own

	// Under c.mu: the admission of an Admitter's stream.
	admitting   bool  // Admit has not returned
	refused     bool  // Admit refused: the body is dropped
	withheld    int64 // body bytes whose window is returned once admitted
	bodyDone    bool  // started, as the admitting worker sees it
	admitted    any
	ended       bool // the stream went (end)
	handled     bool // Handle was called for an Abandoner
	abandoned   bool // Abandon was called
	awaiting    bool // ForwardThen waits for the upstream's answer
	ctxDeadline bool // and its wait ends at ctx's deadline (expire), not a timer of its own
}

type peerKey struct{}

// peerCtx is a context carrying a client's address (Peer); an exchange
// holds its own, so that it costs no allocation.
type peerCtx struct {
	context.Context
	addr net.Addr
}

func (p *peerCtx) Value(key any) any {
	if key == (peerKey{}) {
		return p.addr
	}
	return p.Context.Value(key)
}

// peerAddr is a client's address whose String is worked out once for its
// connection rather than for every request.
type peerAddr struct {
	net.Addr
	s string
}

func (a peerAddr) String() string { return a.s }

// newPeerAddr is a's peerAddr (nil for nil).
func newPeerAddr(a net.Addr) net.Addr {
	if a == nil {
		return nil
	}
	return peerAddr{a, a.String()}
}

// Peer is the client address of the connection a handler's request came
// on (nil for a context the relay did not make).
func Peer(ctx context.Context) net.Addr {
	a, _ := ctx.Value(peerKey{}).(net.Addr)
	return a
}

// newStream makes the client side of stream id and the upstream side it
// is paired with, and its exchange when rt has a Handler, in one
// allocation.
func newStream(c *conn, id uint32, wantLen int64, rt Route, header []hpack.HeaderField) *leg {
	var legs *[2]leg
	var x *exchange
	if rt.Handler != nil {
		s := new(struct {
			legs [2]leg
			x    exchange
		})
		legs, x = &s.legs, &s.x
	} else {
		legs = new([2]leg)
	}
	d, u := &legs[0], &legs[1]
	win := int64(c.r.cfg.StreamWindow)
	d.c, d.id, d.wantLen, d.recvWin, d.peer = c, id, wantLen, win, u
	u.peer, u.wantLen, u.recvWin = d, -1, win
	if x != nil {
		x.init(c, d, rt, header)
		d.x = x
	}
	return d
}

// init makes x the exchange of d, routed by rt.
func (x *exchange) init(c *conn, d *leg, rt Route, header []hpack.HeaderField) {
	_, admitting := rt.Handler.(Admitter)
	x.c, x.d, x.rt, x.header, x.max, x.admitting = c, d, rt, header, rt.MaxBody, admitting
	x.startCtx(c.peer, rt.Timeout)
	if rt.Stream {
		x.in = &inbox{wake: make(chan struct{}, 1)}
	}
}

// endErr is the error of a wait that the exchange's context ended: the
// call's deadline (Route.Timeout) once the exchange's timer ran (why, which
// the context's Err may report a little after), else ErrStreamEnded.
func (x *exchange) endErr() error {
	if err := x.xc.why(); err == context.DeadlineExceeded {
		return err
	}
	return ErrStreamEnded
}

// end ends the exchange when its stream goes: its context is canceled and
// an Abandoner admitted for it but not handled is abandoned. It runs under
// c.mu.
func (x *exchange) end() {
	x.xc.cancel(context.Canceled)
	x.ended = true
	x.abandon()
	if x.awaiting { // ForwardThen's wait ends, on a goroutine of its own: end holds c.mu
		x.awaiting = false
		go x.abortForward(context.Canceled)
	}
}

// abandon calls Abandon, on a goroutine of its own, on what Admit admitted
// when it is an Abandoner, Handle was not called and Abandon was not
// already; it runs under c.mu.
func (x *exchange) abandon() {
	a, ok := x.admitted.(Abandoner)
	if !ok || x.admitting || x.handled || x.abandoned {
		return
	}
	x.abandoned = true
	go a.Abandon()
}

// withhold reports whether n bytes of body just received keep their window
// until the stream is admitted (counted then), or for good once it was
// refused (its answer may not have ended the stream yet); it runs under c.mu.
func (x *exchange) withhold(n int64) bool {
	if x.admitting {
		x.withheld += n
	}
	return x.admitting || x.refused
}

// body takes the next piece of the request body on the client reader; the
// Handler starts once the body ended or outgrew the bound, and the stream
// was admitted. What comes after that, or for a refused stream, is dropped.
func (x *exchange) body(data []byte, end bool) {
	if x.started {
		return
	}
	x.c.mu.Lock()
	refused := x.refused
	x.c.mu.Unlock()
	if refused {
		return
	}
	if x.in != nil {
		x.in.put(data, end)
		return
	}
	if room := x.max - len(x.buf); len(data) > room {
		x.buf = append(x.buf, data[:room]...)
		x.truncated = true
	} else {
		x.buf = append(x.buf, data...)
	}
	if end || x.truncated {
		x.started = true
		x.c.mu.Lock()
		x.bodyDone = true
		start := !x.admitting && !x.refused
		x.c.mu.Unlock()
		if start {
			x.c.start(job{x, false}) // body runs on the client reader
		}
	}
}

// admit runs the Admitter on a worker: a refusal is answered now; an
// admitted stream gets its withheld window back, and the Handler runs here
// once the body is whole (or on the client reader when it is whole later).
func (x *exchange) admit() {
	admitted, refusal := x.rt.Handler.(Admitter).Admit(x.ctx, x.header, x.c.tls)
	c := x.c
	c.mu.Lock()
	x.admitting, x.admitted = false, admitted
	if x.ended {
		x.abandon() // the stream went while Admit ran
	}
	if refusal != nil {
		x.refused = true
	} else if x.withheld > 0 && !x.d.gone {
		c.returnCredit(x.d, x.withheld)
	}
	x.withheld = 0
	start := refusal == nil && (x.bodyDone || x.in != nil)
	c.mu.Unlock()
	switch {
	case refusal != nil:
		x.xc.cancel(context.Canceled)
		c.respond(x.d, *refusal, nil)
	case start:
		x.run()
	}
}

// run calls the Handler and sends its answer to the client: the one it
// returns, or, once it forwarded with ForwardThen, the one its Answerer
// makes.
func (x *exchange) run() {
	if _, ok := x.admitted.(Abandoner); ok {
		x.c.mu.Lock()
		x.handled = true
		x.c.mu.Unlock()
	}
	x.req = Request{Header: x.header, Body: x.buf, Truncated: x.truncated, TLS: x.c.tls, Admitted: x.admitted, x: x}
	resp := x.rt.Handler.Handle(x.ctx, &x.req)
	if x.later {
		x.held.arrive(nil) // sent once the answer came, by whoever saw it come
		return
	}
	x.c.mu.Lock()
	s := x.out
	x.c.mu.Unlock()
	if s != nil && s.end() {
		x.c.finishStreamed(x.d, resp)
		x.xc.cancel(context.Canceled)
		return
	}
	x.reply(resp, nil)
}

// reply sends the Handler's whole answer and ends the exchange's context.
// b as for sendData.
func (x *exchange) reply(resp Response, b *batch) {
	x.c.respond(x.d, resp, b)
	x.xc.cancel(context.Canceled)
}

// respond sends a whole answer on l, the client side of an exchange; a
// client still sending its body is then told to stop (RST_STREAM NO_ERROR,
// RFC 9113 §8.1). b as for sendData; nil writes it now.
func (c *conn) respond(l *leg, resp Response, b *batch) {
	if len(resp.Header) == 0 {
		c.resetLeg(l, http2.ErrCodeInternal)
		return
	}
	var own batch
	if b == nil {
		b = &own
		defer own.flush()
	}
	bodyEnd := resp.Trailer == nil
	headersEnd := len(resp.Body) == 0 && bodyEnd
	c.sendHeaders(l, resp.Header, headersEnd, b)
	if !headersEnd {
		if len(resp.Body) > 0 || bodyEnd {
			c.sendData(l, resp.Body, bodyEnd, b)
		}
		if resp.Trailer != nil {
			c.sendHeaders(l, resp.Trailer, true, b)
		}
	}
	c.stopClient(l)
}

// workerIdle is how long a Handler's goroutine waits for the next exchange
// before it ends.
const workerIdle = 10 * time.Second

// job is an exchange handed to a worker: its admission (admit) or its
// Handler (run). A value rather than a method value, which would cost an
// allocation for every exchange.
type job struct {
	x     *exchange
	admit bool
}

func (j job) do() {
	if j.admit {
		j.x.admit()
	} else {
		j.x.run()
	}
}

// spawn runs j on an idle worker goroutine, or on a new one. A worker's
// stack has grown to what a Handler needs, so reusing it saves growing a
// fresh goroutine's stack for every exchange (a tenth of the CPU of a
// decided Send); workers idle for workerIdle end, so there are never more
// than the exchanges in progress at once, and none after shutdown.
func (r *Relay) spawn(j job) {
	r.handlerWakes.Add(1)
	select {
	case r.work <- j:
		return
	default:
	}
	r.wg.Go(func() {
		idle := time.NewTimer(workerIdle)
		defer idle.Stop()
		for {
			j.do()
			j = job{} // the exchange is not held while idle
			idle.Reset(workerIdle)
			select {
			case j = <-r.work:
			case <-idle.C:
				return
			case <-r.closing:
				return
			}
		}
	})
}
