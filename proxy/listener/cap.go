package listener

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Cap returns lis holding at most n connections open at once (n <= 0: no
// cap). A connection beyond the cap is accepted and closed at once (a TCP
// reset), not left waiting: a client holding the listener full learns so
// immediately and its excess costs no file descriptor, while the timeouts
// evict the connections that stall; a blocking Accept would instead queue
// every newcomer, legitimate or not, behind the flood in the kernel's
// backlog. The closures are logged at most every 10 seconds.
func Cap(lis net.Listener, n int, log *slog.Logger) net.Listener {
	if n <= 0 {
		return lis
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &capped{Listener: lis, max: int64(n), log: log}
}

const shedLogEvery = 10 * time.Second

type capped struct {
	net.Listener
	max  int64
	open atomic.Int64
	log  *slog.Logger

	mu      sync.Mutex
	shed    int // closed since the last log line
	lastLog time.Time
}

// Accept returns the next connection while fewer than the cap are open, and
// closes those that arrive while the listener is full.
func (c *capped) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c.open.Add(1) <= c.max {
			return &countedConn{Conn: conn, release: func() { c.open.Add(-1) }}, nil
		}
		c.open.Add(-1)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // reset: no TIME_WAIT left behind
		}
		_ = conn.Close()
		c.noteShed()
	}
}

func (c *capped) noteShed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shed++
	if now := time.Now(); now.Sub(c.lastLog) >= shedLogEvery {
		c.log.Warn("listener full: closing new connections", "listen", c.Addr().String(),
			"max_connections", c.max, "closed", c.shed)
		c.shed, c.lastLog = 0, now
	}
}

// Open is how many accepted connections are open.
func (c *capped) Open() int { return int(c.open.Load()) }

type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
