package owners

import (
	"hash/maphash"
	"sync"
)

// forgotten remembers, as 64-bit fingerprints, the last keys the task table
// evicted (as many as the table holds): with no shared store nobody else
// remembers whose an evicted id was, so an answer naming it must not teach
// a new owner (it would hand the next caller an id that was another's).
// Keys evicted before those are forgotten for good: the limit of a table in
// memory, which a shared store (--state) lifts. 32 bytes a key (heap
// measured at 100,000 keys), taken as keys are evicted.
type forgotten struct {
	mu    sync.Mutex
	seed  maphash.Seed
	size  int
	ring  []uint64
	next  int
	count map[uint64]int32
}

func newForgotten(size int) *forgotten {
	return &forgotten{seed: maphash.MakeSeed(), size: size, count: map[uint64]int32{}}
}

// add remembers that key was evicted, dropping the oldest beyond the bound.
func (f *forgotten) add(key Key) {
	h := f.hash(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ring) < f.size {
		f.ring = append(f.ring, h)
	} else {
		old := f.ring[f.next]
		if f.count[old]--; f.count[old] <= 0 {
			delete(f.count, old)
		}
		f.ring[f.next] = h
		f.next = (f.next + 1) % f.size
	}
	f.count[h]++
}

// has reports whether key was evicted (among the last remembered; a
// fingerprint collision, about one in 2^64 per pair, reads as evicted).
func (f *forgotten) has(key Key) bool {
	h := f.hash(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[h] > 0
}

// hash is key's hash under the ring's seed.
func (f *forgotten) hash(key Key) uint64 {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteByte(byte(key.Kind))
	h.WriteString(key.ID)
	return h.Sum64()
}
