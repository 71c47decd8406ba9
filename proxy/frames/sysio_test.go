package frames

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
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
			aio, bio := newSysIO(a), newSysIO(b)
			if _, raw := aio.r.(*rawReader); raw != rawIO {
				t.Fatalf("raw reads %v on a TCP connection, want %v", raw, rawIO)
			}
			tc.run(t, a, b, aio, bio)
		})
	}
}
