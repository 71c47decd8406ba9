package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// handlePrefix marks Warden's handles: "wt1." + base64url(upstream ID) + "."
// + base64url(tag).
const handlePrefix = "wt1."

// handles turns upstream identifiers (task IDs, MCP session IDs) into handles
// bound to one principal, and back. A handle is the upstream ID with an
// HMAC-SHA256 tag over the principal and the ID: only the principal it was
// given to can use it, and any Warden replica holding the same key can check
// it, before and after a restart, with no state.
type handles struct {
	key []byte
}

func (h handles) tag(kind byte, principal, id string) []byte {
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte{kind})
	mac.Write([]byte(principal))
	mac.Write([]byte{0})
	mac.Write([]byte(id))
	return mac.Sum(nil)[:16]
}

// Kinds of identifier, so a session handle is never accepted as a task's.
const (
	kindTask    = 't'
	kindSession = 's'
)

// seal returns principal's handle for the upstream id.
func (h handles) seal(kind byte, principal, id string) string {
	enc := base64.RawURLEncoding
	return handlePrefix + enc.EncodeToString([]byte(id)) + "." + enc.EncodeToString(h.tag(kind, principal, id))
}

// open returns the upstream id of principal's handle; ok is false for
// anything else (another principal's handle, a forged or garbled one, a raw
// upstream ID).
func (h handles) open(kind byte, principal, handle string) (id string, ok bool) {
	rest, found := strings.CutPrefix(handle, handlePrefix)
	if !found {
		return "", false
	}
	b64, tag64, found := strings.Cut(rest, ".")
	if !found {
		return "", false
	}
	enc := base64.RawURLEncoding
	raw, err := enc.DecodeString(b64)
	if err != nil {
		return "", false
	}
	tag, err := enc.DecodeString(tag64)
	if err != nil || !hmac.Equal(tag, h.tag(kind, principal, string(raw))) {
		return "", false
	}
	return string(raw), true
}
