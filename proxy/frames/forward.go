package frames

// A Handler's request forwarded upstream (Forward, ForwardThen) and its
// answer held on the upstream reader until it is whole (held).

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Forward sends the request's original body, under header, on a new stream
// of upstream pool pool, and returns the upstream's whole answer once it
// ended its stream; nothing of it has reached the client. An error means
// there is no answer: the stream could not be opened (ErrNotSent), was
// reset, its connection failed, the answer outgrew MaxBody, or ctx ended
// (ErrNotSent before the stream opened; the upstream stream is reset after).
// header is encoded before Forward sends anything and not kept: the caller
// may reuse it once Forward returns.
func (r *Request) Forward(ctx context.Context, pool int, header []hpack.HeaderField) (Response, error) {
	h, err := r.send(ctx, pool, header, nil)
	if err != nil {
		return Response{}, err
	}
	select {
	case <-h.done: // answered already: this worker did not wait
		return h.resp, h.err
	default:
	}
	r.x.c.r.handlerWakes.Add(1) // this worker waits: the upstream reader wakes it
	select {
	case <-h.done:
		return h.resp, h.err
	case <-ctx.Done():
		u := r.x.d.peer
		u.c.resetLeg(u, http2.ErrCodeCancel)
		return Response{}, ctx.Err()
	}
}

// Answerer takes the upstream's answer to a request forwarded with
// ForwardThen: resp and err are what Forward would have returned. It
// returns the client's answer, sent at once, or false when it answers later
// itself (Request.Respond), from a goroutine of its own.
type Answerer interface {
	Answer(resp Response, err error) (answer Response, now bool)
}

// ForwardThen is Forward without the wait: it sends the request as Forward
// does and returns; the Handler then returns at once (what it returns is
// ignored), and a.Answer is called, once, with what Forward would have
// returned, on the goroutine that ended the wait: the upstream connection's
// reader when the answer is whole or its stream failed, else one of its
// own, and in any case once the Handler returned. Answer must not block
// there: the reader's other streams wait for it. So a decided call costs
// no hand-off between goroutines for its answer (the Handler's goroutine
// waiting and the reader waking it, a round trip of the scheduler); the
// answer goes out with whatever else the reader relays before it waits.
// The wait ends, the upstream stream reset, when the client's stream goes
// (Answer gets context.Canceled) or at ctx's deadline
// (context.DeadlineExceeded); ctx's cancellation is not otherwise watched
// (the Handler's context ends only so). The stream's context ends once the
// answer is sent. An error is Forward's when nothing was sent (ErrNotSent,
// ErrTruncated, ErrForwarded): a is not called and the Handler answers.
func (r *Request) ForwardThen(ctx context.Context, pool int, header []hpack.HeaderField, a Answerer) error {
	h, err := r.send(ctx, pool, header, a)
	if err != nil {
		return err
	}
	x := r.x
	x.later = true
	x.c.mu.Lock()
	gone, expired := x.ended, false
	if x.awaiting = !gone; x.awaiting {
		if dl, ok := ctx.Deadline(); ok {
			if dl.Equal(x.xc.deadline) {
				// the exchange's own deadline: its timer ends the wait
				// (expire), unless it already ran
				x.ctxDeadline = true
				expired = x.xc.why() == context.DeadlineExceeded // Err may lag: inner's timer
				x.awaiting = !expired
			} else {
				h.timer = time.AfterFunc(time.Until(dl), func() { x.abortForward(context.DeadlineExceeded) })
			}
		}
	}
	x.c.mu.Unlock()
	switch {
	case gone: // the stream went before the wait began: end told no one
		x.abortForward(context.Canceled)
	case expired: // the deadline passed before the wait began: expire told no one
		x.abortForward(context.DeadlineExceeded)
	}
	return nil
}

// abortForward ends ForwardThen's wait with err: its upstream stream is
// reset and the answer is err (unless it came first).
func (x *exchange) abortForward(err error) {
	u := x.d.peer
	u.c.resetLeg(u, http2.ErrCodeCancel)
	x.held.fail(err)
}

// Respond sends the answer of a request forwarded with ForwardThen whose
// Answerer did not answer at once; it ends the stream's context.
func (r *Request) Respond(resp Response) { r.x.reply(resp, nil) }

