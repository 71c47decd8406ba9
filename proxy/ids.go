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
// seeded one. Each generator encodes idBatch ids into one string at a time
// and hands them out in turn (a request and its decision take two ids: one
// allocation for two requests, not two for each). The zero value is ready
// to use.
type ids struct {
	gens sync.Pool // of *minter
}

// minter is a generator and the ids it encoded and has not handed out.
type minter struct {
	g    *mathrand.ChaCha8
	next string // idLen characters each
}

// base32 is crypto/rand.Text's alphabet (RFC 4648 base32, upper case).
const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// idLen is an id's length: 26 characters of 5 bits hold the 128.
const idLen = 26

// idBatch is how many ids share a string: an id kept keeps the other
// three's 78 bytes alive with it (the allocation is 112 bytes, an id alone
// 32).
const idBatch = 4

// mint is a fresh id.
func (m *ids) mint() string {
	t, _ := m.gens.Get().(*minter)
	if t == nil {
		var seed [32]byte
		rand.Read(seed[:]) // never fails (crypto/rand crashes the program instead)
		t = &minter{g: mathrand.NewChaCha8(seed)}
	}
	if t.next == "" {
		var b [idBatch * idLen]byte
		for i := range idBatch {
			encodeID(b[i*idLen:], t.g.Uint64(), t.g.Uint64())
		}
		t.next = string(b[:])
	}
	id := t.next[:idLen]
	t.next = t.next[idLen:]
	m.gens.Put(t)
	return id
}

// encodeID writes 128 bits as 26 base32 characters into s: 13 for each
// half, 5 bits each (the 13th holds the half's last 4).
func encodeID(s []byte, lo, hi uint64) {
	_ = s[idLen-1]
	for i := range 13 {
		s[i] = base32[lo&31]
		s[13+i] = base32[hi&31]
		lo >>= 5
		hi >>= 5
	}
}
