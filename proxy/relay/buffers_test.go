//go:build !race

// The race detector's sync.Pool drops what is put in it at random, so what
// is kept and the counts hold only without it.

package relay

import "testing"

// TestBuffers: a buffer goes round the pool without an allocation (the old
// Put boxed every slice it was given: one allocation per answer), keeps
// what it grew to, and one grown past MaxPooled is not kept.
func TestBuffers(t *testing.T) {
	var bs Buffers
	bs.Put(bs.Get()) // the first buffer is made
	if n := testing.AllocsPerRun(100, func() {
		buf := bs.Get()
		*buf = append(*buf, "answer"...)
		bs.Put(buf)
	}); n != 0 {
		t.Errorf("%v allocations per Get and Put, want 0", n)
	}
	for _, tc := range []struct {
		name string
		size int
		kept bool
	}{
		{"small", 100, true},
		{"grown", 32 << 10, true},
		{"too large", MaxPooled + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bs Buffers
			buf := bs.Get()
			*buf = append(*buf, make([]byte, tc.size)...)
			bs.Put(buf)
			got := bs.Get()
			if len(*got) != 0 {
				t.Errorf("Get gave %d bytes, want an empty buffer", len(*got))
			}
			if kept := got == buf; kept != tc.kept {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
		})
	}
	bs.Put(nil) // nothing to keep
}
