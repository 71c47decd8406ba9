package listener

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
)

// TestCapHalfClose: a connection accepted through Cap half-closes as the
// TCP connection it wraps does, so a server closing gracefully (the frame
// relay after a bad preface) is not turned into a TCP reset (h2spec 3.5/2
// failed against the relay front door when Cap hid CloseWrite).
func TestCapHalfClose(t *testing.T) {
	client, server := capPair(t)
	cw, ok := server.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("a capped connection has no CloseWrite")
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after the server's half-close: %d, %v; want EOF", n, err)
	}
	if _, err := client.Write([]byte("still open")); err != nil {
		t.Fatalf("client write after the server's half-close: %v", err)
	}
	buf := make([]byte, 10)
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "still open" {
		t.Fatalf("server read %q, %v; want the client's bytes", buf, err)
	}
}

// capPair is a loopback client connection and the server's end of it,
// accepted through Cap; both close when the test ends.
func capPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := Cap(raw, 4, nil)
	t.Cleanup(func() { lis.Close() })
	client, err = net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// boundHarness accepts through a Bound listener and dials from chosen
// loopback addresses.
type boundHarness struct {
	t        *testing.T
	lis      *Capped
	accepted chan net.Conn
}

func newBoundHarness(t *testing.T, b ConnBounds) *boundHarness {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &boundHarness{t: t, lis: Bound(raw, b, nil), accepted: make(chan net.Conn, 16)}
	t.Cleanup(func() { h.lis.Close() })
	go func() {
		for {
			c, err := h.lis.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			h.accepted <- c
		}
	}()
	return h
}

// dial connects from ip and reports the server's end, nil when the
// connection was refused (reset without Accept returning it). It waits for
// the one or the other, up to 10 s: a fixed wait for Accept (300 ms) read
// an admission the loaded machine was slow to make as a refusal.
func (h *boundHarness) dial(ip string) (client, server net.Conn) {
	h.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", h.lis.Addr().String())
	if err != nil {
		return nil, nil
	}
	h.t.Cleanup(func() { c.Close() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case s := <-h.accepted:
			return c, s
		case <-time.After(10 * time.Millisecond):
		}
		if !openFor(c, 10*time.Millisecond) {
			select { // accepted, then closed already (ProofTimeout)
			case s := <-h.accepted:
				return c, s
			default:
				return c, nil
			}
		}
	}
	h.t.Fatalf("a connection from %s neither accepted nor refused in 10 s", ip)
	return nil, nil
}

// closedByServer reports whether the server closed the client's
// connection, waiting up to 10 s for it.
func closedByServer(c net.Conn) bool { return !openFor(c, 10*time.Second) }

// openFor reports whether the client's connection stays open (the server
// sends nothing on it) for d: a check that nothing happens, which a
// loaded machine can make miss an event but not see one that did not
// happen.
func openFor(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && errors.As(err, &ne) && ne.Timeout()
}

// TestBoundProvenKept (issue 24 item 20): a connection on which a request
// proved a credential is never closed for a newcomer; unauthenticated
// connections have their own share, per source and in total. Before,
// Cap closed the largest holder's oldest connection whoever it was: an
// unauthenticated client's newcomers shed authenticated work.
func TestBoundProvenKept(t *testing.T) {
	h := newBoundHarness(t, ConnBounds{Max: 4, Unproven: 2, UnprovenPerSource: 2})
	var proven []net.Conn
	for range 3 {
		c, s := h.dial("127.0.0.2")
		if s == nil {
			t.Fatal("an authenticated client's connection was refused on an empty listener")
		}
		authn.Proven(h.lis.ConnContext(context.Background(), s))
		proven = append(proven, c)
	}
	for i, step := range []struct {
		ip       string
		admitted bool
	}{
		{"127.0.0.1", true},  // the unauthenticated share: 1 of 2; the listener is full
		{"127.0.0.1", false}, // full: no unauthenticated connection of a larger holder to take
		{"127.0.0.3", false}, // 1 is not more than 0+1: nobody's connection taken
		{"127.0.0.4", false},
	} {
		if _, s := h.dial(step.ip); (s != nil) != step.admitted {
			t.Fatalf("step %d from %s: admitted %v, want %v", i, step.ip, s != nil, step.admitted)
		}
	}
	for i, c := range proven {
		if !openFor(c, 300*time.Millisecond) {
			t.Fatalf("authenticated connection %d was closed for a newcomer", i)
		}
	}
	if open, unproven := h.lis.Open(); open != 4 || unproven != 1 {
		t.Errorf("open %d, unproven %d; want 4, 1", open, unproven)
	}
}

