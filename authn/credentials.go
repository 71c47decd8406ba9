package authn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The headers a credential may arrive in: Authorization (RFC 6750 Bearer)
// and the MACP runtime's x-macp-token. Adapters that pass a request upstream
// strip both and re-add the one Warden decided on (see Forwarded).
const (
	HeaderAuthorization = "authorization"
	HeaderMACPToken     = "x-macp-token"
)

// ErrAmbiguousCredentials means a request carried more than one credential
// (two Authorization headers, or Authorization and x-macp-token with different
// tokens) or a credential in a form Warden does not read. Warden refuses it
// rather than guess which one the upstream will act on. It wraps
// ErrInvalidCredentials.
var ErrAmbiguousCredentials = fmt.Errorf("%w: ambiguous credentials", ErrInvalidCredentials)

// FromHeaders is the one credential parser every adapter uses. get returns
// every value of a header, by its lower-case name (gRPC metadata,
// http.Header.Values, or Envoy's header map split on commas); chain is the
// verified TLS client chain, leaf first, or nil.
//
// The Bearer scheme is matched case-insensitively (RFC 7235 §2.1). A request
// with more than one credential value, or an Authorization header of another
// scheme, is refused with ErrAmbiguousCredentials: the upstream might read a
// different one than Warden decided on.
func FromHeaders(get func(name string) []string, chain []*x509.Certificate) (Credentials, error) {
	c := Credentials{PeerCerts: chain}
	auth := get(HeaderAuthorization)
	tok := get(HeaderMACPToken)
	if len(auth) > 1 || len(tok) > 1 {
		return c, fmt.Errorf("%w: more than one credential header", ErrAmbiguousCredentials)
	}
	if len(auth) == 1 {
		b, err := bearer(auth[0])
		if err != nil {
			return c, err
		}
		c.Bearer = b
	}
	if len(tok) == 1 {
		t := strings.TrimSpace(tok[0])
		if !validToken(t) {
			return c, fmt.Errorf("%w: malformed x-macp-token", ErrAmbiguousCredentials)
		}
		if c.Bearer != "" && c.Bearer != t {
			return c, fmt.Errorf("%w: authorization and x-macp-token differ", ErrAmbiguousCredentials)
		}
		c.Bearer = t
	}
	return c, nil
}

// bearer returns the token of an Authorization value "Bearer <token68>".
func bearer(v string) (string, error) {
	v = strings.TrimSpace(v)
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", fmt.Errorf("%w: authorization is not a Bearer credential", ErrAmbiguousCredentials)
	}
	tok = strings.TrimLeft(tok, " ")
	if !validToken(tok) {
		return "", fmt.Errorf("%w: malformed bearer token", ErrAmbiguousCredentials)
	}
	return tok, nil
}

// validToken reports whether t is one credential: non-empty visible ASCII
// without commas, so that no upstream can split or trim it otherwise.
func validToken(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f || c == ',' {
			return false
		}
	}
	return true
}

// FromHTTP reads the credentials of an HTTP request: its headers and, when
// the connection was TLS with a verified client chain, that chain.
func FromHTTP(r *http.Request) (Credentials, error) {
	var chain []*x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		chain = r.TLS.VerifiedChains[0]
	}
	c, err := FromHeaders(func(name string) []string { return headerValues(r.Header, httpName(name)) }, chain)
	if r.TLS != nil {
		c.Chains = r.TLS.VerifiedChains
	}
	return c, err
}

// httpName is a credential header's name as http.Header keys it: looked up
// under it, the header's key is not built again for every request.
func httpName(name string) string {
	switch name {
	case HeaderAuthorization:
		return "Authorization"
	case HeaderMACPToken:
		return "X-Macp-Token"
	}
	return name
}

