package listener

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/agentwarden/warden/authn"
)

// ConnBounds is how a listener holds its connections (Bound). A zero field
// takes the one above it: PerSource and Unproven default to Max,
// UnprovenPerSource to Unproven; a zero ProofTimeout closes nothing for
// want of a credential.
type ConnBounds struct {
	// Max is the connections open at once (<= 0: no cap).
	Max int
	// PerSource is the connections one source address holds (an IPv6
	// address counts by its /64).
	PerSource int
	// Unproven is the connections open at once on which no request has yet
	// presented a valid credential, all sources together; UnprovenPerSource
	// those of one source.
	Unproven, UnprovenPerSource int
	// ProofTimeout closes a connection on which no request presented a
	// valid credential within this long of its accept.
	ProofTimeout time.Duration
}

func (b ConnBounds) withDefaults() ConnBounds {
	if b.Max <= 0 {
		b.Max = math.MaxInt
	}
	if b.PerSource <= 0 || b.PerSource > b.Max {
		b.PerSource = b.Max
	}
	if b.Unproven <= 0 || b.Unproven > b.Max {
		b.Unproven = b.Max
	}
	if b.UnprovenPerSource <= 0 || b.UnprovenPerSource > b.Unproven {
		b.UnprovenPerSource = b.Unproven
	}
	return b
}

// Cap is Bound with a connection cap of n alone (<= 0: none): ext_authz and
// the push relay, whose clients (Envoy, Warden itself) present no
// credential of their own on the connection.
func Cap(lis net.Listener, n int, log *slog.Logger) *Capped {
	return Bound(lis, ConnBounds{Max: n}, log)
}

// Bound returns lis holding its connections within b. A connection is
// unproven from its accept until a request on it presents a valid
// credential (the door's authentication calls authn.Proven on the request's
// context, which ConnContext or Context made); then it is proven.
//
// A connection beyond a cap is accepted and closed at once (a TCP reset),
// not left waiting: a client holding the listener full learns so
// immediately and its excess costs no file descriptor; a blocking Accept
// would instead queue every newcomer, legitimate or not, behind the flood
// in the kernel's backlog. The rules, in order:
//   - a newcomer whose source address holds PerSource connections is
//     refused;
//   - so is one whose source holds UnprovenPerSource unproven connections;
//   - when the listener holds Max connections, or Unproven unproven ones,
//     the newcomer takes the place of the oldest unproven connection of the
//     source holding the most unproven ones, when that source holds more
//     than the newcomer's would after taking one; otherwise it is refused.
//
// A proven connection is never closed for a newcomer: every newcomer is
// unproven, and an unauthenticated client can take no more than the
// unproven share, while an authenticated one keeps what it holds. Within
// the unproven share, one address holding it full, reopening as Warden
// closes them, does not keep others out: each other address gets in at the
// flood's expense. An unproven connection is closed ProofTimeout after its
// accept. The closures are logged at most every 10 seconds.
func Bound(lis net.Listener, b ConnBounds, log *slog.Logger) *Capped {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Capped{Listener: lis, b: b.withDefaults(), log: log, bySrc: map[string]*source{}, byAddr: map[string]*countedConn{}}
}

const shedLogEvery = 10 * time.Second

// Capped is a listener bounded by Bound.
type Capped struct {
	net.Listener
	b   ConnBounds
	log *slog.Logger

	mu       sync.Mutex
	open     int
	unproven int
	bySrc    map[string]*source      // source key -> its connections
	byAddr   map[string]*countedConn // remote address -> its connection
	shed     [closeReasons]int       // closed since the last log line, by reason
	lastLog  time.Time
}

// source is one source address's connections.
type source struct {
	open     int
	unproven list.List // its unproven connections, oldest first
}

// closeReason is why Capped closed a connection.
type closeReason int

const (
	refusedFull     closeReason = iota // at the cap, no larger holder
	refusedSource                      // the source's own cap
	evicted                            // closed for a newcomer of a smaller holder
	unprovenTimeout                    // no credential within ProofTimeout
	closeReasons
)

// SourceKey is the key a remote address counts against: its IP, an IPv6
// address's /64 (the block one host or subscriber usually holds whole).
func SourceKey(a net.Addr) string {
	var ip net.IP
	switch ta := a.(type) {
	case *net.TCPAddr:
		ip = ta.IP
	case nil:
		return ""
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		if ip = net.ParseIP(host); ip == nil {
			return host
		}
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// Accept returns the next connection the bounds admit, and closes the
// others.
func (c *Capped) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc, victim, why := c.admit(conn)
		if victim != nil {
			reset(victim.Conn)
			c.note(evicted)
		}
		if cc == nil {
			reset(conn)
			c.note(why)
			continue
		}
		return cc, nil
	}
}

