package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"os"
	"unsafe"
)

// staticToken is one entry of a static token file.
type staticToken struct {
	token []byte
	p     Principal
}

// staticTokens authenticates bearer tokens listed in a file.
type staticTokens struct {
	byHash  map[[sha256.Size]byte]*staticToken
	noToken error
	unknown error
}

// loadStatic reads a token file in the MACP runtime's shape: a JSON list of
// objects with a token, a sender and optional attributes. Unknown keys are
// kept as attributes; duplicate tokens are an error. Error messages never
// contain a token.
func loadStatic(path string) (*staticTokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("static.tokens_file: %w", err)
	}
	var entries []map[string]any
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("static.tokens_file %s: want a JSON list of token objects: %v", path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("static.tokens_file %s: no tokens", path)
	}
	s := &staticTokens{
		byHash:  make(map[[sha256.Size]byte]*staticToken, len(entries)),
		noToken: fail("static token", ErrNoCredentials, CauseMissing, "no bearer token"),
		unknown: fail("static token", ErrInvalidCredentials, CauseUnknownToken, "unknown token"),
	}
	index := make(map[[sha256.Size]byte]int, len(entries))
	for i, e := range entries {
		if err := checkStaticEntry(e); err != nil {
			return nil, fmt.Errorf("static.tokens_file %s: entry %d: %w", path, i, err)
		}
		tok := e["token"].(string)
		h := sha256.Sum256([]byte(tok))
		if j, dup := index[h]; dup {
			return nil, fmt.Errorf("static.tokens_file %s: entry %d: same token as entry %d", path, i, j)
		}
		index[h] = i
		attrs := make(map[string]any, len(e)-1)
		for k, v := range e {
			if k != "token" {
				attrs[k] = v
			}
		}
		s.byHash[h] = &staticToken{
			token: []byte(tok),
			p:     Principal{ID: e["sender"].(string), Method: string(MethodStatic), Claims: attrs},
		}
	}
	return s, nil
}

// checkStaticEntry checks the keys the MACP runtime defines; others pass through.
func checkStaticEntry(e map[string]any) error {
	if e == nil {
		return fmt.Errorf("not an object")
	}
	for _, k := range []string{"token", "sender"} {
		if s, ok := e[k].(string); !ok || s == "" {
			return fmt.Errorf("%s: must be a non-empty string", k)
		}
	}
	for _, k := range []string{"can_start_sessions", "can_manage_mode_registry", "is_observer"} {
		if v, ok := e[k]; ok {
			if _, ok := v.(bool); !ok {
				return fmt.Errorf("%s: must be a boolean", k)
			}
		}
	}
	if v, ok := e["max_open_sessions"]; ok && v != nil {
		if f, ok := v.(float64); !ok || f < 0 || f != float64(int64(f)) {
			return fmt.Errorf("max_open_sessions: must be a non-negative integer")
		}
	}
	if v, ok := e["allowed_modes"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("allowed_modes: must be a list of strings")
		}
		for _, m := range list {
			if _, ok := m.(string); !ok {
				return fmt.Errorf("allowed_modes: must be a list of strings")
			}
		}
	}
	return nil
}

// authenticate looks the bearer token up by its hash and compares it in constant time.
func (s *staticTokens) authenticate(_ context.Context, c Credentials) (Principal, error) {
	if c.Bearer == "" {
		return Principal{}, s.noToken
	}
	given := bytesOf(c.Bearer)
	t, ok := s.byHash[sha256.Sum256(given)]
	if !ok || subtle.ConstantTimeCompare(t.token, given) != 1 {
		return Principal{}, s.unknown
	}
	return t.p, nil
}

// bytesOf returns the bytes of s without copying them. The result must only be
// read (it is passed to hashes and comparisons), never written or retained.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
