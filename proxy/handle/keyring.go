package handle

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// MinKeyBytes is the shortest handle key accepted from a file.
const MinKeyBytes = 32

// maxKeyID bounds a key id; ids are [A-Za-z0-9_-]: they travel in handles.
const maxKeyID = 32

// Key is one handle key of a keyring.
type Key struct {
	// ID names the key inside its handles; "" only for the key of a
	// single-key file (its handles carry no id, see Prefix).
	ID     string
	Secret []byte
}

// Keyring is an ordered set of handle keys: the first seals new handles,
// every key opens the handles sealed under it. It is immutable.
type Keyring struct {
	keys []Key
}

// NewKeyring checks keys (at least one; ids unique and well formed; secrets
// of at least MinKeyBytes, all different) and makes a keyring of them.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	ids := map[string]bool{}
	for i, k := range keys {
		if !validID(k.ID) && k.ID != "" {
			return nil, fmt.Errorf("key %d: id %q: want 1 to %d of [A-Za-z0-9_-]", i, k.ID, maxKeyID)
		}
		if ids[k.ID] {
			return nil, fmt.Errorf("key %d: id %q listed twice", i, k.ID)
		}
		ids[k.ID] = true
		if len(k.Secret) < MinKeyBytes {
			return nil, fmt.Errorf("key %q: %d bytes, need at least %d", k.ID, len(k.Secret), MinKeyBytes)
		}
		for _, o := range keys[:i] {
			if bytes.Equal(o.Secret, k.Secret) {
				return nil, fmt.Errorf("keys %q and %q have the same secret", o.ID, k.ID)
			}
		}
	}
	return &Keyring{keys: append([]Key(nil), keys...)}, nil
}

// IDs returns the key ids, the sealing key first.
func (k *Keyring) IDs() []string {
	out := make([]string, len(k.keys))
	for i, x := range k.keys {
		out[i] = x.ID
	}
	return out
}

// validID reports whether id may name a key inside a handle.
func validID(id string) bool {
	if id == "" || len(id) > maxKeyID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// keyringFile is a keyring file: {"keys": [{"id": "2", "secret": "..."}, ...]},
// the sealing key first. A secret is used as its bytes, like a single-key file.
type keyringFile struct {
	Keys []struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	} `json:"keys"`
}

// LoadKeyring reads a handle key file: a keyring ({"keys": [...]}, the
// first key seals) or, as before, a single key (the file's bytes, trimmed),
// which is a one-key ring whose handles carry no id. With path "" it makes a
// random key under a random id, so that a handle from before a restart is
// told apart as sealed under a key Warden no longer has.
func LoadKeyring(path string) (*Keyring, error) {
	if path == "" {
		secret := make([]byte, MinKeyBytes)
		id := make([]byte, 4)
		_, _ = rand.Read(secret)
		_, _ = rand.Read(id)
		return NewKeyring(Key{ID: "r" + hex.EncodeToString(id), Secret: secret})
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read handle key: %w", err)
	}
	b = bytes.TrimSpace(b)
	if !bytes.HasPrefix(b, []byte("{")) {
		k, err := NewKeyring(Key{Secret: b})
		if err != nil {
			return nil, fmt.Errorf("handle key %s: %w", path, err)
		}
		return k, nil
	}
	var f keyringFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("handle keyring %s: %w", path, err)
	}
	keys := make([]Key, len(f.Keys))
	for i, k := range f.Keys {
		keys[i] = Key{ID: k.ID, Secret: []byte(k.Secret)}
	}
	k, err := NewKeyring(keys...)
	if err != nil {
		return nil, fmt.Errorf("handle keyring %s: %w", path, err)
	}
	return k, nil
}

// SingleKey returns a Ring holding one id-less key, as a single-key file does.
func SingleKey(secret []byte) (*Ring, error) {
	k, err := NewKeyring(Key{Secret: secret})
	if err != nil {
		return nil, err
	}
	return NewRing(k), nil
}

// Ring holds the current keyring of one or more Sealers; Set replaces it
// (a reload) and every Sealer built on the Ring seals and opens with the new
// keys from its next handle on. Safe for concurrent use.
type Ring struct {
	cur atomic.Pointer[Keyring]
}

// NewRing returns a Ring holding k.
func NewRing(k *Keyring) *Ring {
	r := &Ring{}
	r.cur.Store(k)
	return r
}

// Set replaces the keyring.
func (r *Ring) Set(k *Keyring) { r.cur.Store(k) }

// Keyring returns the current keyring.
func (r *Ring) Keyring() *Keyring { return r.cur.Load() }

// Reason is why a value did not open as a handle, for the operator (log
// field, decision detail); never sent to the client, which sees only that
// the identifier is unknown.
type Reason string

// The reasons Unseal gives.
const (
	// ReasonRawID: no handle prefix: a raw upstream identifier, or a made-up
	// one, where a handle belongs.
	ReasonRawID Reason = "raw_id"
	// ReasonMalformed: a handle prefix on something that is no handle.
	ReasonMalformed Reason = "malformed_handle"
	// ReasonRetiredKey: a handle sealed under a key Warden no longer has
	// (removed from the keyring, or a random key from before a restart).
	ReasonRetiredKey Reason = "retired_key"
	// ReasonForeign: a handle under a key Warden has that does not open for
	// this principal (and session): another principal's handle, or a forged one.
	ReasonForeign Reason = "foreign_handle"
)

// Error is why a value did not open as a handle.
type Error struct {
	Reason Reason
}

func (e *Error) Error() string {
	switch e.Reason {
	case ReasonRawID:
		return "a raw identifier where a handle belongs"
	case ReasonMalformed:
		return "not a well-formed handle"
	case ReasonRetiredKey:
		return "handle sealed under a key Warden no longer has"
	default:
		return "handle of another principal or session, or forged"
	}
}

// Cause is why err (Unseal's) refused a value, for the operator's log line
// and decision record: its Reason, "" for no error.
func Cause(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return string(e.Reason)
	}
	return string(ReasonMalformed)
}

// The errors Unseal returns (compare with errors.Is, or read Reason with errors.As).
var (
	ErrRawID      = &Error{Reason: ReasonRawID}
	ErrMalformed  = &Error{Reason: ReasonMalformed}
	ErrRetiredKey = &Error{Reason: ReasonRetiredKey}
	ErrForeign    = &Error{Reason: ReasonForeign}
)
