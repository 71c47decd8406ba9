package authn

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"
)

// maxTokenBytes bounds a bearer JWT; anything longer is refused unparsed.
const maxTokenBytes = 64 << 10

// verified is a cached verification result.
type verified struct {
	token    string // the exact token, compared on every hit
	p        Principal
	expires  time.Time // exp + leeway: past it the token is expired
	recheck  time.Time // verification time + JWKS refresh interval: past it the token is verified again
	gen      uint64    // key generation it was verified under
	hmacOnly bool      // verified with the HMAC secret, which never changes
}

// jwtVerifier authenticates bearer JWTs.
type jwtVerifier struct {
	algs     []jose.SignatureAlgorithm
	issuer   string
	audience jwt.Audience
	leeway   time.Duration
	grace    time.Duration
	claim    string
	// types are the allowed typ headers, read by mediaType; nil: typ is
	// not checked. verify checks them, so every cached verification passed
	// them; a reload builds another verifier, and cache.
	types   []string
	hmacKey []byte     // nil unless HS* algorithms are allowed
	keys    *keySource // nil if only HS* algorithms are allowed
	// bound is what of the configuration a token was accepted under an
	// anchor binds besides the key: the issuer, principal claim, audiences
	// and types checked.
	bound     []byte
	seed      maphash.Seed
	cache     *lru.Cache[uint64, *verified] // keyed by maphash of the token under seed
	now       func() time.Time
	noBearer  error
	malformed error
}

// newJWTVerifier builds a verifier from a validated, defaulted config. A JWKS
// file is loaded now; a JWKS URL on first use.
func newJWTVerifier(cfg JWTConfig, client *http.Client, now func() time.Time, log *slog.Logger) (*jwtVerifier, error) {
	v := &jwtVerifier{
		issuer:    cfg.Issuer,
		audience:  jwt.Audience(cfg.Audience),
		leeway:    cfg.Leeway,
		grace:     cfg.JWKSStaleGrace,
		claim:     cfg.PrincipalClaim,
		now:       now,
		noBearer:  fail(jwtWhere, ErrNoCredentials, CauseMissing, "no bearer token"),
		malformed: fail(jwtWhere, ErrInvalidCredentials, CauseMalformed, "malformed token"),
	}
	aud := slices.Clone(cfg.Audience)
	slices.Sort(aud)
	v.bound = []byte("iss\x00" + cfg.Issuer + "\x00claim\x00" + cfg.PrincipalClaim + "\x00aud\x00" + strings.Join(aud, "\x00") + "\x00")
	for _, typ := range cfg.Types {
		v.types = append(v.types, mediaType(typ))
	}
	if len(v.types) > 0 {
		// Only when set, so that the anchors sealed before types existed
		// still hold.
		v.bound = append(v.bound, "typ\x00"+strings.Join(slices.Compact(slices.Sorted(slices.Values(v.types))), "\x00")+"\x00"...)
	}
	minSecret := 0
	for _, alg := range cfg.Algorithms {
		v.algs = append(v.algs, jose.SignatureAlgorithm(alg))
		minSecret = max(minSecret, hmacMinKeyLen(alg))
	}
	if cfg.HMACSecretFile != "" {
		b, err := os.ReadFile(cfg.HMACSecretFile)
		if err != nil {
			return nil, fmt.Errorf("jwt.hmac_secret_file: %w", err)
		}
		v.hmacKey = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(v.hmacKey) < minSecret {
			return nil, fmt.Errorf("jwt.hmac_secret_file: secret is %d bytes, the allowed algorithms need at least %d", len(v.hmacKey), minSecret)
		}
	}

	cache, err := lru.New[uint64, *verified](cfg.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("jwt.cache_size: %w", err)
	}
	v.cache = cache
	v.seed = maphash.MakeSeed()

	src := &keySource{ttl: cfg.JWKSRefresh, grace: cfg.JWKSStaleGrace, now: now, log: log}
	switch {
	case cfg.JWKSFile != "":
		src.fetch, src.where = fileFetcher(cfg.JWKSFile), cfg.JWKSFile
		set, err := src.get(context.Background(), false)
		if err != nil {
			return nil, fmt.Errorf("jwt.jwks_file: %w", err)
		}
		if len(set.keys) == 0 {
			// At start an empty file is a configuration mistake; later it
			// means the keys were withdrawn.
			return nil, fmt.Errorf("jwt.jwks_file: no usable signature keys among %d", set.published)
		}
	case cfg.JWKSURL != "":
		src.fetch, src.where = urlFetcher(client, cfg.JWKSURL), cfg.JWKSURL
	default:
		src = nil
	}
	v.keys = src
	return v, nil
}

