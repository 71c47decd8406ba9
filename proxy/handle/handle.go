// Package handle seals upstream identifiers (task IDs, session IDs, event
// ids, list cursors) into handles bound to one principal, and opens them
// back. Each protocol is a domain with keys of its own, so a handle given by
// one adapter never opens in another.
package handle

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"
)

// Prefix marks Warden's handles: "wt2." + base64url(nonce ‖ sealed ID).
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
// client learns anyway. Keys are derived with HKDF-SHA256 from the handle
// key, one pair per domain and kind; any replica holding the key opens a handle, before
// and after a restart, with no state.
type Sealer struct {
	aead map[byte]cipher.AEAD
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
// from the handle key. Each kind has its own keys and is bound into the
// additional data, so a handle of one kind never opens as another.
func New(key []byte, domain string, kinds []byte) (Sealer, error) {
	h := Sealer{aead: map[byte]cipher.AEAD{}}
	nonceKeys := map[byte][]byte{}
	for _, k := range kinds {
		ek, err := hkdf.Key(sha256.New, key, nil, "warden "+domain+" handle v2 aead "+string(k), chacha20poly1305.KeySize)
		if err != nil {
			return Sealer{}, fmt.Errorf("derive handle key: %w", err)
		}
		nk, err := hkdf.Key(sha256.New, key, nil, "warden "+domain+" handle v2 nonce "+string(k), 32)
		if err != nil {
			return Sealer{}, fmt.Errorf("derive handle key: %w", err)
		}
		a, err := chacha20poly1305.NewX(ek)
		if err != nil {
			return Sealer{}, fmt.Errorf("handle cipher: %w", err)
		}
		h.aead[k], nonceKeys[k] = a, nk
	}
	h.scratch = &sync.Pool{New: func() any {
		s := &scratch{mac: make(map[byte]hash.Hash, len(kinds))}
		for k, nk := range nonceKeys {
			s.mac[k] = hmac.New(sha256.New, nk)
		}
		return s
	}}
	return h, nil
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

func (h Sealer) put(sc *scratch) {
	if cap(sc.plain) <= maxScratch && cap(sc.raw) <= maxScratch && cap(sc.ad) <= maxScratch {
		h.scratch.Put(sc)
	}
}

// SealIn is Seal for the kinds also bound to an upstream session.
func (h Sealer) SealIn(kind byte, principal, session, id string) string {
	a := h.aead[kind]
	sc := h.scratch.Get().(*scratch)
	defer h.put(sc)
	sc.ad = appendAdditional(sc.ad[:0], kind, principal, session)
	sc.plain = append(sc.plain[:0], id...)
	nonce := sc.syntheticNonce(kind, sc.ad, sc.plain)
	sc.raw = append(sc.raw[:0], nonce...)
	sc.raw = a.Seal(sc.raw, nonce, sc.plain, sc.ad)
	out := append(sc.plain[:0], Prefix...)
	sc.plain = base64.RawURLEncoding.AppendEncode(out, sc.raw)
	return string(sc.plain)
}

// OpenIn is Open for the kinds also bound to an upstream session.
func (h Sealer) OpenIn(kind byte, principal, session, handle string) (id string, ok bool) {
	a, known := h.aead[kind]
	rest, found := strings.CutPrefix(handle, Prefix)
	if !known || !found {
		return "", false
	}
	sc := h.scratch.Get().(*scratch)
	defer h.put(sc)
	sc.plain = append(sc.plain[:0], rest...)
	raw, err := base64.RawURLEncoding.Strict().AppendDecode(sc.raw[:0], sc.plain)
	sc.raw = raw
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+a.Overhead() {
		return "", false
	}
	nonce, sealed := raw[:chacha20poly1305.NonceSizeX], raw[chacha20poly1305.NonceSizeX:]
	sc.ad = appendAdditional(sc.ad[:0], kind, principal, session)
	plain, err := a.Open(sc.plain[:0], nonce, sealed, sc.ad)
	if err != nil {
		return "", false
	}
	sc.plain = plain
	if !hmac.Equal(nonce, sc.syntheticNonce(kind, sc.ad, plain)) {
		return "", false
	}
	return string(plain), true
}

// LoadKey reads the handle key file, or makes a random key when path is "".
func LoadKey(path string) ([]byte, error) {
	if path == "" {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k, nil
	}
	k, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read handle key: %w", err)
	}
	k = bytes.TrimSpace(k)
	if len(k) < 32 {
		return nil, fmt.Errorf("handle key %s: %d bytes, need at least 32", path, len(k))
	}
	return k, nil
}
