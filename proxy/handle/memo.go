package handle

import "sync"

// memoSize is how many seals (and opens) a memo holds in each of its two
// generations: a handle sealed or opened again within about that many
// others costs a map look-up instead of an HMAC and an AEAD.
const memoSize = 4096

// maxMemoID is the longest upstream id, principal and session a memo
// remembers a handle of: the ids are the upstream's to choose, and 8,192
// entries of a megabyte each would be 8 GB held; a longer one is sealed or
// opened by the ciphers each time.
const maxMemoID = 256

// memo remembers the handles one keyring's keys sealed and opened. Sealing
// and opening are pure functions of the keys, the kind, the principal, the
// session and the value (the nonce is synthetic), so what the memo answers
// is exactly what the ciphers would; it belongs to one derivedSet, and a new
// keyring starts an empty one. Only successes are kept: a value that does
// not open is worked out again each time. Two generations bound it: when
// the current one is full it becomes the previous one, and what was
// previous is dropped; a hit in the previous one moves to the current one.
type memo struct {
	mu        sync.Mutex
	cur, prev map[memoKey]string
	size      int
}

// memoKey is one seal (open false: v is the upstream id) or one open (v is
// the handle).
type memoKey struct {
	kind               byte
	open               bool
	principal, session string
	v                  string
}

func newMemo(size int) *memo {
	return &memo{cur: make(map[memoKey]string, size), size: size}
}

func (m *memo) get(k memoKey) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	if ok {
		m.putLocked(k, v)
	}
	return v, ok
}

// put remembers v for k, unless the upstream id (k.v when sealing, v when
// opening), the principal or the session is longer than maxMemoID.
func (m *memo) put(k memoKey, v string) {
	id := k.v
	if k.open {
		id = v
	}
	if len(id) > maxMemoID || len(k.principal) > maxMemoID || len(k.session) > maxMemoID {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(k, v)
}

func (m *memo) putLocked(k memoKey, v string) {
	if len(m.cur) >= m.size {
		m.prev, m.cur = m.cur, make(map[memoKey]string, m.size)
	}
	m.cur[k] = v
}