// authenticate verifies c.Bearer as a JWT, answering from the cache when it can.
//
// The cache is keyed by a 64-bit maphash of the token under a random
// per-Authenticator seed, and a hit counts only if the stored token equals the
// presented one. Hashing a ~800-byte RS256 token with SHA-256 costs ~0.8 µs on
// the target hardware, maphash ~0.1 µs. Nobody who lacks the seed can aim a
// token at an entry, so the plain comparison leaks nothing useful and a
// collision only costs a miss.
func (v *jwtVerifier) authenticate(ctx context.Context, c Credentials) (Principal, error) {
	if c.Bearer == "" {
		return Principal{}, v.noBearer
	}
	key := maphash.String(v.seed, c.Bearer)
	now := v.now()
	if e, ok := v.cache.Get(key); ok && e.token == c.Bearer {
		if now.After(e.expires) {
			v.cache.Remove(key)
			return Principal{}, fail(jwtWhere, ErrExpired, CauseExpired, "exp "+e.p.Expiry.UTC().Format(time.RFC3339))
		}
		if now.Before(e.recheck) && (e.hmacOnly || e.gen == v.keys.generation()) {
			return e.p, nil
		}
	}
	e, err := v.verify(ctx, c.Bearer, now)
	if err != nil {
		return Principal{}, err
	}
	v.cache.Add(key, e)
	return e.p, nil
}

// verify checks a token's form, signature and claims.
func (v *jwtVerifier) verify(ctx context.Context, token string, now time.Time) (*verified, error) {
	if len(token) > maxTokenBytes || !compactJWS(token) {
		return nil, v.malformed
	}
	jws, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		if alg, ok := headerAlg(token); ok && !slices.Contains(v.algs, jose.SignatureAlgorithm(alg)) {
			return nil, fail(jwtWhere, ErrInvalidCredentials, CauseAlgorithm, "algorithm "+strconv.Quote(alg)+" not allowed")
		}
		return nil, fail(jwtWhere, ErrInvalidCredentials, CauseMalformed, err.Error())
	}
	if len(jws.Signatures) != 1 {
		return nil, v.malformed
	}
	h := jws.Signatures[0].Header
	if _, ok := h.ExtraHeaders["b64"]; ok {
		return nil, fail(jwtWhere, ErrInvalidCredentials, CauseMalformed, "b64 header not allowed in a JWT")
	}
	alg := h.Algorithm

	var payload []byte
	var gen uint64
	var anchor string
	hmacOnly := false
	if hmacMinKeyLen(alg) > 0 {
		// Only the configured secret ever verifies an HMAC token: a JWKS key
		// is never used as an HMAC secret.
		if v.hmacKey == nil {
			return nil, fail(jwtWhere, ErrInvalidCredentials, CauseAlgorithm, "algorithm "+alg+" not allowed")
		}
		payload, err = jws.Verify(v.hmacKey)
		if err != nil {
			return nil, errBadSignature
		}
		hmacOnly, anchor = true, v.anchor("hs", v.hmacKey)
	} else {
		if v.keys == nil {
			return nil, fail(jwtWhere, ErrInvalidCredentials, CauseAlgorithm, "algorithm "+alg+" not allowed")
		}
		gen = v.keys.generation()
		var thumb string
		payload, thumb, err = v.verifyWithJWKS(ctx, jws, h.KeyID, alg)
		if err != nil {
			return nil, err
		}
		anchor = v.anchor("jwk", []byte(thumb))
	}
	// The protected header, which the signature just verified.
	if err := v.checkType(jws.Signatures[0].Protected); err != nil {
		return nil, err
	}

	claims, std, err := parseClaims(payload)
	if err != nil {
		return nil, fail(jwtWhere, ErrInvalidCredentials, CauseClaims, "claims: "+err.Error())
	}
	if std.Expiry == nil {
		return nil, fail(jwtWhere, ErrInvalidCredentials, CauseClaims, "no exp claim")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: v.audience, Time: now}, v.leeway); err != nil {
		if errors.Is(err, jwt.ErrExpired) {
			return nil, fail(jwtWhere, ErrExpired, CauseExpired, "exp "+std.Expiry.Time().UTC().Format(time.RFC3339))
		}
		return nil, fail(jwtWhere, ErrInvalidCredentials, claimCause(err), strings.TrimPrefix(err.Error(), "go-jose/go-jose/jwt: "))
	}
	id, _ := claims[v.claim].(string)
	if id == "" {
		return nil, fail(jwtWhere, ErrInvalidCredentials, CauseClaims, "no "+v.claim+" claim")
	}
	exp := std.Expiry.Time()
	return &verified{
		token:    strings.Clone(token),
		p:        Principal{ID: id, Method: string(MethodJWT), Claims: claims, Expiry: exp, Anchor: anchor},
		expires:  exp.Add(v.leeway),
		recheck:  now.Add(v.recheckAfter()),
		gen:      gen,
		hmacOnly: hmacOnly,
	}, nil
}