// admit counts conn, or says why it is refused; victim is the unproven
// connection it takes the place of.
func (c *Capped) admit(conn net.Conn) (cc *countedConn, victim *countedConn, why closeReason) {
	key := SourceKey(conn.RemoteAddr())
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.bySrc[key]
	mine := 0
	if s != nil {
		if s.open >= c.b.PerSource {
			return nil, nil, refusedSource
		}
		mine = s.unproven.Len()
	}
	if mine >= c.b.UnprovenPerSource {
		return nil, nil, refusedSource
	}
	if c.open >= c.b.Max || c.unproven >= c.b.Unproven {
		if victim = c.largerHolder(mine); victim == nil {
			return nil, nil, refusedFull
		}
		c.remove(victim)
	}
	if s = c.bySrc[key]; s == nil { // remove may have dropped it
		s = &source{}
		c.bySrc[key] = s
	}
	cc = &countedConn{Conn: conn, key: key, addr: conn.RemoteAddr().String(), owner: c, counted: true}
	cc.proof = cc.prove
	cc.elem = s.unproven.PushBack(cc)
	s.open++
	c.open++
	c.unproven++
	c.byAddr[cc.addr] = cc
	if c.b.ProofTimeout > 0 {
		cc.timer = time.AfterFunc(c.b.ProofTimeout, cc.expire)
	}
	return cc, victim, 0
}

// largerHolder is the oldest unproven connection of the source holding the
// most, when it holds more than mine+1; nil otherwise. Called with c.mu
// held.
func (c *Capped) largerHolder(mine int) *countedConn {
	var most *source
	for _, s := range c.bySrc {
		if most == nil || s.unproven.Len() > most.unproven.Len() {
			most = s
		}
	}
	if most == nil || most.unproven.Len() <= mine+1 {
		return nil
	}
	return most.unproven.Front().Value.(*countedConn)
}

// remove uncounts cc; called with c.mu held, at most once per connection.
func (c *Capped) remove(cc *countedConn) {
	if !cc.counted {
		return
	}
	cc.counted = false
	if cc.timer != nil {
		cc.timer.Stop()
	}
	s := c.bySrc[cc.key]
	if cc.elem != nil {
		s.unproven.Remove(cc.elem)
		cc.elem = nil
		c.unproven--
	}
	if s.open--; s.open == 0 {
		delete(c.bySrc, cc.key)
	}
	if c.byAddr[cc.addr] == cc {
		delete(c.byAddr, cc.addr)
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

func (c *Capped) note(why closeReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shed[why]++
	if now := time.Now(); now.Sub(c.lastLog) >= shedLogEvery {
		c.log.Warn("listener full: closing connections", "listen", c.Addr().String(),
			"max_connections", c.b.Max, "refused", c.shed[refusedFull], "refused_for_source", c.shed[refusedSource],
			"closed_for_other_addresses", c.shed[evicted], "closed_without_credential", c.shed[unprovenTimeout])
		c.shed, c.lastLog = [closeReasons]int{}, now
	}
}

// Open is how many accepted connections are open, and how many of them are
// unproven.
func (c *Capped) Open() (open, unproven int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.unproven
}

// ConnContext is ctx carrying nc's proof (authn.Proven), for http.Server's
// ConnContext.
func (c *Capped) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	return c.Context(ctx, nc.RemoteAddr().String())
}

// Context is ctx carrying the proof (authn.WithProof) of the open
// connection whose remote address is remote (net.Addr.String()), for a
// request served on it; ctx itself when there is none, or when the
// connection is proven already (or no longer counted), where the proof
// would change nothing: a request on a proven connection, every request
// but its first that succeeds, costs no context. c may be nil.
func (c *Capped) Context(ctx context.Context, remote string) context.Context {
	if c == nil {
		return ctx
	}
	c.mu.Lock()
	cc := c.byAddr[remote]
	pending := cc != nil && cc.counted && cc.elem != nil
	c.mu.Unlock()
	if !pending {
		return ctx
	}
	return authn.WithProof(ctx, cc.proof)
}

// prove records that a request on cc presented a valid credential: the
// connection is no longer closed for want of one nor for a newcomer.
func (cc *countedConn) prove() {
	c := cc.owner
	c.mu.Lock()
	defer c.mu.Unlock()
	if !cc.counted || cc.elem == nil {
		return
	}
	c.bySrc[cc.key].unproven.Remove(cc.elem)
	cc.elem = nil
	c.unproven--
	if cc.timer != nil {
		cc.timer.Stop()
	}
}

type countedConn struct {
	net.Conn
	key, addr string
	owner     *Capped
	timer     *time.Timer
	proof     func() // prove, made once: a request's Context costs no closure of its own
	// guarded by owner.mu
	counted bool
	elem    *list.Element // in its source's unproven list; nil once proven
}

// expire closes cc when it is still unproven.
func (cc *countedConn) expire() {
	c := cc.owner
	c.mu.Lock()
	if !cc.counted || cc.elem == nil {
		c.mu.Unlock()
		return
	}
	c.remove(cc)
	c.mu.Unlock()
	reset(cc.Conn)
	c.note(unprovenTimeout)
}

// CloseWrite half-closes the connection when the one it wraps can (a TCP
// or TLS connection), so that a server closing gracefully (the frame relay
// after a bad preface or a GOAWAY) drains what the client sent instead of
// resetting the connection under it.
func (cc *countedConn) CloseWrite() error {
	if cw, ok := cc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

var errNoHalfClose = errors.New("listener: the connection cannot be half-closed")

// SyscallConn is the underlying connection's raw connection, for a server
// that reads and writes the socket itself (proxy/frames); it counts nothing
// (neither does Read or Write).
func (cc *countedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := cc.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoRawConn
}

var errNoRawConn = errors.New("listener: the connection has no file descriptor")

func (cc *countedConn) Close() error {
	err := cc.Conn.Close()
	cc.owner.mu.Lock()
	cc.owner.remove(cc)
	cc.owner.mu.Unlock()
	return err
}
