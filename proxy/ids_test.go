package proxy

import (
	"crypto/rand"
	"strings"
	"sync"
	"testing"
)

// TestIDs: minted ids have crypto/rand.Text's form (26 characters of its
// base32 alphabet), none repeats, from one goroutine or many at once (run
// with -race), and every one of the 128 bits is set in about half of them:
// a bit a broken encoding or generator fixed would show in 0 or all.
func TestIDs(t *testing.T) {
	var m ids
	const n = 4000
	got := make([][]string, 4)
	var wg sync.WaitGroup
	for g := range got {
		wg.Go(func() {
			for range n {
				got[g] = append(got[g], m.mint())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	var ones [idLen * 5]int
	for _, batch := range got {
		for _, id := range batch {
			if len(id) != idLen || strings.Trim(id, base32) != "" {
				t.Fatalf("id %q is not %d characters of %q", id, idLen, base32)
			}
			if seen[id] {
				t.Fatalf("id %q minted twice", id)
			}
			seen[id] = true
			for i := range id {
				v := strings.IndexByte(base32, id[i])
				for b := range 5 {
					ones[i*5+b] += v >> b & 1
				}
			}
		}
	}
	total := len(seen)
	for i, c := range ones {
		if i%5 == 4 && (i/5 == 12 || i/5 == 25) {
			if c != 0 { // a half's 13th character holds 4 bits
				t.Errorf("bit %d set in %d ids: the 13th character of a half holds only 4", i, c)
			}
			continue
		}
		if c < total*45/100 || c > total*55/100 {
			t.Errorf("bit %d set in %d of %d ids: not random", i, c, total)
		}
	}
}

func BenchmarkMintID(b *testing.B) {
	b.Run("ids", func(b *testing.B) {
		var m ids
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = m.mint()
			}
		})
	})
	b.Run("crypto-rand-Text", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = rand.Text()
			}
		})
	})
}
