package authn

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// minRefreshInterval is the shortest time between two JWKS fetches, whatever
	// triggers them (expiry, an unknown kid, an earlier failure).
	minRefreshInterval = 10 * time.Second
	// fetchTimeout bounds one JWKS fetch, which runs on its own, not under
	// the context of the caller that triggered it.
	fetchTimeout = 10 * time.Second
	// maxJWKSBytes bounds a JWKS document.
	maxJWKSBytes = 1 << 20
	// minRSABits is the smallest RSA key accepted from a JWKS (RFC 7518 §3.3).
	minRSABits = 2048
)

// publicKey is one usable verification key from a JWKS.
type publicKey struct {
	kid   string
	alg   string // the JWK's alg, "" if it names none
	key   any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	thumb string // RFC 7638 thumbprint, to notice removed keys
}

// keySet is one fetched JWKS.
type keySet struct {
	keys      []publicKey
	published int // keys in the document, usable or not
	fetched   time.Time
}

// candidates returns the keys that may verify a token signed with alg and
// naming kid ("" if the token names none).
func (s *keySet) candidates(kid, alg string) []publicKey {
	var out []publicKey
	for _, k := range s.keys {
		if kid != "" && k.kid != kid {
			continue
		}
		if k.alg != "" && k.alg != alg {
			continue
		}
		if keyFits(k.key, alg) {
			out = append(out, k)
		}
	}
	return out
}

// keyFits reports whether a public key of this type can verify alg, so that
// no key is ever used with an algorithm of another family.
func keyFits(key any, alg string) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return k.Curve == elliptic.P256()
		case "ES384":
			return k.Curve == elliptic.P384()
		case "ES512":
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// keySource fetches, caches and refreshes a JWKS. Refreshes are triggered on
// the request path, one at a time and at most once per minRefreshInterval;
// while one runs, callers holding usable keys keep using them and the others
// wait for its result or until they give up. A refresh runs to its end
// (within timeout) whether or not the caller that triggered it is still
// there, so callers that hang up cannot make Warden fetch again and again.
type keySource struct {
	fetch   func(ctx context.Context) ([]byte, error)
	where   string // the file or URL, for errors and logs
	ttl     time.Duration
	grace   time.Duration
	timeout time.Duration // bounds one fetch; 0 means fetchTimeout
	now     func() time.Time
	log     *slog.Logger

	// gen counts key removals; a cached token verified under an older
	// generation is verified again.
	gen atomic.Uint64

	mu          sync.Mutex
	set         *keySet       // the newest good key set, nil before the first success
	inflight    chan struct{} // closed when the running refresh ends; nil if none runs
	lastAttempt time.Time     // start of the last refresh
	lastErr     error         // error of the last refresh, nil if it succeeded
}

// fileFetcher reads a JWKS from disk.
func fileFetcher(path string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if len(b) > maxJWKSBytes {
			return nil, fmt.Errorf("larger than %d bytes", maxJWKSBytes)
		}
		return b, nil
	}
}

