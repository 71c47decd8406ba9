package macp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// writerBounds are what a stream holds for a client that reads slowly or
// not at all.
type writerBounds struct {
	// queue is how many bytes of messages may wait for the client; one
	// message always fits, however large. Beyond it more are queued only
	// while the client reads (a write completed within stall, and at least
	// drain bytes a second written since the queue went past it, once stall
	// has passed), up to most: a burst (the history a subscription replays)
	// does not end the stream of a client that keeps reading, and a client
	// that reads a trickle (grpc-go's SendMsg returns once a message fits
	// the flow-control window) cannot keep most waiting.
	queue, most int
	stall       time.Duration
	drain       int64
	// stuck is how long one write to the client may block (its HTTP/2
	// window closed) before the stream is ended.
	stuck time.Duration
	// fair is what a stream may hold queued however full the budget shared
	// by every stream is: a stream holding more, when the budget cannot take
	// its next message, is ended.
	fair int
}

// clientBounds are the bounds of every relayed stream.
var clientBounds = writerBounds{queue: 1 << 20, most: 16 << 20, stall: 2 * time.Second, drain: 256 << 10, stuck: 10 * time.Second, fair: 64 << 10}

// Why a stream to a client that does not read is ended (the cause of the
// stream's context). Those that wrap errClientBehind end it
// RESOURCE_EXHAUSTED.
var (
	errClientBehind = errors.New("the client does not read its stream: too many messages wait for it")
	errClientSlow   = fmt.Errorf("%w (it reads them slower than %d KiB/s)", errClientBehind, clientBounds.drain>>10)
	errQueueBudget  = fmt.Errorf("%w (the bytes all streams may queue are taken)", errClientBehind)
	errClientStuck  = errors.New("the client does not read its stream: a write to it timed out")
)

// queueBudget is the bytes every stream's queue together may hold
// (StreamLimits.QueuedBytes), a message counted until it is written; a
// stream's first writerBounds.fair bytes are always taken (even one large
// message is not: 600 streams of one 4 MiB message each would hold 2.4 GiB).
type queueBudget struct {
	max  int64
	used atomic.Int64
}

// take counts n more bytes unless that goes past the budget; force counts
// them in any case.
func (b *queueBudget) take(n int, force bool) bool {
	if b == nil {
		return true
	}
	if b.used.Add(int64(n)) > b.max && !force {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// give returns n bytes.
func (b *queueBudget) give(n int) {
	if b != nil && n != 0 {
		b.used.Add(-int64(n))
	}
}

// clientWriter is the only writer to a server stream: messages are queued
// without blocking and written in order by Run, so that no caller ever waits
// on the client's flow control. A queue past its bounds, or one write blocked
// past the timeout, ends the stream through end.
type clientWriter struct {
	ss     serverStream
	end    context.CancelCauseFunc
	b      writerBounds
	budget *queueBudget // nil: none

	mu       sync.Mutex
	queue    []any
	bytes    int
	closed   bool
	lost     bool          // Run returned with messages unwritten
	progress time.Time     // the last write completed (or the start)
	written  int64         // bytes written to the client
	over     time.Time     // the queue went past b.queue (zero: it is not)
	overAt   int64         // written then
	wake     chan struct{} // one token: the queue changed
	done     chan struct{} // Run returned
}

// header is a queued SendHeader.
type header struct{ md metadata.MD }

// newClientWriter returns a writer to ss within b, its queue counted against
// budget (nil: none); end cancels the stream's work.
func newClientWriter(ss serverStream, end context.CancelCauseFunc, b writerBounds, budget *queueBudget) *clientWriter {
	return &clientWriter{ss: ss, end: end, b: b, budget: budget, progress: time.Now(), wake: make(chan struct{}, 1), done: make(chan struct{})}
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
	now := time.Now()
	var cause error
	switch over := len(w.queue) > 0 && w.bytes+n > w.b.queue; {
	case over && (w.bytes+n > w.b.most || now.Sub(w.progress) > w.b.stall):
		cause = errClientBehind
	case over && w.slow(now):
		cause = errClientSlow
	case !w.budget.take(n, w.bytes+n <= w.b.fair):
		cause = errQueueBudget
	}
	if cause != nil {
		w.closed = true
		w.mu.Unlock()
		w.end(cause)
		return false
	}
	w.queue = append(w.queue, m)
	w.bytes += n
	if w.bytes > w.b.queue && w.over.IsZero() {
		w.over, w.overAt = now, w.written
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// slow reports whether the client, its queue past the bound since w.over,
// read less than the drain rate since then (given stall to start); w.mu is
// held.
func (w *clientWriter) slow(now time.Time) bool {
	if w.over.IsZero() || w.b.drain <= 0 {
		return false
	}
	took := now.Sub(w.over)
	return took > w.b.stall && float64(w.written-w.overAt) < float64(w.b.drain)*took.Seconds()
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
		if w.lost {
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
	defer w.drop()
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
		n := size(m)
		w.bytes -= n
		w.mu.Unlock()
		if ctx.Err() != nil {
			w.budget.give(n)
			w.mu.Lock()
			w.lost = true
			w.mu.Unlock()
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
		w.budget.give(n)
		if err == nil && w.wrote(n) {
			w.end(errClientSlow)
			return
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

// wrote records n bytes written and reports whether the client reads too
// slowly for what still waits (the stream is then closed).
func (w *clientWriter) wrote(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.progress = now
	w.written += int64(n)
	if w.bytes <= w.b.queue {
		w.over = time.Time{}
		return false
	}
	if w.slow(now) {
		w.closed = true
		return true
	}
	return false
}

// drop gives back what is still queued when Run returns; nothing is queued
// after.
func (w *clientWriter) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		w.lost = true
	}
	w.budget.give(w.bytes)
	w.queue, w.bytes, w.closed = nil, 0, true
}

func isHeader(m any) bool {
	_, ok := m.(header)
	return ok
}
