package authn

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Method names one way of authenticating a caller.
type Method string

// The methods a Config can list.
const (
	// MethodJWT verifies a bearer JWT against a JWKS (or a configured HMAC secret).
	MethodJWT Method = "jwt"
	// MethodStatic looks a bearer token up in a static token file.
	MethodStatic Method = "static"
	// MethodMTLS takes the principal from the verified TLS client certificate.
	MethodMTLS Method = "mtls"
	// MethodDev accepts any bearer value as the principal; it requires Config.Insecure.
	MethodDev Method = "dev"
)

// Methods is an ordered list of methods. In YAML or JSON it is written either
// as one string ("jwt") or as a list (["mtls", "jwt"]).
type Methods []Method

// UnmarshalJSON decodes one string or a list of strings.
func (m *Methods) UnmarshalJSON(b []byte) error {
	v, err := oneOrMany[Method](func(dst any) error { return json.Unmarshal(b, dst) })
	*m = v
	return err
}

// UnmarshalYAML decodes one string or a list of strings; it has the signature
// that gopkg.in/yaml.v2, gopkg.in/yaml.v3 and github.com/goccy/go-yaml accept.
func (m *Methods) UnmarshalYAML(unmarshal func(any) error) error {
	v, err := oneOrMany[Method](unmarshal)
	*m = v
	return err
}

// Audience is the list of accepted JWT audiences; a token must name at least
// one. In YAML or JSON it is written either as one string or as a list.
type Audience []string

// UnmarshalJSON decodes one string or a list of strings.
func (a *Audience) UnmarshalJSON(b []byte) error {
	v, err := oneOrMany[string](func(dst any) error { return json.Unmarshal(b, dst) })
	*a = v
	return err
}

// UnmarshalYAML decodes one string or a list of strings.
func (a *Audience) UnmarshalYAML(unmarshal func(any) error) error {
	v, err := oneOrMany[string](unmarshal)
	*a = v
	return err
}

// oneOrMany decodes either a single string or a list of strings.
func oneOrMany[T ~string](decode func(any) error) ([]T, error) {
	var one string
	if err := decode(&one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []T{T(one)}, nil
	}
	var many []string
	if err := decode(&many); err != nil {
		return nil, errors.New("want a string or a list of strings")
	}
	out := make([]T, len(many))
	for i, s := range many {
		out[i] = T(s)
	}
	return out, nil
}

// Config selects and configures the authentication methods.
type Config struct {
	// Mode lists the methods to try, in order; the first that succeeds wins.
	// dev must be the only method.
	Mode Methods `yaml:"mode" json:"mode"`
	// Insecure must be true for dev mode, and widens nothing else: a
	// plain-http jwt.jwks_url is refused unless its host is loopback,
	// whatever insecure says.
	Insecure bool `yaml:"insecure" json:"insecure"`
	// JWT configures MethodJWT.
	JWT JWTConfig `yaml:"jwt" json:"jwt"`
	// Static configures MethodStatic.
	Static StaticConfig `yaml:"static" json:"static"`
	// MTLS configures MethodMTLS.
	MTLS MTLSConfig `yaml:"mtls" json:"mtls"`
}

// JWTConfig configures JWT bearer verification.
type JWTConfig struct {
	// JWKSFile is a JWKS document on disk; exactly one of JWKSFile and JWKSURL
	// is required unless only HMAC algorithms are allowed.
	JWKSFile string `yaml:"jwks_file" json:"jwks_file"`
	// JWKSURL is where the JWKS document is fetched from: https (the
	// certificate verified), or plain http only to a loopback host
	// (127.0.0.0/8, ::1, localhost); a redirect is followed only to where
	// this may point.
	JWKSURL string `yaml:"jwks_url" json:"jwks_url"`
	// Issuer must equal the token's iss claim. Required.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Audience must intersect the token's aud claim. Required.
	Audience Audience `yaml:"audience" json:"audience"`
	// Types is the allow-list of the JOSE header typ a token must carry
	// (RFC 8725 §3.11 explicit typing), compared as RFC 7515 §4.1.9 reads
	// a media type: in any case, "application/" omitted when no other '/'
	// follows ("at+jwt" matches "application/at+JWT"). A token without typ
	// or with another is refused like any invalid token. Empty (the
	// default): typ is not checked, so any token the issuer signs for the
	// audience (an ID token, a logout token) is a credential; set [at+jwt]
	// when the issuer issues RFC 9068 access tokens.
	Types []string `yaml:"types" json:"types"`
	// Algorithms is the allow-list of JWS algorithms; default RS256, ES256, EdDSA.
	// "none" is always refused; HS256/384/512 need HMACSecretFile.
	Algorithms []string `yaml:"algorithms" json:"algorithms"`
	// HMACSecretFile holds the shared secret for HS* algorithms (trailing
	// newlines are trimmed); it must be at least as long as the hash output.
	HMACSecretFile string `yaml:"hmac_secret_file" json:"hmac_secret_file"`
	// Leeway is the accepted clock skew for exp, nbf and iat; default 30s.
	Leeway time.Duration `yaml:"leeway" json:"leeway"`
	// JWKSRefresh is how long a fetched JWKS is used before it is refetched; default 5m.
	JWKSRefresh time.Duration `yaml:"jwks_refresh" json:"jwks_refresh"`
	// JWKSStaleGrace is how long past JWKSRefresh the old keys stay in use while
	// refreshes fail; default 1h. It also bounds how long a verified token stays cached.
	JWKSStaleGrace time.Duration `yaml:"jwks_stale_grace" json:"jwks_stale_grace"`
	// PrincipalClaim names the claim that holds the principal; default "sub".
	// MACP: the runtime names the sender by "sub", so with another claim a
	// token whose "sub" differs from it is refused.
	PrincipalClaim string `yaml:"principal_claim" json:"principal_claim"`
	// CacheSize bounds the verified-token cache (entries); default 10000.
	CacheSize int `yaml:"cache_size" json:"cache_size"`
}