// headerValues returns every value of a header, each comma-separated list
// item on its own, so that "Authorization: a, b" counts as two.
func headerValues(h http.Header, name string) []string {
	vs := h.Values(name)
	if len(vs) == 1 && !strings.Contains(vs[0], ",") {
		return vs
	}
	var out []string
	for _, v := range vs {
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

// SplitHeader turns one header value of a map that joins repeated headers
// with commas (Envoy's CheckRequest) into its values; "" is no value.
func SplitHeader(v string, present bool) []string {
	if !present {
		return nil
	}
	return strings.Split(v, ",")
}

// StripsCredentials reports whether the upstream must not see the client's
// credential headers for p: p was authenticated from something the upstream
// cannot check (a client certificate), so a bearer the client also sent would
// let it act upstream as someone else.
func StripsCredentials(p Principal) bool {
	return p.Method == string(MethodMTLS)
}

// UpstreamTokens maps principals to the credential Warden presents upstream
// for them when it strips the client's own (see StripsCredentials).
type UpstreamTokens map[string]string

// Upstream is the one rule for the credential the upstream receives for p,
// who presented c: when p was authenticated from c's bearer, that bearer,
// passed unchanged (replace false); when p was authenticated by something
// the upstream cannot check (StripsCredentials), the client's credential
// headers are replaced by the token configured for p, or by none ("").
func (t UpstreamTokens) Upstream(p Principal, c Credentials) (bearer string, replace bool) {
	if StripsCredentials(p) {
		return t[p.ID], true
	}
	return c.Bearer, false
}

// LoadUpstreamTokens reads a token file in the MACP runtime's shape (the
// runtime's own token file serves): a JSON list of {token, sender} objects.
// A sender listed twice is an error.
func LoadUpstreamTokens(path string) (UpstreamTokens, error) {
	s, err := loadStatic(path)
	if err != nil {
		return nil, fmt.Errorf("upstream tokens: %w", err)
	}
	out := make(UpstreamTokens, len(s.byHash))
	for _, t := range s.byHash {
		if _, dup := out[t.p.ID]; dup {
			return nil, fmt.Errorf("upstream tokens %s: sender %q has more than one token", path, t.p.ID)
		}
		out[t.p.ID] = string(t.token)
	}
	return out, nil
}

// Challenge is the WWW-Authenticate value (RFC 6750 §3) for a request that
// failed authentication with err: the Bearer scheme, the protected-resource
// metadata URL (RFC 9728) when there is one, and error="invalid_token" when
// a credential was presented but refused. Every parameter is a
// quoted-string whatever it holds: in the URL, a byte outside visible ASCII,
// '"' and '\\' are percent-encoded, so no value can end the string, add a
// parameter (a scope a client would then ask for) or a header line.
func Challenge(resourceMetadata string, err error) string {
	var params []string
	if resourceMetadata != "" {
		params = append(params, `resource_metadata="`+escapeURL(resourceMetadata)+`"`)
	}
	if err != nil && !errors.Is(err, ErrNoCredentials) {
		params = append(params, `error="invalid_token"`, `error_description="`+escapeURL(Reason(err))+`"`)
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

// escapeURL percent-encodes the bytes of s that may not stand in a
// quoted-string unescaped or that are not visible ASCII.
func escapeURL(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// NamedBySubject refuses a principal an upstream would name otherwise: one
// authenticated from a JWT that Warden forwards (StripsCredentials false) to
// an upstream that re-validates it and names its sender by the sub claim,
// as the MACP runtime does. With authn.jwt.principal_claim set to another
// claim, a token whose sub is not that claim's value would be decided as
// one identity and applied as another (a member of H2's class: two
// identities in one credential). Other principals pass.
func NamedBySubject(p Principal) error {
	if p.Method != string(MethodJWT) {
		return nil
	}
	if sub, _ := p.Claims["sub"].(string); sub != p.ID {
		return fail(jwtWhere, ErrInvalidCredentials, CauseClaims, "the principal claim is not the token's sub, by which the MACP runtime names the sender")
	}
	return nil
}
