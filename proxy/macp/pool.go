package macp

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The runtime takes at most 128 concurrent streams on one HTTP/2
// connection; grpc-go makes a call beyond that wait for a free one. Held
// subscriptions (StreamSession) would fill one connection and stall every
// other call, so calls are spread over a few connections.
const (
	// streamsPerConn is how many calls go to one connection before the next
	// is used: below the runtime's 128.
	streamsPerConn = 100
	// maxUpstreamConns bounds the connections to the runtime: 800 calls in
	// flight at once; one more is refused (RESOURCE_EXHAUSTED), never queued.
	maxUpstreamConns = 8
	// upstreamCalls is how many calls the pool holds in flight at once.
	upstreamCalls = streamsPerConn * maxUpstreamConns
)

// errUpstreamFull refuses a call when every connection to the runtime is as
// busy as it may be: waiting would hold the caller for a slot that long-lived
// streams may never give back.
var errUpstreamFull = status.Error(codes.ResourceExhausted, "every stream to the MACP runtime is in use; retry later")

// connPool is the connections to the runtime, used as one
// grpc.ClientConnInterface: a call goes to the first connection with fewer
// than perConn calls in flight; the next connection is made (lazily, as
// grpc.NewClient does) when all are that busy, up to max; beyond that, the
// call is refused with errUpstreamFull.
type connPool struct {
	dial    func() (*grpc.ClientConn, error)
	perConn int
	max     int

	mu    sync.Mutex
	conns []*pooledConn
}

type pooledConn struct {
	cc     *grpc.ClientConn
	active int
}

// newConnPool returns a pool holding one connection made by dial.
func newConnPool(dial func() (*grpc.ClientConn, error), perConn, max int) (*connPool, error) {
	cc, err := dial()
	if err != nil {
		return nil, err
	}
	return &connPool{dial: dial, perConn: perConn, max: max, conns: []*pooledConn{{cc: cc}}}, nil
}

// first is the pool's first connection (readiness is judged on it).
func (p *connPool) first() *grpc.ClientConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[0].cc
}

// pick takes a slot on a connection; release gives it back.
func (p *connPool) pick() (*pooledConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c.active < p.perConn {
			c.active++
			return c, nil
		}
	}
	if len(p.conns) < p.max {
		cc, err := p.dial()
		if err != nil {
			return nil, err
		}
		c := &pooledConn{cc: cc, active: 1}
		p.conns = append(p.conns, c)
		return c, nil
	}
	return nil, errUpstreamFull
}

func (p *connPool) release(c *pooledConn) {
	p.mu.Lock()
	c.active--
	p.mu.Unlock()
}

// Invoke makes a unary call on a connection with room.
func (p *connPool) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	ctx = outgoing(ctx)
	c, err := p.pick()
	if err != nil {
		return err
	}
	defer p.release(c)
	return c.cc.Invoke(ctx, method, args, reply, opts...)
}

// NewStream opens a stream on a connection with room; its slot is given
// back when the stream ends (RecvMsg fails) or ctx ends, whichever is
// first.
func (p *connPool) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx = outgoing(ctx)
	c, err := p.pick()
	if err != nil {
		return nil, err
	}
	cs, err := c.cc.NewStream(ctx, desc, method, opts...)
	if err != nil {
		p.release(c)
		return nil, err
	}
	done := sync.OnceFunc(func() { p.release(c) })
	context.AfterFunc(ctx, done)
	return &pooledStream{ClientStream: cs, done: done}, nil
}

// Close closes every connection.
func (p *connPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, c := range p.conns {
		errs = append(errs, c.cc.Close())
	}
	return errors.Join(errs...)
}

// pooledStream gives its slot back when it ends.
type pooledStream struct {
	grpc.ClientStream
	done func()
}

func (s *pooledStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.done()
	}
	return err
}