// send opens the upstream stream of a forward and sends the request on it;
// a is ForwardThen's (nil: Forward waits for the answer on h.done).
func (r *Request) send(ctx context.Context, pool int, header []hpack.HeaderField, a Answerer) (*held, error) {
	x := r.x
	switch {
	case r.Truncated:
		return nil, ErrTruncated
	case x.forwarded:
		return nil, ErrForwarded
	case pool < 0 || pool >= len(x.c.r.pools):
		return nil, fmt.Errorf("%w: %d", errNoSuchPool, pool)
	case ctx.Err() != nil: // the client left or the deadline passed: nothing opens upstream
		return nil, fmt.Errorf("%w: %w", ErrNotSent, ctx.Err())
	}
	x.forwarded = true
	u := x.d.peer
	h := &x.held
	h.x, h.max, h.then = x, x.max, a
	if a == nil {
		h.done = make(chan struct{})
	} else {
		h.waits.Store(2) // the answer, and the Handler's return (arrive)
	}
	u.hold = h
	end := len(r.Body) == 0
	var b batch
	if err := x.c.r.pools[pool].open(u, header, end, &b); err != nil {
		return nil, fmt.Errorf("%w: open upstream stream: %w", ErrNotSent, err)
	}
	if !end {
		u.c.sendData(u, r.Body, true, &b)
	}
	b.flush()
	return h, nil
}

// held collects, on the upstream reader, the answer to a forwarded
// request; done closes when it is whole or will not come (Forward), or then
// takes it (ForwardThen).
type held struct {
	ended atomic.Bool // finish ran
	done  chan struct{}
	max   int
	x     *exchange

	resp      Response
	gotHeader bool
	err       error

	// ForwardThen's: the Answerer, its deadline's timer (under the client
	// connection's mu), and what the answer waits for: its end (finish) and
	// the Handler's return (arrive); the last of the two sends it (land).
	then  Answerer
	timer *time.Timer
	waits atomic.Int32
}

// headers takes a header block of the answer: the first is its header
// list, a later one its trailers. b as for sendData.
func (h *held) headers(fields []hpack.HeaderField, end bool, b *batch) {
	if !h.gotHeader {
		h.resp.Header, h.gotHeader = fields, true
	} else {
		h.resp.Trailer = fields
	}
	if end {
		h.finish(nil, b)
	}
}

// data takes DATA of the answer; an answer outgrowing the bound resets the
// upstream stream. b as for sendData.
func (h *held) data(c *conn, l *leg, data []byte, end bool, b *batch) {
	if len(h.resp.Body)+len(data) > h.max {
		c.resetLeg(l, http2.ErrCodeCancel)
		h.finish(ErrAnswerTooLarge, b)
		return
	}
	h.resp.Body = append(h.resp.Body, data...)
	if end {
		h.finish(nil, b)
	}
}

// fail reports that the answer will not come.
func (h *held) fail(err error) { h.finish(err, nil) }

// finish ends the wait for the answer, once: with err, or the answer when
// err is nil. b as for sendData.
func (h *held) finish(err error, b *batch) {
	if !h.ended.CompareAndSwap(false, true) {
		return
	}
	if err == nil && !h.gotHeader {
		err = errIncompleteReply
	}
	h.err = err
	if h.then == nil {
		close(h.done)
		return
	}
	h.arrive(b)
}

// arrive counts one of what a ForwardThen answer waits for and, the last,
// sends it (land). b as for sendData.
func (h *held) arrive(b *batch) {
	if h.waits.Add(-1) == 0 {
		h.land(b)
	}
}

// land hands the upstream's answer (or the error) to the Answerer and sends
// the client what it answers. b as for sendData.
func (h *held) land(b *batch) {
	x := h.x
	x.c.mu.Lock()
	x.awaiting = false
	t := h.timer
	h.timer = nil
	x.c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	var resp Response
	if h.err == nil { // else the reader may still be filling it: the stream was reset under it
		resp = h.resp
	}
	if answer, now := h.then.Answer(resp, h.err); now {
		h.x.reply(answer, b)
	}
}
