//go:build !race

package proxy

import "testing"

// TestMintAllocs: idBatch ids cost one allocation, one string (one each
// before). The race detector's sync.Pool drops what it is given at random,
// and a dropped generator costs a fresh one: !race.
func TestMintAllocs(t *testing.T) {
	var m ids
	if n := testing.AllocsPerRun(idBatch*100, func() { _ = m.mint() }); n > 0.5 {
		t.Errorf("%.2f allocations per id, want 1/%d", n, idBatch)
	}
}
