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
	"os"
	"strings"

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
// key, one pair per domain and kind; any replica holding the key opens a
// handle, before and after a restart, with no state.
type Sealer struct {
	aead  map[byte]cipher.AEAD
	nonce map[byte][]byte // HMAC keys of the synthetic nonces
}

// New derives the keys of each kind of identifier of domain ("mcp", "a2a")
// from the handle key. Each kind has its own keys and is bound into the
// additional data, so a handle of one kind never opens as another.
func New(key []byte, domain string, kinds []byte) (Sealer, error) {
	h := Sealer{aead: map[byte]cipher.AEAD{}, nonce: map[byte][]byte{}}
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
		h.aead[k], h.nonce[k] = a, nk
	}
	return h, nil
}

// additional is the data a handle is bound to: version, kind, principal and
// session, each length-prefixed so no two bindings read alike.
func additional(kind byte, principal, session string) []byte {
	ad := make([]byte, 0, 4+2*binary.MaxVarintLen64+len(principal)+len(session))
	ad = append(ad, "wt2"...)
	ad = append(ad, kind)
	ad = binary.AppendUvarint(ad, uint64(len(principal)))
	ad = append(ad, principal...)
	ad = binary.AppendUvarint(ad, uint64(len(session)))
	return append(ad, session...)
}

func (h Sealer) syntheticNonce(kind byte, ad []byte, id string) []byte {
	mac := hmac.New(sha256.New, h.nonce[kind])
	mac.Write(ad)
	mac.Write([]byte(id))
	return mac.Sum(nil)[:chacha20poly1305.NonceSizeX]
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

// SealIn is Seal for the kinds also bound to an upstream session.
func (h Sealer) SealIn(kind byte, principal, session, id string) string {
	a := h.aead[kind]
	ad := additional(kind, principal, session)
	nonce := h.syntheticNonce(kind, ad, id)
	out := make([]byte, 0, len(nonce)+len(id)+a.Overhead())
	out = append(out, nonce...)
	out = a.Seal(out, nonce, []byte(id), ad)
	return Prefix + base64.RawURLEncoding.EncodeToString(out)
}

// OpenIn is Open for the kinds also bound to an upstream session.
func (h Sealer) OpenIn(kind byte, principal, session, handle string) (id string, ok bool) {
	a, known := h.aead[kind]
	rest, found := strings.CutPrefix(handle, Prefix)
	if !known || !found {
		return "", false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+a.Overhead() {
		return "", false
	}
	nonce, sealed := raw[:chacha20poly1305.NonceSizeX], raw[chacha20poly1305.NonceSizeX:]
	ad := additional(kind, principal, session)
	plain, err := a.Open(nil, nonce, sealed, ad)
	if err != nil || !hmac.Equal(nonce, h.syntheticNonce(kind, ad, string(plain))) {
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
