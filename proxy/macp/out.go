package macp

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// writerBounds are what a stream holds for a client that reads slowly or
// not at all.
type writerBounds struct {
	// queue is how many bytes of messages may wait for the client; one
	// message always fits, however large. Beyond it more are queued only
	// while the client reads (a write completed within stall), up to most:
	// a burst (the history a subscription replays) does not end the stream
	// of a client that keeps reading.
	queue, most int
	stall       time.Duration
	// stuck is how long one write to the client may block (its HTTP/2
	// window closed) before the stream is ended.
	stuck time.Duration
}

// clientBounds are the bounds of every relayed stream.
var clientBounds = writerBounds{queue: 1 << 20, most: 16 << 20, stall: 2 * time.Second, stuck: 10 * time.Second}

// Why a stream to a client that does not read is ended (the cause of the
// stream's context).
var (
	errClientBehind = errors.New("the client does not read its stream: too many messages wait for it")
	errClientStuck  = errors.New("the client does not read its stream: a write to it timed out")
)

// clientWriter is the only writer to a server stream: messages are queued
// without blocking and written in order by Run, so that no caller ever waits
// on the client's flow control. A queue past its bounds, or one write blocked
// past the timeout, ends the stream through end.
type clientWriter struct {
	ss  grpc.ServerStream
	end context.CancelCauseFunc
	b   writerBounds

	mu       sync.Mutex
	queue    []any
	bytes    int
	closed   bool
	progress time.Time     // the last write completed (or the start)
	wake     chan struct{} // one token: the queue changed
	done     chan struct{} // Run returned
}

// header is a queued SendHeader.
type header struct{ md metadata.MD }

// newClientWriter returns a writer to ss within b; end cancels the stream's
// work.
func newClientWriter(ss grpc.ServerStream, end context.CancelCauseFunc, b writerBounds) *clientWriter {
	return &clientWriter{ss: ss, end: end, b: b, progress: time.Now(), wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// size is what a queued message counts against the limit.
func size(m any) int {
	if f, ok := m.(*frame); ok {
		return len(f.b)
	}
	return 256 // Warden's own small messages
}

// send queues m. It reports false, and ends the stream, when the client is
// too far behind.
func (w *clientWriter) send(m any) bool {
	n := size(m)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	if over := len(w.queue) > 0 && w.bytes+n > w.b.queue; over && (w.bytes+n > w.b.most || time.Since(w.progress) > w.b.stall) {
		w.closed = true
		w.mu.Unlock()
		w.end(errClientBehind)
		return false
	}
	w.queue = append(w.queue, m)
	w.bytes += n
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// close lets Run return once the queue is written.
func (w *clientWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// flush closes the writer and waits at most the send timeout for what is
// queued to be written. The error, when it was not, is the call's status:
// the client must not take a stream cut short for a complete one.
func (w *clientWriter) flush() error {
	w.close()
	t := time.NewTimer(w.b.stuck)
	defer t.Stop()
	select {
	case <-w.done:
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.queue) > 0 {
			return status.Error(codes.DeadlineExceeded, errClientStuck.Error())
		}
		return nil
	case <-t.C:
		return status.Error(codes.DeadlineExceeded, errClientStuck.Error())
	}
}

// Run writes queued messages until the writer is closed and drained, a write
// fails, or ctx ends. A write blocked past the timeout ends the stream; the
// write itself returns when the stream's handler does.
func (w *clientWriter) Run(ctx context.Context) {
	defer close(w.done)
	stuck := time.AfterFunc(time.Hour, func() { w.end(errClientStuck) })
	stuck.Stop()
	defer stuck.Stop()
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			closed := w.closed
			w.mu.Unlock()
			if closed {
				return
			}
			select {
			case <-w.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		m := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.bytes -= size(m)
		w.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		stuck.Reset(w.b.stuck)
		var err error
		if h, ok := m.(header); ok {
			err = w.ss.SendHeader(h.md)
		} else {
			err = w.ss.SendMsg(m)
		}
		stuck.Stop()
		if err == nil {
			w.mu.Lock()
			w.progress = time.Now()
			w.mu.Unlock()
		}
		if err != nil && !isHeader(m) {
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
			w.end(err)
			return
		}
	}
}

func isHeader(m any) bool {
	_, ok := m.(header)
	return ok
}