// StaticConfig configures static bearer tokens.
type StaticConfig struct {
	// TokensFile is a JSON list in the MACP runtime's shape:
	// [{"token": "...", "sender": "agent-a", "allowed_modes": [...], ...}].
	TokensFile string `yaml:"tokens_file" json:"tokens_file"`
}

// MTLSConfig configures client-certificate authentication.
type MTLSConfig struct {
	// AllowSubject lets a certificate without a SPIFFE ID authenticate as its
	// subject CommonName, unless that holds a ':' (it could read as a URI
	// principal only a URI SAN may prove).
	AllowSubject bool `yaml:"allow_subject" json:"allow_subject"`
	// TrustDomainCAFiles binds each SPIFFE trust domain to the CA bundle
	// (PEM) that alone may issue its IDs: a SPIFFE ID is accepted only when
	// its trust domain is a key here and the certificate chains to that
	// domain's bundle. Unset: any CA the listener's client CA bundle (or
	// Envoy) trusts may issue an ID in any trust domain, which is safe only
	// with one trust domain's CAs in it.
	TrustDomainCAFiles map[string]string `yaml:"trust_domain_ca_files" json:"trust_domain_ca_files"`
}

// Defaults applied by withDefaults.
const (
	defaultLeeway         = 30 * time.Second
	defaultJWKSRefresh    = 5 * time.Minute
	defaultJWKSStaleGrace = time.Hour
	defaultPrincipalClaim = "sub"
	defaultCacheSize      = 10000
)

// defaultAlgorithms is the allow-list used when JWTConfig.Algorithms is empty.
func defaultAlgorithms() []string { return []string{"RS256", "ES256", "EdDSA"} }

// withDefaults returns c with every unset optional field given its default.
func (c Config) withDefaults() Config {
	j := &c.JWT
	if len(j.Algorithms) == 0 {
		j.Algorithms = defaultAlgorithms()
	}
	if j.Leeway == 0 {
		j.Leeway = defaultLeeway
	}
	if j.JWKSRefresh == 0 {
		j.JWKSRefresh = defaultJWKSRefresh
	}
	if j.JWKSStaleGrace == 0 {
		j.JWKSStaleGrace = defaultJWKSStaleGrace
	}
	if j.PrincipalClaim == "" {
		j.PrincipalClaim = defaultPrincipalClaim
	}
	if j.CacheSize == 0 {
		j.CacheSize = defaultCacheSize
	}
	return c
}

// hmacMinKeyLen returns the shortest secret an HMAC algorithm accepts (RFC 7518
// §3.2), or 0 if alg is not an HMAC algorithm.
func hmacMinKeyLen(alg string) int {
	switch alg {
	case "HS256":
		return 32
	case "HS384":
		return 48
	case "HS512":
		return 64
	}
	return 0
}

// isAsymmetric reports whether alg is a public-key JWS algorithm a JWKS key can verify.
func isAsymmetric(alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA":
		return true
	}
	return false
}

