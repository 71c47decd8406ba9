// Package handle seals upstream identifiers (task IDs, session IDs, event
// ids, list cursors) into handles bound to one principal, and opens them
// back. Each protocol is a domain with keys of its own, so a handle given by
// one adapter never opens in another.
package handle

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/chacha20poly1305"
)

// Prefix marks Warden's handles: "wt2." + base64url(nonce ‖ sealed ID)
// under the id-less key of a single-key file (the handles Warden always
// made), "wt2." + key id + "." + base64url(nonce ‖ sealed ID) under a key
// with an id. Base64url has no '.', so the two never read alike, and every
// handle keeps the prefix callers recognise handles by.
const Prefix = "wt2."

// Sealer turns upstream identifiers into handles bound to one principal
// (and, for some kinds, one upstream session), and back.
//
// A handle is the identifier encrypted and authenticated with
// XChaCha20-Poly1305; the additional data is the kind, the principal and the
// session, so a handle reveals nothing of the identifier and opens only for
// the principal (and session) it was given to. The nonce is synthetic
// (SIV-like): HMAC-SHA256 over the additional data and the identifier, so
// one identifier has exactly one handle per principal; clients and SDKs
// compare task IDs (a status notification with the task a call created), and
// open checks the nonce too, so no other spelling of a handle opens. The
// cost of determinism is that equal handles show equal identifiers, which a
// client learns anyway. Keys are derived with HKDF-SHA256 from each handle
// key of the keyring, one pair per domain and kind; any replica holding the
// key opens a handle, before and after a restart, with no state. The
// keyring's first key seals; a handle names the key it was sealed under, so
// a rotated keyring opens every handle whose key it still lists.
type Sealer struct {
	ring   *Ring
	domain string
	kinds  []byte
	keys   *derivedKeys
}

// derivedKeys caches the keys derived from the Ring's current keyring.
type derivedKeys struct {
	mu  sync.Mutex
	cur atomic.Pointer[derivedSet]
}

// derivedSet is one keyring's derived keys.
type derivedSet struct {
	from *Keyring
	seal *keyed
	byID map[string]*keyed
	memo *memo // the handles these keys sealed and opened lately
}

// keyed is one key's ciphers, one per kind, and its handles' prefix.
type keyed struct {
	prefix string
	aead   map[byte]cipher.AEAD
	// scratch holds what one seal or open works with (keyed HMAC states,
	// buffers), so that a handle costs no allocation but its string.
	scratch *sync.Pool
}

// scratch is one seal's or open's working state.
type scratch struct {
	mac   map[byte]hash.Hash // HMAC-SHA256 of the synthetic nonces, keyed per kind
	ad    []byte
	plain []byte
	raw   []byte
	sum   [sha256.Size]byte
}

// New derives the keys of each kind of identifier of domain ("mcp", "a2a")
// from one handle key, whose handles carry no key id (a single-key file's).
// Each kind has its own keys and is bound into the additional data, so a
// handle of one kind never opens as another.
func New(key []byte, domain string, kinds []byte) (Sealer, error) {
	return NewSealer(NewRing(&Keyring{keys: []Key{{Secret: key}}}), domain, kinds)
}

// NewSealer is New on a keyring that may change (Ring.Set): new handles are
// sealed under its first key, and a handle opens while the key it was sealed
// under is in the ring.
func NewSealer(r *Ring, domain string, kinds []byte) (Sealer, error) {
	h := Sealer{ring: r, domain: domain, kinds: append([]byte(nil), kinds...), keys: &derivedKeys{}}
	if _, err := h.current(); err != nil {
		return Sealer{}, err
	}
	return h, nil
}