// checkType holds a verified protected header's typ to the configured
// types (RFC 8725 §3.11): a token the issuer signed for another purpose (an
// OpenID Connect ID token, typ JWT or none; a logout token) for the same
// audience is not an access token.
func (v *jwtVerifier) checkType(h jose.Header) error {
	if v.types == nil {
		return nil
	}
	raw, present := h.ExtraHeaders[jose.HeaderType]
	typ, ok := raw.(string)
	switch {
	case !present:
		return fail(jwtWhere, ErrInvalidCredentials, CauseType, "no typ header (jwt.types is set)")
	case !ok:
		return fail(jwtWhere, ErrInvalidCredentials, CauseType, "typ is not a string")
	case !slices.Contains(v.types, mediaType(typ)):
		return fail(jwtWhere, ErrInvalidCredentials, CauseType, "typ "+strconv.Quote(typ)+" not among jwt.types")
	}
	return nil
}

// recheckAfter is how long a cached verification stands before the token is
// verified again against the key set: the JWKS refresh interval, so that a
// key removed from the JWKS stops working within jwks_refresh (a cache hit
// alone never reads the key set).
func (v *jwtVerifier) recheckAfter() time.Duration {
	if v.keys != nil && v.keys.ttl < v.grace {
		return v.keys.ttl
	}
	return v.grace
}

// verifyWithJWKS checks the signature with the JWKS key the token names (by
// kid, or every key fitting alg when it names none), refreshing the JWKS once
// if no key fits, and returns the payload and the verifying key's RFC 7638
// thumbprint.
func (v *jwtVerifier) verifyWithJWKS(ctx context.Context, jws *jose.JSONWebSignature, kid, alg string) ([]byte, string, error) {
	set, err := v.keys.get(ctx, false)
	if err != nil {
		return nil, "", fmt.Errorf("verify jwt: %w", err)
	}
	keys := set.candidates(kid, alg)
	if len(keys) == 0 {
		set, err = v.keys.get(ctx, true)
		if err != nil {
			return nil, "", fmt.Errorf("verify jwt: unknown key: %w", err)
		}
		keys = set.candidates(kid, alg)
	}
	if len(set.keys) == 0 {
		return nil, "", fmt.Errorf("verify jwt: %w: the JWKS has no usable keys (withdrawn by the issuer)", ErrInvalidCredentials)
	}
	if len(keys) == 0 {
		return nil, "", fail(jwtWhere, ErrInvalidCredentials, CauseUnknownKeyID, fmt.Sprintf("no key for kid %q and alg %s", kid, alg))
	}
	for _, k := range keys {
		if payload, err := jws.Verify(k.key); err == nil {
			return payload, k.thumb, nil
		}
	}
	return nil, "", errBadSignature
}

// anchor is what a token verified under this configuration is anchored to
// (Principal.Anchor): a SHA-256 over the issuer, principal claim,
// audiences and types checked and the key that verified it (kind "jwk": its RFC
// 7638 thumbprint, so a kid that names another key later is another
// anchor; "hs": the HMAC secret).
func (v *jwtVerifier) anchor(kind string, key []byte) string {
	h := sha256.New()
	h.Write(v.bound)
	h.Write([]byte(kind + "\x00"))
	h.Write(key)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// holds reports whether a token anchored to g.Anchor would still be
// accepted as to its key and the configuration: the issuer, principal
// claim, audiences and types configured now are those it was accepted under, and
// its key is the HMAC secret configured now or in the JWKS as last fetched
// (cached: a withdrawal is seen once a request's token has Warden fetch the
// JWKS again). When nothing was fetched since the configuration was loaded
// (a start or reload with no request since), the set is fetched within ctx,
// as a request's token would have it fetched; when it cannot be, the answer
// is ErrKeysUnavailable: undecided.
func (v *jwtVerifier) holds(ctx context.Context, g Grant, _ ClientCAs) error {
	if g.Anchor != "" && v.hmacKey != nil && g.Anchor == v.anchor("hs", v.hmacKey) {
		return nil
	}
	if g.Anchor != "" && v.keys != nil {
		set := v.keys.cached()
		if set == nil {
			var err error
			if set, err = v.keys.get(ctx, false); err != nil {
				return fail(jwtWhere, ErrKeysUnavailable, CauseKeysUnavailable, "no JWKS could be fetched since the configuration was loaded ("+v.keys.where+"): "+err.Error())
			}
		}
		for _, k := range set.keys {
			if v.anchor("jwk", []byte(k.thumb)) == g.Anchor {
				return nil
			}
		}
	}
	return fail(jwtWhere, ErrInvalidCredentials, CauseUnknownKeyID, "the key that verified the token is no longer in the JWKS, or the configured issuer, principal claim, audiences or types changed")
}

// jwtWhere prefixes the JWT verifier's errors.
const jwtWhere = "verify jwt"

// errBadSignature is a token whose signature no fitting key verifies.
var errBadSignature = fail(jwtWhere, ErrInvalidCredentials, CauseSignature, "bad signature")

// claimCause classifies a registered-claim check that failed for a reason
// other than expiry.
func claimCause(err error) Cause {
	switch {
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return CauseNotYetValid
	case errors.Is(err, jwt.ErrInvalidAudience):
		return CauseAudience
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return CauseIssuer
	}
	return CauseClaims
}

// headerAlg reads the alg of a compact JWS's protected header, to tell a
// token whose algorithm is not allowed from one that does not parse.
func headerAlg(token string) (string, bool) {
	seg, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &h) != nil || h.Alg == "" {
		return "", false
	}
	return h.Alg, true
}

