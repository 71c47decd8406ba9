package frames

import "slices"

// batch is the connections one goroutine queued frames on and writes
// itself once it is done queueing (flush): a client or upstream reader
// once the frames it already read are handled and it is about to wait for
// more, a Handler's goroutine once its request or answer is queued. Until
// then the connection's writer is not woken for what is queued (kick);
// flush writes it on the calling goroutine when no one else is writing and
// the socket takes it without waiting, and wakes the writer for the rest.
// Each such write saves the writer's wake-up and sleep, two switches of
// goroutine and, on an idle machine, of thread. A batch must be flushed
// before its goroutine waits for anything, or the connections it holds
// write nothing.
type batch struct {
	n     int
	first [2]*conn // the first n connections, then rest: no allocation for two
	rest  []*conn
}

// add holds c's writes for the batch; it runs under c.mu. A nil batch
// holds nothing.
func (b *batch) add(c *conn) {
	if b == nil || slices.Contains(b.first[:min(b.n, len(b.first))], c) || slices.Contains(b.rest, c) {
		return
	}
	c.held++
	if b.n < len(b.first) {
		b.first[b.n] = c
	} else {
		b.rest = append(b.rest, c)
	}
	b.n++
}

// holds reports whether the batch holds any connection.
func (b *batch) holds() bool { return b.n > 0 }

// flush writes what the batch's connections queued and lets them go.
func (b *batch) flush() {
	if b == nil {
		return
	}
	for i := range min(b.n, len(b.first)) {
		b.first[i].release()
		b.first[i] = nil
	}
	for i, c := range b.rest {
		c.release()
		b.rest[i] = nil
	}
	b.rest = b.rest[:0]
	b.n = 0
}

// release ends one batch's hold on c: the last one writes what is queued
// now, if the writer is not writing and the socket takes it without
// waiting; the writer is woken for whatever is left (and for DATA waiting
// in its streams). It runs without locks held.
func (c *conn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	if c.held > 0 || c.dead || len(c.out) == 0 && len(c.blocked) == 0 {
		return
	}
	if c.writing || c.io.try == nil || len(c.out) == 0 {
		c.signal()
		return
	}
	buf := c.out
	c.out, c.wbuf = c.wbuf[:0], nil
	c.writing = true
	c.mu.Unlock()
	n := c.io.try(buf)
	c.mu.Lock()
	c.writing = false
	if n < len(buf) {
		// the rest goes first, by the writer, which waits for the socket
		rest := copy(buf, buf[n:])
		buf = append(buf[:rest], c.out...)
		c.out, c.wbuf = buf, c.out[:0]
		c.signal()
		return
	}
	if cap(buf) <= 1<<20 {
		c.wbuf = buf[:0]
	}
	if !c.dead && len(c.out) > 0 || len(c.blocked) > 0 {
		c.signal()
	}
}
