package listener

import (
	"container/list"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Cap returns lis holding at most n connections open at once (n <= 0: no
// cap). A connection beyond the cap is accepted and closed at once (a TCP
// reset), not left waiting: a client holding the listener full learns so
// immediately and its excess costs no file descriptor, while the timeouts
// evict the connections that stall; a blocking Accept would instead queue
// every newcomer, legitimate or not, behind the flood in the kernel's
// backlog.
//
// The cap is shared fairly between source addresses: when the listener is
// full, a newcomer whose address holds fewer connections than the address
// holding the most closes that address's oldest connection and takes its
// place; only a newcomer of the largest holder is refused. One address
// holding the listener full, reopening as Warden closes them, cannot starve
// the others (nor authenticated clients behind them): each new address gets
// in, at the flood's expense. The closures are logged at most every 10
// seconds.
func Cap(lis net.Listener, n int, log *slog.Logger) net.Listener {
	if n <= 0 {
		return lis
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &capped{Listener: lis, max: n, log: log, bySrc: map[string]*list.List{}}
}

const shedLogEvery = 10 * time.Second

type capped struct {
	net.Listener
	max int
	log *slog.Logger

	mu      sync.Mutex
	open    int
	bySrc   map[string]*list.List // source address -> its open connections, oldest first
	shed    int                   // closed since the last log line
	evicted int                   // closed for a newcomer since the last log line
	lastLog time.Time
}

// source is the address a connection counts against: its IP.
func source(c net.Conn) string {
	a := c.RemoteAddr()
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Accept returns the next connection while fewer than the cap are open or
// a larger holder can give one up, and closes the others.
func (c *capped) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := source(conn)
		c.mu.Lock()
		var victim *countedConn
		if c.open >= c.max {
			victim = c.largerHolder(src)
			if victim == nil {
				c.mu.Unlock()
				reset(conn)
				c.note(false)
				continue
			}
			c.remove(victim)
		}
		cc := &countedConn{Conn: conn, src: src, owner: c}
		l := c.bySrc[src]
		if l == nil {
			l = list.New()
			c.bySrc[src] = l
		}
		cc.elem = l.PushBack(cc)
		c.open++
		c.mu.Unlock()
		if victim != nil {
			reset(victim.Conn)
			c.note(true)
		}
		return cc, nil
	}
}

// largerHolder is the oldest connection of the address holding the most,
// when it holds more than src would after taking one; nil otherwise. Called
// with c.mu held.
func (c *capped) largerHolder(src string) *countedConn {
	mine := 0
	if l := c.bySrc[src]; l != nil {
		mine = l.Len()
	}
	var most *list.List
	for _, l := range c.bySrc {
		if most == nil || l.Len() > most.Len() {
			most = l
		}
	}
	if most == nil || most.Len() <= mine+1 {
		return nil
	}
	return most.Front().Value.(*countedConn)
}

// remove uncounts cc; called with c.mu held, at most once per connection.
func (c *capped) remove(cc *countedConn) {
	if cc.elem == nil {
		return
	}
	l := c.bySrc[cc.src]
	l.Remove(cc.elem)
	cc.elem = nil
	if l.Len() == 0 {
		delete(c.bySrc, cc.src)
	}
	c.open--
}

// reset closes conn with a reset: no TIME_WAIT left behind.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (c *capped) note(evicted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if evicted {
		c.evicted++
	} else {
		c.shed++
	}
	if now := time.Now(); now.Sub(c.lastLog) >= shedLogEvery {
		c.log.Warn("listener full: closing connections", "listen", c.Addr().String(),
			"max_connections", c.max, "refused", c.shed, "closed_for_other_addresses", c.evicted)
		c.shed, c.evicted, c.lastLog = 0, 0, now
	}
}

// Open is how many accepted connections are open.
func (c *capped) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

type countedConn struct {
	net.Conn
	src   string
	owner *capped
	elem  *list.Element // nil once uncounted; guarded by owner.mu
}

// CloseWrite half-closes the connection when the one it wraps can (a TCP
// or TLS connection), so that a server closing gracefully (the frame relay
// after a bad preface or a GOAWAY) drains what the client sent instead of
// resetting the connection under it.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

var errNoHalfClose = errors.New("listener: the connection cannot be half-closed")

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.owner.mu.Lock()
	c.owner.remove(c)
	c.owner.mu.Unlock()
	return err
}
