//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package listener

import (
	"bytes"
	"testing"
)

// TestHoldInAllocs: a share kept in the caller's allocation, read through
// and given back, allocates nothing (Hold: its share).
func TestHoldInAllocs(t *testing.T) {
	s := NewStreams("mcp", StreamLimits{Max: 10, PerPrincipal: 10, AnswerBytes: 1 << 20})
	var kept Hold
	answer, body := []byte("answer"), bytes.NewReader(nil)
	buf := make([]byte, 16)
	if n := testing.AllocsPerRun(100, func() {
		h := s.HoldIn(&kept)
		body.Reset(answer)
		_, _ = h.Reader(body).Read(buf)
		h.Release()
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