// TestBoundUnprovenShare: within the unauthenticated share, one address
// holding it full gives way to other addresses, and its own newcomers are
// refused at its per-source cap; the authenticated capacity stays free.
func TestBoundUnprovenShare(t *testing.T) {
	h := newBoundHarness(t, ConnBounds{Max: 8, Unproven: 3, UnprovenPerSource: 3})
	var flood []net.Conn
	for range 3 {
		c, s := h.dial("127.0.0.1")
		if s == nil {
			t.Fatal("refused below the share")
		}
		flood = append(flood, c)
	}
	for i, step := range []struct {
		ip       string
		admitted bool
	}{
		{"127.0.0.1", false}, // its own share is full
		{"127.0.0.2", true},  // 3 > 0+1: the flood's oldest gives way
		{"127.0.0.1", false},
	} {
		if _, s := h.dial(step.ip); (s != nil) != step.admitted {
			t.Fatalf("step %d from %s: admitted %v, want %v", i, step.ip, s != nil, step.admitted)
		}
	}
	if !closedByServer(flood[0]) || !openFor(flood[1], 300*time.Millisecond) {
		t.Error("not the flood's oldest connection closed")
	}
	if open, unproven := h.lis.Open(); open != 3 || unproven != 3 {
		t.Errorf("open %d, unproven %d; want 3, 3", open, unproven)
	}
}

// TestBoundPerSource: one source address holds at most PerSource
// connections, proven or not; another address still gets in.
func TestBoundPerSource(t *testing.T) {
	h := newBoundHarness(t, ConnBounds{Max: 8, PerSource: 2})
	for i, step := range []struct {
		ip       string
		admitted bool
	}{{"127.0.0.1", true}, {"127.0.0.1", true}, {"127.0.0.1", false}, {"127.0.0.2", true}} {
		_, s := h.dial(step.ip)
		if (s != nil) != step.admitted {
			t.Fatalf("step %d from %s: admitted %v, want %v", i, step.ip, s != nil, step.admitted)
		}
		if s != nil {
			authn.Proven(h.lis.ConnContext(context.Background(), s))
		}
	}
}

// TestBoundProofTimeout: a connection no request proved is closed
// ProofTimeout after its accept; a proven one stays. Before, nothing closed
// a connection for want of a credential: a client sending a request without
// one now and then held its connection for good.
func TestBoundProofTimeout(t *testing.T) {
	// the proof (dial, accept, Proven) comes within ProofTimeout even on a loaded machine
	h := newBoundHarness(t, ConnBounds{Max: 8, ProofTimeout: time.Second})
	start := time.Now() // before the accept, whose timer cannot fire early
	idle, s1 := h.dial("127.0.0.1")
	kept, s2 := h.dial("127.0.0.1")
	if s1 == nil || s2 == nil {
		t.Fatal("refused on an empty listener")
	}
	authn.Proven(h.lis.ConnContext(context.Background(), s2))
	if !closedByServer(idle) {
		t.Error("a connection without a credential outlived the proof timeout")
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("a connection without a credential closed %v after its accept, before the proof timeout", d)
	}
	if !openFor(kept, 400*time.Millisecond) {
		t.Error("a proven connection was closed at the proof timeout")
	}
	if open, unproven := h.lis.Open(); open != 1 || unproven != 0 {
		t.Errorf("open %d, unproven %d; want 1, 0", open, unproven)
	}
}

func TestSourceKey(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::9"), Port: 9}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1"), Port: 1}, "2001:db8:1:3::/64"},
		{&net.UnixAddr{Name: "@x", Net: "unix"}, "@x"},
		{nil, ""},
	} {
		if got := SourceKey(tc.addr); got != tc.want {
			t.Errorf("SourceKey(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestContextProvenOnce: a request's Context carries its connection's
// proof until a request on it proves it (the first request's proof proves
// it, and so would a later one's), then is the request's own context,
// made without an allocation: the MACP relay asks for it on every call,
// and a proof that can change nothing cost a context every time before.
func TestContextProvenOnce(t *testing.T) {
	h := newBoundHarness(t, ConnBounds{Max: 8})
	_, s := h.dial("127.0.0.1")
	if s == nil {
		t.Fatal("refused on an empty listener")
	}
	remote := s.RemoteAddr().String()
	ctx := context.Background()
	first := h.lis.Context(ctx, remote)
	if first == ctx {
		t.Fatal("an unproven connection's request carries no proof")
	}
	if _, unproven := h.lis.Open(); unproven != 1 {
		t.Fatalf("unproven %d before a credential, want 1", unproven)
	}
	authn.Proven(first)
	if _, unproven := h.lis.Open(); unproven != 0 {
		t.Fatalf("unproven %d after a credential, want 0", unproven)
	}
	if got := h.lis.Context(ctx, remote); got != ctx {
		t.Error("a proven connection's request got a context of its own")
	}
	if n := testing.AllocsPerRun(100, func() { authn.Proven(h.lis.Context(ctx, remote)) }); n != 0 {
		t.Errorf("%v allocations per request on a proven connection, want 0", n)
	}
	authn.Proven(first) // a proof kept past the first is still harmless
	if open, unproven := h.lis.Open(); open != 1 || unproven != 0 {
		t.Errorf("open %d, unproven %d; want 1, 0", open, unproven)
	}
}
