package authn

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// mtlsVerifier takes the principal from a verified TLS client certificate.
type mtlsVerifier struct {
	allowSubject bool
	// domains binds each SPIFFE trust domain to the CAs that may issue its
	// IDs (nil: any CA the TLS stack trusts).
	domains map[string]*x509.CertPool
	now     func() time.Time
}

// newMTLSVerifier reads the trust domains' CA bundles.
func newMTLSVerifier(c MTLSConfig, now func() time.Time) (*mtlsVerifier, error) {
	v := &mtlsVerifier{allowSubject: c.AllowSubject, now: now}
	for td, file := range c.TrustDomainCAFiles {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("mtls.trust_domain_ca_files: trust domain %q: %w", td, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("mtls.trust_domain_ca_files: trust domain %q: %s holds no PEM certificate", td, file)
		}
		if v.domains == nil {
			v.domains = map[string]*x509.CertPool{}
		}
		v.domains[td] = pool
	}
	return v, nil
}

// issuedBy checks that the SPIFFE ID id (valid) of the chain certs was
// issued by its trust domain's CAs, when trust domains are bound: the TLS
// stack (or Envoy) verified the chain against the union of every domain's
// CAs, which lets any of them sign any domain's IDs.
func (m *mtlsVerifier) issuedBy(id string, certs []*x509.Certificate) error {
	if m.domains == nil {
		return nil
	}
	td, _, _ := strings.Cut(strings.TrimPrefix(id, "spiffe://"), "/")
	roots, ok := m.domains[td]
	if !ok {
		return fmt.Errorf("SPIFFE ID %s: trust domain %q is not one Warden trusts (mtls.trust_domain_ca_files)", id, td)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		if c != nil {
			inter.AddCert(c)
		}
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: m.now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("SPIFFE ID %s: not issued by trust domain %q's CA (mtls.trust_domain_ca_files): %w", id, td, err)
	}
	return nil
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
		if err := m.issuedBy(id, c.PeerCerts); err != nil {
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, err.Error())
		}
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
	if !validTrustDomain(td) {
		return "", fmt.Errorf("SPIFFE ID %q: bad trust domain", u.String())
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

// validTrustDomain reports whether td is a SPIFFE trust domain name as the
// SPIFFE ID specification allows it (not empty; lower-case letters, digits,
// '.', '-', '_').
func validTrustDomain(td string) bool {
	for i := 0; i < len(td); i++ {
		c := td[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return td != ""
}

// DescribeMTLS says which CAs may issue which SPIFFE IDs under c ("" when
// c has no mtls), for warden check.
func DescribeMTLS(c Config) string {
	if !slices.Contains(c.Mode, MethodMTLS) {
		return ""
	}
	if len(c.MTLS.TrustDomainCAFiles) == 0 {
		return "any CA the client CA bundle (or Envoy) trusts may issue a SPIFFE ID in any trust domain; with more than one trust domain's CAs in it, set authn.mtls.trust_domain_ca_files"
	}
	tds := slices.Sorted(maps.Keys(c.MTLS.TrustDomainCAFiles))
	parts := make([]string, len(tds))
	for i, td := range tds {
		parts[i] = td + " by " + c.MTLS.TrustDomainCAFiles[td]
	}
	return "SPIFFE IDs issued per trust domain (" + strings.Join(parts, ", ") + "); any other trust domain is refused"
}