// parseClaims decodes the payload once into the claims map the policy sees
// and derives the registered claims from that same map, so that both agree.
func parseClaims(payload []byte) (map[string]any, jwt.Claims, error) {
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return nil, jwt.Claims{}, errors.New("not a JSON object")
	}
	var std jwt.Claims
	var ok bool
	if std.Issuer, ok = optString(claims, "iss"); !ok {
		return nil, std, errors.New("iss is not a string")
	}
	if std.Subject, ok = optString(claims, "sub"); !ok {
		return nil, std, errors.New("sub is not a string")
	}
	switch aud := claims["aud"].(type) {
	case nil:
	case string:
		std.Audience = jwt.Audience{aud}
	case []any:
		for _, a := range aud {
			s, ok := a.(string)
			if !ok {
				return nil, std, errors.New("aud is not a string or a list of strings")
			}
			std.Audience = append(std.Audience, s)
		}
	default:
		return nil, std, errors.New("aud is not a string or a list of strings")
	}
	for _, d := range []struct {
		name string
		dst  **jwt.NumericDate
	}{{"exp", &std.Expiry}, {"nbf", &std.NotBefore}, {"iat", &std.IssuedAt}} {
		raw, present := claims[d.name]
		if !present {
			continue
		}
		f, ok := raw.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1<<40 {
			return nil, std, fmt.Errorf("%s is not a valid NumericDate", d.name)
		}
		sec, frac := math.Modf(f)
		*d.dst = jwt.NewNumericDate(time.Unix(int64(sec), int64(frac*1e9)))
	}
	return claims, std, nil
}

// optString returns claims[name] as a string; ok is false if present but not a string.
func optString(claims map[string]any, name string) (string, bool) {
	raw, present := claims[name]
	if !present {
		return "", true
	}
	s, ok := raw.(string)
	return s, ok
}

// compactJWS reports whether s has the exact form of a JWS compact
// serialization: three canonical unpadded base64url segments joined by dots.
// It refuses the slack the base64 decoder allows (line breaks, non-zero
// padding bits), so that one signed token has exactly one string form.
func compactJWS(s string) bool {
	header, rest, ok := strings.Cut(s, ".")
	if !ok {
		return false
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	return canonicalB64URL(header) && header != "" &&
		canonicalB64URL(payload) && payload != "" &&
		canonicalB64URL(sig) && sig != ""
}

// canonicalB64URL reports whether s is canonical unpadded base64url.
func canonicalB64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		if b64Value(s[i]) < 0 {
			return false
		}
	}
	switch len(s) % 4 {
	case 1:
		return false
	case 2:
		return b64Value(s[len(s)-1])&0x0f == 0
	case 3:
		return b64Value(s[len(s)-1])&0x03 == 0
	}
	return true
}

// b64Value returns the value of a base64url character, or -1.
func b64Value(c byte) int {
	switch {
	case 'A' <= c && c <= 'Z':
		return int(c - 'A')
	case 'a' <= c && c <= 'z':
		return int(c-'a') + 26
	case '0' <= c && c <= '9':
		return int(c-'0') + 52
	case c == '-':
		return 62
	case c == '_':
		return 63
	}
	return -1
}
