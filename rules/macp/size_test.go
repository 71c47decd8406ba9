package macp

import (
	"testing"
	"unsafe"
)

// TestSessionSize pins a session to the 224-byte size class: what nearly no
// session has (senders outside its participants) costs it one pointer.
func TestSessionSize(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 224 {
		t.Errorf("a session is %d bytes, want at most 224", n)
	}
}