// urlFetcher GETs a JWKS with client, under the caller's context. It
// follows a redirect only to where jwt.jwks_url may point (checkJWKSURL), so
// that an https URL redirecting to plain http elsewhere serves no keys.
func urlFetcher(client *http.Client, url string) func(context.Context) ([]byte, error) {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkJWKSURL(req.URL.String()); err != nil {
			return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	client = &c
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/jwk-set+json, application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return nil, fmt.Errorf("status %s", resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxJWKSBytes {
			return nil, fmt.Errorf("larger than %d bytes", maxJWKSBytes)
		}
		return b, nil
	}
}

// generation returns the current key generation; 0 for a nil source.
func (s *keySource) generation() uint64 {
	if s == nil {
		return 0
	}
	return s.gen.Load()
}

// cached returns the newest key set fetched, whatever its age, without
// fetching; nil before the first success.
func (s *keySource) cached() *keySet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

// get returns the key set to verify with. With force (the token's key was not
// found), it refreshes even a fresh set, at most once per minRefreshInterval,
// and reports a failed refresh as an error instead of falling back to the old
// keys. Without force, a refresh that fails falls back to the old keys while
// they are within the stale grace.
func (s *keySource) get(ctx context.Context, force bool) (*keySet, error) {
	for {
		s.mu.Lock()
		now := s.now()
		set := s.set
		fresh := set != nil && now.Sub(set.fetched) < s.ttl
		usable := set != nil && now.Sub(set.fetched) < s.ttl+s.grace
		if fresh && !force {
			s.mu.Unlock()
			return set, nil
		}
		if ch := s.inflight; ch != nil {
			s.mu.Unlock()
			if usable && !force {
				return set, nil
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("jwks %s: %w: %v", s.where, ErrKeysUnavailable, ctx.Err())
			}
		}
		if !s.lastAttempt.IsZero() && now.Sub(s.lastAttempt) < minRefreshInterval {
			lastErr := s.lastErr
			s.mu.Unlock()
			// After a failed refresh, a missing key cannot be decided.
			if usable && (!force || lastErr == nil) {
				return set, nil
			}
			if lastErr == nil {
				lastErr = errors.New("no keys")
			}
			return nil, fmt.Errorf("jwks %s: %w: %v", s.where, ErrKeysUnavailable, lastErr)
		}
		ch := s.refresh(ctx, now)
		select {
		case <-ch:
			// Its result is read on the next turn.
		case <-ctx.Done():
			return nil, fmt.Errorf("jwks %s: %w: %v", s.where, ErrKeysUnavailable, ctx.Err())
		}
	}
}

// refresh starts fetching a new key set, detached from the caller's
// cancellation, and returns a channel closed when it is recorded. It is
// called with s.mu held and releases it.
func (s *keySource) refresh(ctx context.Context, now time.Time) <-chan struct{} {
	ch := make(chan struct{})
	s.inflight = ch
	s.lastAttempt = now
	s.mu.Unlock()
	timeout := s.timeout
	if timeout <= 0 {
		timeout = fetchTimeout
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	run := func() {
		defer cancel()
		next, err := s.load(fctx)
		s.record(next, err)
		close(ch)
	}
	if ctx.Done() == nil {
		// A caller that cannot leave (New's first load) waits here: no
		// goroutine to outlive it.
		run()
		return ch
	}
	go run()
	return ch
}

// record keeps the outcome of a refresh.
func (s *keySource) record(next *keySet, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = nil
	now := s.now()
	if err != nil {
		s.lastErr = err
		if old := s.set; old != nil && now.Sub(old.fetched) < s.ttl+s.grace {
			s.log.Warn("authn: jwks refresh failed; using cached keys for tokens they verify",
				"jwks", s.where, "error", err.Error(), "keys_age", now.Sub(old.fetched).String())
		} else {
			s.log.Warn("authn: jwks refresh failed", "jwks", s.where, "error", err.Error())
		}
		return
	}
	next.fetched = now
	if removedKeys(s.set, next) {
		s.gen.Add(1)
	}
	s.set = next
	s.lastErr = nil
	if len(next.keys) == 0 {
		s.log.Warn("authn: jwks has no usable signature keys; every token it would verify is refused until the issuer publishes keys",
			"jwks", s.where, "published", next.published)
		return
	}
	s.log.Debug("authn: jwks refreshed", "jwks", s.where, "keys", len(next.keys))
}

// load fetches and parses the JWKS.
func (s *keySource) load(ctx context.Context) (*keySet, error) {
	b, err := s.fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return parseJWKS(b, s.log)
}

// removedKeys reports whether next lacks a key that old had.
func removedKeys(old, next *keySet) bool {
	if old == nil {
		return false
	}
	have := make(map[string]bool, len(next.keys))
	for _, k := range next.keys {
		have[k.kid+"\x00"+k.thumb] = true
	}
	for _, k := range old.keys {
		if !have[k.kid+"\x00"+k.thumb] {
			return true
		}
	}
	return false
}

// parseJWKS extracts the usable signature-verification keys of a JWKS. Keys
// it cannot use (encryption keys, symmetric keys, unknown types, short RSA
// keys) are skipped. A document that is not a JWKS (not JSON, no "keys"
// array) is an error, like a failed download; a valid JWKS with no usable key
// is an empty set, not an error: the issuer has withdrawn its keys, and no
// token verifies from then on (falling back to the old keys would keep a
// withdrawn key verifying for jwks_refresh + jwks_stale_grace).
func parseJWKS(b []byte, log *slog.Logger) (*keySet, error) {
	var raw struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse jwks: %w", err)
	}
	if raw.Keys == nil {
		return nil, errors.New(`parse jwks: no "keys" array`)
	}
	set := &keySet{}
	for i, r := range *raw.Keys {
		k, why := usableKey(r)
		if why != "" {
			log.Debug("authn: jwks key skipped", "index", i, "reason", why)
			continue
		}
		set.keys = append(set.keys, k)
	}
	set.published = len(*raw.Keys)
	return set, nil
}

// usableKey converts one JWK, or says why it is skipped.
func usableKey(r json.RawMessage) (publicKey, string) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(r); err != nil {
		return publicKey{}, err.Error()
	}
	if k.Use != "" && k.Use != "sig" {
		return publicKey{}, "use is " + k.Use
	}
	if !k.IsPublic() {
		k = k.Public()
	}
	switch pk := k.Key.(type) {
	case *rsa.PublicKey:
		if pk.N.BitLen() < minRSABits {
			return publicKey{}, fmt.Sprintf("rsa key of %d bits", pk.N.BitLen())
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return publicKey{}, fmt.Sprintf("unsupported key type %T", k.Key)
	}
	thumb, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return publicKey{}, err.Error()
	}
	return publicKey{kid: k.KeyID, alg: k.Algorithm, key: k.Key, thumb: string(thumb)}, ""
}
