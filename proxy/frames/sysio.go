package frames

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
)

// sysIO reads and writes a connection's socket through its raw file
// descriptor, where the platform allows (sysio_linux.go): a non-blocking
// read or write that the Go runtime would otherwise wrap as a system call
// that may block, waking the runtime's monitor thread on every one made
// after an idle moment (at the relay's message rates, the monitor's
// wake-ups and naps cost about a third of its CPU). Deadlines, closing and
// waiting for the socket are the runtime's as for any net.Conn. Anything
// else (a TLS connection, an in-memory pipe, another platform) is read and
// written as it is.
//
// Each direction has one goroutine: the connection's reader reads, its
// writer writes. A raw write holds its thread for as long as the kernel
// takes to copy what fits in the socket's buffer (never waiting for the
// peer), as the runtime's own poller does.
type sysIO struct {
	r io.Reader
	w io.Writer
	// try writes what the socket takes of p now, without waiting, and
	// returns how much; nil where writes are not raw.
	try func(p []byte) int
}

// newSysIO returns the reader and writer of nc; writes, when not nil,
// counts the write system calls made on it (a Write of a connection not
// written raw counts as one).
func newSysIO(nc net.Conn, writes *atomic.Int64) sysIO {
	sc, ok := nc.(syscall.Conn)
	if !ok || !rawIO {
		return plainIO(nc, writes)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return plainIO(nc, writes)
	}
	r, w := &rawReader{rc: rc}, &rawWriter{rc: rc, writes: writes}
	r.fn, w.fn, w.tfn = r.read, w.write, w.tryWrite
	return sysIO{r: r, w: w, try: w.try}
}

// plainIO reads and writes nc as it is.
func plainIO(nc net.Conn, writes *atomic.Int64) sysIO {
	if writes == nil {
		return sysIO{r: nc, w: nc}
	}
	return sysIO{r: nc, w: countedWriter{nc, writes}}
}

// countedWriter counts its Writes in n.
type countedWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (w countedWriter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.w.Write(p)
}

// rawReader reads through rc; fn is read, made once so that a Read
// allocates nothing.
type rawReader struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool
	p   []byte
	n   int
	err error
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	if err := r.rc.Read(r.fn); err != nil {
		r.err = err
	}
	r.p = nil
	if r.n == 0 && r.err == nil {
		r.err = io.EOF
	}
	return r.n, r.err
}

// read is the callback of one Read: false (wait until the socket is
// readable) while it has nothing to read.
func (r *rawReader) read(fd uintptr) bool {
	for {
		n, errno := rawRead(fd, r.p)
		switch errno {
		case 0:
			r.n = n
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.err = &net.OpError{Op: "read", Net: "tcp", Err: errno}
		}
		return true
	}
}

// rawWriter writes through rc; fn is write, made once.
type rawWriter struct {
	rc     syscall.RawConn
	fn     func(fd uintptr) bool
	tfn    func(fd uintptr) bool // tryWrite
	writes *atomic.Int64         // counts the write system calls; nil: not counted
	p      []byte
	n      int
	err    error
}

func (w *rawWriter) Write(p []byte) (int, error) {
	w.p, w.n, w.err = p, 0, nil
	if err := w.rc.Write(w.fn); err != nil && w.err == nil {
		w.err = err
	}
	w.p = nil
	return w.n, w.err
}

// try writes what the socket takes of p without waiting for it: the
// caller's goroutine, not the connection's writer, may write when the
// writer is idle (a write that fails or would wait leaves the rest, and
// the error, to the writer). It must not run at the same time as Write.
func (w *rawWriter) try(p []byte) int {
	w.p, w.n, w.err = p, 0, nil
	_ = w.rc.Write(w.tfn) // an error (closed, deadline passed) is the writer's to see
	w.p = nil
	return w.n
}

// tryWrite is the callback of try: done, whatever the socket took.
func (w *rawWriter) tryWrite(fd uintptr) bool {
	w.write(fd)
	return true
}

// write is the callback of one Write: false (wait until the socket is
// writable) while some of it is left to write.
func (w *rawWriter) write(fd uintptr) bool {
	for w.n < len(w.p) {
		if w.writes != nil {
			w.writes.Add(1)
		}
		n, errno := rawWrite(fd, w.p[w.n:])
		switch {
		case errno == 0 && n == 0: // a socket never takes nothing: do not spin
			w.err = io.ErrShortWrite
			return true
		case errno == 0:
			w.n += n
		case errno == syscall.EINTR:
		case errno == syscall.EAGAIN:
			return false
		default:
			w.err = &net.OpError{Op: "write", Net: "tcp", Err: errno}
			return true
		}
	}
	return true
}

// RawListener is lis, its connections read and written through their raw
// file descriptors where the platform allows (see RawConn): for a listener
// the relay serves through another layer, TLS, whose records are then read
// and written raw.
func RawListener(lis net.Listener) net.Listener { return rawListener{lis} }

type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return RawConn(nc), nil
}

// RawConn is nc read and written through its raw file descriptor, as the
// relay reads and writes a TCP connection it serves itself; nc as it is
// where that cannot be done. One goroutine at a time may read, and one
// write (crypto/tls serializes its reads and its writes).
func RawConn(nc net.Conn) net.Conn {
	io := newSysIO(nc, nil)
	if _, ok := io.r.(*rawReader); !ok {
		return nc
	}
	return &rawConn{Conn: nc, io: io}
}

type rawConn struct {
	net.Conn
	io sysIO
}

func (c *rawConn) Read(p []byte) (int, error)  { return c.io.r.Read(p) }
func (c *rawConn) Write(p []byte) (int, error) { return c.io.w.Write(p) }

// CloseWrite half-closes the connection when it can be.
func (c *rawConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

var errNoHalfClose = errors.New("frames: the connection cannot be half-closed")
