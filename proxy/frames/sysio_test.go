package frames

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
)

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestSysIO: the raw reads and writes of a TCP connection behave as
// net.Conn's do: a write larger than the socket buffers completes once the
// peer reads, the peer's close reads as io.EOF, a read deadline as a
// timeout, and a read of a closed connection as net.ErrClosed.
func TestSysIO(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, a, b net.Conn, aio, bio sysIO)
	}{
		{"large write", func(t *testing.T, a, b net.Conn, aio, bio sysIO) {
			want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB: the writer waits for the reader
			got := make(chan []byte, 1)
			go func() {
				all, _ := io.ReadAll(io.LimitReader(bio.r, int64(len(want))))
				got <- all
			}()
			if n, err := aio.w.Write(want); n != len(want) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if !bytes.Equal(<-got, want) {
				t.Fatal("read back other bytes")
			}
		}},
		{"peer closed", func(t *testing.T, a, b net.Conn, aio, bio sysIO) {
			_, _ = aio.w.Write([]byte("x"))
			a.Close()
			buf := make([]byte, 8)
			n, err := io.ReadFull(bio.r, buf[:1])
			if n != 1 || err != nil {
				t.Fatalf("first read = %d, %v", n, err)
			}
			if n, err := bio.r.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("read after close = %d, %v, want io.EOF", n, err)
			}
		}},
		{"deadline", func(t *testing.T, a, b net.Conn, aio, bio sysIO) {
			_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := bio.r.Read(make([]byte, 8))
			if !isTimeout(err) || !isIOError(err) {
				t.Fatalf("read past the deadline: %v, want a timeout", err)
			}
		}},
		{"closed", func(t *testing.T, a, b net.Conn, aio, bio sysIO) {
			go func() { time.Sleep(20 * time.Millisecond); b.Close() }()
			_, err := bio.r.Read(make([]byte, 8))
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("read of a closed connection: %v, want net.ErrClosed", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			aio, bio := newSysIO(a, nil), newSysIO(b, nil)
			if _, raw := aio.r.(*rawReader); raw != rawIO {
				t.Fatalf("raw reads %v on a TCP connection, want %v", raw, rawIO)
			}
			tc.run(t, a, b, aio, bio)
		})
	}
}

// TestRawConnTLS: TLS over a raw listener (the MACP front door's TLS
// listener) and a raw client connection carries a
// message larger than the socket buffers both ways and ends with the peer's
// close_notify as io.EOF.
func TestRawConnTLS(t *testing.T) {
	leaf, key := testcerts.Server(t, "relay")
	der := leaf.Raw
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := tls.NewListener(RawListener(tcp), &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	defer lis.Close()
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18)
	served := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(c, buf); err != nil {
			served <- err
			return
		}
		_, err = c.Write(buf) // echoed
		served <- err
	}()
	nc, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, raw := RawConn(nc).(*rawConn); raw != rawIO {
		t.Fatalf("RawConn of a TCP connection is raw: %v, want %v", raw, rawIO)
	}
	c := tls.Client(RawConn(nc), &tls.Config{ServerName: "relay", RootCAs: roots})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("echo: %v (equal %v)", err, bytes.Equal(got, want))
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after the server closed: %d, %v, want io.EOF", n, err)
	}
}
