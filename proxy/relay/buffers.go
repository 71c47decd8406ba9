package relay

import "sync"

// MaxPooled is the largest buffer Buffers keeps: a buffer grown past it (a
// large answer) goes to the garbage collector, so the pool never holds
// more than a few small buffers per core.
const MaxPooled = 64 << 10

// Buffers pools the buffers answers are written into before they go to the
// caller. The zero value is ready to use; it must not be copied.
type Buffers struct{ p sync.Pool }

// Get returns an empty buffer.
func (b *Buffers) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return (*v)[:0]
	}
	return make([]byte, 0, 4<<10)
}

// Put returns a buffer Get gave once nothing reads it any more.
func (b *Buffers) Put(buf []byte) {
	if cap(buf) > MaxPooled || cap(buf) == 0 {
		return
	}
	b.p.Put(&buf)
}
