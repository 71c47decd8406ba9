package frames

import (
	"context"
	"net"
	"sync"
	"time"
)

// exchangeCtx is an exchange's context, the one its Handler gets: it
// carries the client's address (Peer) and ends when the exchange does
// (cancel) or at the Route's deadline. It lives in the exchange and costs
// no allocation of its own while nothing waits on it: the first Done makes
// the context.WithCancel (or WithDeadline) it stood for (inner), whose
// channel it gives and whose Value a derived context finds its parent by,
// so that a context derived from it, through any wrapper, is canceled with
// it without a goroutine of its own. Its deadline has one timer of its own
// (expire), which also ends a ForwardThen wait on that deadline (so the
// forward arms none); a unary call that forwards (a Send) never asks for
// Done.
type exchangeCtx struct {
	peerCtx
	deadline time.Time // zero: none

	mu          sync.Mutex
	err         error
	timer       *time.Timer        // the deadline's (expire)
	inner       context.Context    // made by the first Done
	innerCancel context.CancelFunc // inner's
}

func (c *exchangeCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

func (c *exchangeCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		if c.deadline.IsZero() {
			c.inner, c.innerCancel = context.WithCancel(&c.peerCtx)
		} else {
			c.inner, c.innerCancel = context.WithDeadline(&c.peerCtx, c.deadline)
		}
		if c.err == context.Canceled { // a deadline passed is inner's own already
			c.innerCancel()
		}
	}
	return c.inner.Done()
}

// Err is inner's once Done made it (its channel is the one closed), else
// why the exchange ended.
func (c *exchangeCtx) Err() error {
	c.mu.Lock()
	inner, err := c.inner, c.err
	c.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	return err
}

// why is why the exchange ended (nil while it runs), set before its
// channel closes: expire's cancel sets DeadlineExceeded here at once,
// where inner's own deadline timer (which Err then reads) may run a little
// after.
func (c *exchangeCtx) why() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value is the client's address for Peer's key, else inner's value once
// Done made it (a context derived from this one finds inner so), else the
// parent's.
func (c *exchangeCtx) Value(key any) any {
	if key == (peerKey{}) {
		return c.addr
	}
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		return inner.Value(key)
	}
	return c.Context.Value(key)
}

// cancel ends the context with err (context.Canceled, or
// context.DeadlineExceeded from its timer, when inner's own deadline ends
// inner); a second call does nothing.
func (c *exchangeCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	t, cancel := c.timer, c.innerCancel
	c.timer = nil
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if cancel != nil && err != context.DeadlineExceeded {
		cancel()
	}
}

// startCtx makes x's context: addr is the client's address; it ends
// timeout from now when timeout is above zero.
func (x *exchange) startCtx(addr net.Addr, timeout time.Duration) {
	x.xc.peerCtx = peerCtx{context.Background(), addr}
	x.ctx = &x.xc
	if timeout > 0 {
		x.xc.deadline = time.Now().Add(timeout)
		x.xc.mu.Lock()
		x.xc.timer = time.AfterFunc(timeout, x.expire)
		x.xc.mu.Unlock()
	}
}

// expire ends x's context at its deadline, and with it a ForwardThen wait
// on that deadline.
func (x *exchange) expire() {
	x.xc.cancel(context.DeadlineExceeded)
	x.c.mu.Lock()
	abort := x.awaiting && x.ctxDeadline
	if abort {
		x.awaiting = false
	}
	x.c.mu.Unlock()
	if abort {
		x.abortForward(context.DeadlineExceeded)
	}
}
