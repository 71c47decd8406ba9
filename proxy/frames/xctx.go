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
// no allocation of its own: its Done channel is made only when asked for,
// a context derived from it is told it ended through AfterFunc (no
// goroutine per child), and its deadline has one timer, which also ends a
// ForwardThen wait on that same deadline (so the forward arms none).
type exchangeCtx struct {
	peerCtx
	deadline time.Time // zero: none

	mu     sync.Mutex
	done   chan struct{} // made when asked for, closed once err is set
	err    error
	timer  *time.Timer // the deadline's (expire)
	afters []*afterFunc
}

// afterFunc is a function AfterFunc runs once the context ended.
type afterFunc struct{ f func() }

func (c *exchangeCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

func (c *exchangeCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *exchangeCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc runs f on a goroutine of its own once the context ended, as
// context.AfterFunc does; stop keeps it from running. The context package
// links a child context through it (no goroutine watching Done).
func (c *exchangeCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f}
	c.mu.Lock()
	ended := c.err != nil
	if !ended {
		c.afters = append(c.afters, a)
	}
	c.mu.Unlock()
	if ended {
		go f()
		return func() bool { return false }
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, b := range c.afters {
			if b == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends the context with err (context.Canceled, or
// context.DeadlineExceeded from its timer); a second call does nothing.
func (c *exchangeCtx) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	afters, t := c.afters, c.timer
	c.afters, c.timer = nil, nil
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	for _, a := range afters {
		go a.f()
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
