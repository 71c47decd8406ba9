package proxy

import (
	"crypto/rand"
	mathrand "math/rand/v2"
	"sync"
)

// ids mints the ids Warden gives requests and decisions: 128 random bits
// as 26 characters of the base32 alphabet (what crypto/rand.Text gives).
// Clients see them (refusals name the decision, responses carry the
// request id), so they must tell nothing: no sequence, no process, no
// time. The bits come from ChaCha8 generators (math/rand/v2's
// cryptographically strong generator), each seeded with 256 bits of
// crypto/rand, held in a sync.Pool so that concurrent calls do not share
// one under a lock; that is a third of crypto/rand.Text's cost (one
// getrandom per id). A generator the pool drops is replaced by a freshly
// seeded one. The zero value is ready to use.
type ids struct {
	gens sync.Pool
}

// base32 is crypto/rand.Text's alphabet (RFC 4648 base32, upper case).
const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// idLen is an id's length: 26 characters of 5 bits hold the 128.
const idLen = 26

// mint is a fresh id.
func (m *ids) mint() string {
	g, _ := m.gens.Get().(*mathrand.ChaCha8)
	if g == nil {
		var seed [32]byte
		rand.Read(seed[:]) // never fails (crypto/rand crashes the program instead)
		g = mathrand.NewChaCha8(seed)
	}
	lo, hi := g.Uint64(), g.Uint64()
	m.gens.Put(g)
	return encodeID(lo, hi)
}

// encodeID writes 128 bits as 26 base32 characters: 13 for each half, 5
// bits each (the 13th holds the half's last 4).
func encodeID(lo, hi uint64) string {
	var s [idLen]byte
	for i := range 13 {
		s[i] = base32[lo&31]
		s[13+i] = base32[hi&31]
		lo >>= 5
		hi >>= 5
	}
	return string(s[:])
}