// current returns the derived keys of the ring's keyring, deriving them
// when the keyring changed.
func (h Sealer) current() (*derivedSet, error) {
	kr := h.ring.Keyring()
	if d := h.keys.cur.Load(); d != nil && d.from == kr {
		return d, nil
	}
	h.keys.mu.Lock()
	defer h.keys.mu.Unlock()
	old := h.keys.cur.Load()
	if old != nil && old.from == kr {
		return old, nil
	}
	d := &derivedSet{from: kr, byID: make(map[string]*keyed, len(kr.keys)), memo: newMemo(memoSize)}
	for i, k := range kr.keys {
		x, err := h.derive(k)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			d.seal = x
		}
		d.byID[k.ID] = x
	}
	h.keys.cur.Store(d)
	return d, nil
}

// derived returns the derived keys of the ring's keyring. A keyring whose
// keys cannot be derived (never: NewKeyring checked them) leaves the
// previous ones.
func (h Sealer) derived() *derivedSet {
	d, err := h.current()
	if err != nil {
		return h.keys.cur.Load()
	}
	return d
}

// derive makes key k's ciphers and nonce keys, one pair per kind, with
// HKDF-SHA256: the same derivation for every key, so a single-key file's
// handles open as before.
func (h Sealer) derive(k Key) (*keyed, error) {
	x := &keyed{prefix: Prefix, aead: map[byte]cipher.AEAD{}}
	if k.ID != "" {
		x.prefix = Prefix + k.ID + "."
	}
	nonceKeys := map[byte][]byte{}
	for _, kind := range h.kinds {
		ek, err := hkdf.Key(sha256.New, k.Secret, nil, "warden "+h.domain+" handle v2 aead "+string(kind), chacha20poly1305.KeySize)
		if err != nil {
			return nil, fmt.Errorf("derive handle key: %w", err)
		}
		nk, err := hkdf.Key(sha256.New, k.Secret, nil, "warden "+h.domain+" handle v2 nonce "+string(kind), 32)
		if err != nil {
			return nil, fmt.Errorf("derive handle key: %w", err)
		}
		a, err := chacha20poly1305.NewX(ek)
		if err != nil {
			return nil, fmt.Errorf("handle cipher: %w", err)
		}
		x.aead[kind], nonceKeys[kind] = a, nk
	}
	x.scratch = &sync.Pool{New: func() any {
		s := &scratch{mac: make(map[byte]hash.Hash, len(nonceKeys))}
		for kind, nk := range nonceKeys {
			s.mac[kind] = hmac.New(sha256.New, nk)
		}
		return s
	}}
	return x, nil
}

// additional is the data a handle is bound to: version, kind, principal and
// session, each length-prefixed so no two bindings read alike.
func additional(kind byte, principal, session string) []byte {
	return appendAdditional(nil, kind, principal, session)
}

func appendAdditional(ad []byte, kind byte, principal, session string) []byte {
	ad = append(ad, "wt2"...)
	ad = append(ad, kind)
	ad = binary.AppendUvarint(ad, uint64(len(principal)))
	ad = append(ad, principal...)
	ad = binary.AppendUvarint(ad, uint64(len(session)))
	return append(ad, session...)
}

// syntheticNonce is HMAC-SHA256(kind's nonce key, ad ‖ id), cut to the
// nonce size; it lives in sc until sc's next use.
func (sc *scratch) syntheticNonce(kind byte, ad, id []byte) []byte {
	mac := sc.mac[kind]
	mac.Reset()
	mac.Write(ad)
	mac.Write(id)
	return mac.Sum(sc.sum[:0])[:chacha20poly1305.NonceSizeX]
}

// Seal returns principal's handle for the upstream id (kinds bound to the
// principal only).
func (h Sealer) Seal(kind byte, principal, id string) string {
	return h.SealIn(kind, principal, "", id)
}

// Open returns the upstream id of principal's handle; ok is false for
// anything else (another principal's handle, a forged or garbled one, a raw
// upstream ID, a handle of another kind or domain).
func (h Sealer) Open(kind byte, principal, handle string) (id string, ok bool) {
	return h.OpenIn(kind, principal, "", handle)
}

