package relay

import (
	"bufio"
	"io"
	"sync"
)

// MaxPooled is the largest buffer Buffers keeps: a buffer grown past it (a
// large answer) goes to the garbage collector, so the pool never holds
// more than a few small buffers per core.
const MaxPooled = 64 << 10

// Buffers pools the buffers answers are written into before they go to the
// caller. The zero value is ready to use; it must not be copied.
type Buffers struct{ p sync.Pool }

// Get returns an empty buffer to append to: the caller sets *buf to what
// it grew into and hands buf back with Put. The pointer travels with the
// buffer, so that neither Get nor Put allocates.
func (b *Buffers) Get() *[]byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		*v = (*v)[:0]
		return v
	}
	buf := make([]byte, 0, 4<<10)
	return &buf
}

// Put returns a buffer Get gave once nothing reads it any more (nor any
// slice of it).
func (b *Buffers) Put(buf *[]byte) {
	if buf == nil || cap(*buf) > MaxPooled || cap(*buf) == 0 {
		return
	}
	b.p.Put(buf)
}

// readerSize is the buffer an event stream is read through.
const readerSize = 32 << 10

// Readers pools the buffers event streams are read through (32 KiB each,
// allocated and cleared per stream otherwise). The zero value is ready to
// use; it must not be copied. A nil *Readers pools nothing.
type Readers struct{ p sync.Pool }

// get returns a reader of r.
func (rs *Readers) get(r io.Reader) *bufio.Reader {
	if rs != nil {
		if br, ok := rs.p.Get().(*bufio.Reader); ok {
			br.Reset(r)
			return br
		}
	}
	return bufio.NewReaderSize(r, readerSize)
}

// put returns a reader get gave once nothing reads it or holds a slice of
// its buffer (every event a Reader returns is a copy).
func (rs *Readers) put(br *bufio.Reader) {
	if rs == nil {
		return
	}
	br.Reset(nil)
	rs.p.Put(br)
}