// Validate reports every problem in c (after defaults are applied), each
// naming the offending key, e.g. "jwt.issuer: required".
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	if len(c.Mode) == 0 {
		bad("mode", "required (one or more of jwt, static, mtls, dev)")
	}
	seen := map[Method]bool{}
	for _, m := range c.Mode {
		switch m {
		case MethodJWT, MethodStatic, MethodMTLS, MethodDev:
		default:
			bad("mode", "unknown method %q (want jwt, static, mtls or dev)", m)
			continue
		}
		if seen[m] {
			bad("mode", "method %q listed twice", m)
		}
		seen[m] = true
	}
	if seen[MethodDev] {
		if len(c.Mode) > 1 {
			bad("mode", "dev accepts any bearer value, so it cannot be combined with other methods")
		}
		if !c.Insecure {
			bad("insecure", "must be true to use mode dev (dev mode accepts any bearer value as the principal)")
		}
	}
	if seen[MethodJWT] {
		errs = append(errs, c.JWT.validate()...)
	}
	for td, file := range c.MTLS.TrustDomainCAFiles {
		if !validTrustDomain(td) {
			bad("mtls.trust_domain_ca_files", "%q is not a trust domain (lower-case letters, digits, '.', '-', '_')", td)
		}
		if file == "" {
			bad("mtls.trust_domain_ca_files", "trust domain %q: a CA bundle file is required", td)
		}
	}
	if len(c.MTLS.TrustDomainCAFiles) > 0 && !seen[MethodMTLS] {
		bad("mtls.trust_domain_ca_files", "set, but mode has no mtls")
	}
	if seen[MethodStatic] && c.Static.TokensFile == "" {
		bad("static.tokens_file", "required for mode static")
	}
	return errors.Join(errs...)
}

// validate checks a defaulted JWTConfig.
func (j JWTConfig) validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	asymmetric, hmac := false, false
	for _, alg := range j.Algorithms {
		switch {
		case strings.EqualFold(alg, "none"):
			bad("jwt.algorithms", `"none" is never allowed`)
		case isAsymmetric(alg):
			asymmetric = true
		case hmacMinKeyLen(alg) > 0:
			hmac = true
			if j.HMACSecretFile == "" {
				bad("jwt.algorithms", "%s needs jwt.hmac_secret_file", alg)
			}
		default:
			bad("jwt.algorithms", "unsupported algorithm %q (want RS256/384/512, PS256/384/512, ES256/384/512, EdDSA or, with a secret, HS256/384/512)", alg)
		}
	}
	if j.HMACSecretFile != "" && !hmac {
		bad("jwt.hmac_secret_file", "set, but no HS256/HS384/HS512 in jwt.algorithms")
	}

	switch {
	case j.JWKSFile != "" && j.JWKSURL != "":
		bad("jwt.jwks_file", "set together with jwt.jwks_url; set exactly one")
	case j.JWKSFile == "" && j.JWKSURL == "" && (asymmetric || !hmac):
		bad("jwt.jwks_url", "required (or jwt.jwks_file)")
	case j.JWKSURL != "":
		if err := checkJWKSURL(j.JWKSURL); errors.Is(err, errPlainHTTP) {
			bad("jwt.jwks_url", "%v; use https, or jwt.jwks_file", err)
		} else if err != nil {
			bad("jwt.jwks_url", "%v", err)
		}
	}

	if j.Issuer == "" {
		bad("jwt.issuer", "required")
	}
	if len(j.Audience) == 0 || slices.Contains(j.Audience, "") {
		bad("jwt.audience", "required (a non-empty string or list of strings)")
	}
	for _, typ := range j.Types {
		if !validMediaType(mediaType(typ)) {
			bad("jwt.types", "%q is not a media type (type/subtype or subtype alone, as at+jwt)", typ)
		}
	}
	if j.Leeway < 0 {
		bad("jwt.leeway", "must not be negative")
	}
	if j.JWKSRefresh < 0 {
		bad("jwt.jwks_refresh", "must not be negative")
	}
	if j.JWKSStaleGrace < 0 {
		bad("jwt.jwks_stale_grace", "must not be negative")
	}
	if j.CacheSize < 0 {
		bad("jwt.cache_size", "must not be negative")
	}
	return errs
}

// mediaType is a JOSE typ as RFC 7515 §4.1.9 has a recipient read it: a
// value without '/' names "application/" and the value; media types compare
// in any case (RFC 2045 §5.1), folded here in ASCII only, so that no
// Unicode folding (the Kelvin sign as 'k') makes two spellings one.
func mediaType(typ string) string {
	b := []byte(typ)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	if !strings.Contains(typ, "/") {
		return "application/" + string(b)
	}
	return string(b)
}

// validMediaType reports whether t is type/subtype, both RFC 9110 tokens,
// with no parameters.
func validMediaType(t string) bool {
	typ, sub, ok := strings.Cut(t, "/")
	return ok && isToken(typ) && isToken(sub)
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// errPlainHTTP is a JWKS URL in plain http to a host that is not loopback.
var errPlainHTTP = errors.New("plain http")

// checkJWKSURL requires https, or plain http to a loopback host: anyone on
// the path of a plain-http fetch can serve its own keys and so mint tokens
// for any principal. authn.insecure (dev mode's switch) does not widen it.
// It checks jwt.jwks_url at start and every redirect of its fetch.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Host == "" {
		return errors.New("missing host")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
			return nil
		}
		return fmt.Errorf("%w to %q is refused (only to a loopback host: 127.0.0.0/8, ::1, localhost), where anyone on the path could serve its own keys and mint tokens for any principal", errPlainHTTP, host)
	default:
		return fmt.Errorf("scheme %q not supported (want https)", u.Scheme)
	}
}