// maxScratch is the largest buffer a scratch keeps for the next handle.
const maxScratch = 64 << 10

func (x *keyed) put(sc *scratch) {
	if cap(sc.plain) <= maxScratch && cap(sc.raw) <= maxScratch && cap(sc.ad) <= maxScratch {
		x.scratch.Put(sc)
	}
}

// SealIn is Seal for the kinds also bound to an upstream session.
func (h Sealer) SealIn(kind byte, principal, session, id string) string {
	d := h.derived()
	k := memoKey{kind: kind, principal: principal, session: session, v: id}
	if v, ok := d.memo.get(k); ok {
		return v
	}
	v := d.seal.seal(kind, principal, session, id)
	d.memo.put(k, v)
	return v
}

// seal is SealIn's work, with this key's ciphers.
func (x *keyed) seal(kind byte, principal, session, id string) string {
	a := x.aead[kind]
	sc := x.scratch.Get().(*scratch)
	defer x.put(sc)
	sc.ad = appendAdditional(sc.ad[:0], kind, principal, session)
	sc.plain = append(sc.plain[:0], id...)
	nonce := sc.syntheticNonce(kind, sc.ad, sc.plain)
	sc.raw = append(sc.raw[:0], nonce...)
	sc.raw = a.Seal(sc.raw, nonce, sc.plain, sc.ad)
	out := append(sc.plain[:0], x.prefix...)
	sc.plain = base64.RawURLEncoding.AppendEncode(out, sc.raw)
	return string(sc.plain)
}

// OpenIn is Open for the kinds also bound to an upstream session.
func (h Sealer) OpenIn(kind byte, principal, session, handle string) (id string, ok bool) {
	id, err := h.Unseal(kind, principal, session, handle)
	return id, err == nil
}

// Unseal is OpenIn that says why a value does not open: an *Error
// (ErrRawID, ErrMalformed, ErrRetiredKey or ErrForeign) for the operator.
func (h Sealer) Unseal(kind byte, principal, session, handle string) (string, error) {
	d := h.derived()
	k := memoKey{kind: kind, open: true, principal: principal, session: session, v: handle}
	if id, ok := d.memo.get(k); ok {
		return id, nil
	}
	id, err := d.open(kind, principal, session, handle)
	if err == nil {
		d.memo.put(k, id)
	}
	return id, err
}

// open is Unseal's work, with these keys' ciphers.
func (d *derivedSet) open(kind byte, principal, session, handle string) (string, error) {
	rest, found := strings.CutPrefix(handle, Prefix)
	if !found {
		return "", ErrRawID
	}
	x := d.byID[""]
	if id, body, keyed := strings.Cut(rest, "."); keyed {
		if !validID(id) {
			return "", ErrMalformed
		}
		x, rest = d.byID[id], body
	}
	if x == nil {
		return "", ErrRetiredKey
	}
	a, known := x.aead[kind]
	if !known {
		return "", ErrForeign
	}
	sc := x.scratch.Get().(*scratch)
	defer x.put(sc)
	sc.plain = append(sc.plain[:0], rest...)
	raw, err := base64.RawURLEncoding.Strict().AppendDecode(sc.raw[:0], sc.plain)
	sc.raw = raw
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+a.Overhead() {
		return "", ErrMalformed
	}
	nonce, sealed := raw[:chacha20poly1305.NonceSizeX], raw[chacha20poly1305.NonceSizeX:]
	sc.ad = appendAdditional(sc.ad[:0], kind, principal, session)
	plain, err := a.Open(sc.plain[:0], nonce, sealed, sc.ad)
	if err != nil {
		return "", ErrForeign
	}
	sc.plain = plain
	if !hmac.Equal(nonce, sc.syntheticNonce(kind, sc.ad, plain)) {
		return "", ErrForeign
	}
	return string(plain), nil
}
