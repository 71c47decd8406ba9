package authn

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// mtlsVerifier takes the principal from a verified TLS client certificate.
type mtlsVerifier struct {
	allowSubject bool
	now          func() time.Time
}

// authenticate returns the leaf's SPIFFE ID (a leaf naming two is refused),
// or its subject CommonName
// when allowed and it holds no ':' (so it never reads as a SPIFFE ID or any
// other URI principal). The chain was verified by the TLS stack; only the leaf's
// expiry is checked again, for long-lived connections.
func (m *mtlsVerifier) authenticate(_ context.Context, c Credentials) (Principal, error) {
	if len(c.PeerCerts) == 0 || c.PeerCerts[0] == nil {
		return Principal{}, fail("mtls", ErrNoCredentials, CauseMissing, "no client certificate")
	}
	leaf := c.PeerCerts[0]
	if m.now().After(leaf.NotAfter) {
		return Principal{}, fail("mtls", ErrExpired, CauseExpired, "client certificate expired "+leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	var id string
	for _, u := range leaf.URIs {
		if u == nil || !strings.EqualFold(u.Scheme, "spiffe") {
			continue
		}
		if id != "" {
			// Two identities in one credential: another reader of the
			// certificate (an RBAC rule matching any SAN, a library
			// taking the last) may name the other one (X509-SVID: exactly
			// one URI SAN).
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, "client certificate names more than one SPIFFE ID")
		}
		var err error
		if id, err = spiffeID(u); err != nil {
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, err.Error())
		}
	}
	if id != "" {
		return Principal{ID: id, Method: string(MethodMTLS), Expiry: leaf.NotAfter}, nil
	}
	if cn := leaf.Subject.CommonName; m.allowSubject && cn != "" {
		if strings.Contains(cn, ":") {
			// A name with a colon could read as a URI principal
			// (spiffe://td/alice) that only a URI SAN may prove.
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, fmt.Sprintf("subject CommonName %q holds a ':' (only a URI SAN may name a URI principal)", cn))
		}
		return Principal{ID: cn, Method: string(MethodMTLS), Expiry: leaf.NotAfter}, nil
	}
	return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, "client certificate has no SPIFFE ID")
}

// spiffeID validates a SPIFFE ID URI SAN (spiffe://trust-domain/path) as the
// SPIFFE ID specification defines it and returns it as a string.
func spiffeID(u *url.URL) (string, error) {
	if u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" || u.RawPath != "" || u.Port() != "" {
		return "", fmt.Errorf("malformed SPIFFE ID %q", u.String())
	}
	td := u.Host
	if td == "" {
		return "", fmt.Errorf("SPIFFE ID %q has no trust domain", u.String())
	}
	for i := 0; i < len(td); i++ {
		c := td[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return "", fmt.Errorf("SPIFFE ID %q: bad trust domain", u.String())
		}
	}
	if u.Path != "" {
		for _, seg := range strings.Split(u.Path[1:], "/") {
			if seg == "" || seg == "." || seg == ".." {
				return "", fmt.Errorf("SPIFFE ID %q: bad path", u.String())
			}
			for i := 0; i < len(seg); i++ {
				c := seg[i]
				if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
					return "", fmt.Errorf("SPIFFE ID %q: bad path", u.String())
				}
			}
		}
	}
	return "spiffe://" + td + u.Path, nil
}
