package jsonrpc

import (
	"testing"
	"unsafe"
)

// TestDocSize holds the doc, with the members, elements and objects it
// keeps in itself, to the 896-byte size class: one field more and every
// message read costs the 1024-byte class.
func TestDocSize(t *testing.T) {
	if n := unsafe.Sizeof(doc{}); n > 896 {
		t.Errorf("a doc is %d bytes, want at most 896", n)
	}
}
