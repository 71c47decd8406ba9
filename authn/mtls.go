package authn

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
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
	// anchors are, per bound trust domain, the hex SHA-256 of each CA
	// certificate of its bundle (Principal.Anchor, Holds).
	anchors map[string]ClientCAs
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
		pool, anchors := ReadCAs(b)
		if len(anchors) == 0 {
			return nil, fmt.Errorf("mtls.trust_domain_ca_files: trust domain %q: %s holds no PEM certificate", td, file)
		}
		if v.domains == nil {
			v.domains, v.anchors = map[string]*x509.CertPool{}, map[string]ClientCAs{}
		}
		v.domains[td], v.anchors[td] = pool, anchors
	}
	return v, nil
}

// ReadCAs reads a PEM bundle of CA certificates as
// x509.CertPool.AppendCertsFromPEM does, keeping each CA's fingerprint
// (ClientCAs): a listener's client_ca_file, a trust domain's bundle.
func ReadCAs(b []byte) (*x509.CertPool, ClientCAs) {
	pool, cas := x509.NewCertPool(), ClientCAs{}
	for len(b) > 0 {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		pool.AddCert(ca)
		cas[fingerprint(ca)] = true
	}
	return pool, cas
}

// fingerprint is the hex SHA-256 of a certificate's DER.
func fingerprint(c *x509.Certificate) string {
	h := sha256.Sum256(c.Raw)
	return hex.EncodeToString(h[:])
}

// anchorOf is Principal.Anchor of a client certificate: the fingerprints
// of the CAs its verified chains end at, sorted, joined by commas (a leaf
// cross-signed into two bundles holds while either CA is trusted).
func anchorOf(chains ...[][]*x509.Certificate) string {
	var fps []string
	for _, cs := range chains {
		for _, c := range cs {
			if len(c) > 0 && c[len(c)-1] != nil {
				fps = append(fps, fingerprint(c[len(c)-1]))
			}
		}
	}
	slices.Sort(fps)
	return strings.Join(slices.Compact(fps), ",")
}

// anchoredIn reports whether one of an anchor's CAs is in cas.
func anchoredIn(anchor string, cas ClientCAs) bool {
	for fp := range strings.SplitSeq(anchor, ",") {
		if fp != "" && cas[fp] {
			return true
		}
	}
	return false
}

// trustDomain is the trust domain of a SPIFFE ID; false for another name.
func trustDomain(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "spiffe://")
	td, _, _ := strings.Cut(rest, "/")
	return td, ok
}

// issuedBy checks that the SPIFFE ID id (valid) of the chain certs was
// issued by its trust domain's CAs, when trust domains are bound: the TLS
// stack (or Envoy) verified the chain against the union of every domain's
// CAs, which lets any of them sign any domain's IDs. It returns the
// chains it verifies to (none when no domain is bound).
func (m *mtlsVerifier) issuedBy(id string, certs []*x509.Certificate) ([][]*x509.Certificate, error) {
	if m.domains == nil {
		return nil, nil
	}
	td, _ := trustDomain(id)
	roots, ok := m.domains[td]
	if !ok {
		return nil, fmt.Errorf("SPIFFE ID %s: trust domain %q is not one Warden trusts (mtls.trust_domain_ca_files)", id, td)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		if c != nil {
			inter.AddCert(c)
		}
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: m.now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, fmt.Errorf("SPIFFE ID %s: not issued by trust domain %q's CA (mtls.trust_domain_ca_files): %w", id, td, err)
	}
	return chains, nil
}

// holds reports whether one of the CAs a grant's certificate chained to
// (its anchor: every verified chain's, the TLS stack's and its trust
// domain's) is still in the bundle of its SPIFFE ID's trust domain, when
// trust domains are bound, and among cas, the CAs the door's TLS stack
// verifies client certificates with now, when Warden verifies them there
// (cas nil: Envoy's, not seen here). A grant sealed before anchors holds
// in neither.
func (m *mtlsVerifier) holds(_ context.Context, g Grant, cas ClientCAs) error {
	if td, spiffe := trustDomain(g.Principal); m.domains != nil && spiffe && !anchoredIn(g.Anchor, m.anchors[td]) {
		return fail("mtls", ErrInvalidCredentials, CauseCertificate, fmt.Sprintf("the CA that issued the client certificate is no longer trusted for trust domain %q (mtls.trust_domain_ca_files)", td))
	}
	if cas != nil && !anchoredIn(g.Anchor, cas) {
		return fail("mtls", ErrInvalidCredentials, CauseCertificate, "the CA that issued the client certificate is no longer in the client CA bundle (client_ca_file)")
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
	// The chains the TLS stack verified (the one PeerCerts is when no
	// other is known): their CAs anchor the principal, with its trust
	// domain's.
	tlsChains := c.Chains
	if len(tlsChains) == 0 {
		tlsChains = [][]*x509.Certificate{c.PeerCerts}
	}
	if id != "" {
		chains, err := m.issuedBy(id, c.PeerCerts)
		if err != nil {
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, err.Error())
		}
		return Principal{ID: id, Method: string(MethodMTLS), Expiry: leaf.NotAfter, Anchor: anchorOf(chains, tlsChains)}, nil
	}
	if cn := leaf.Subject.CommonName; m.allowSubject && cn != "" {
		if n := commonNames(leaf.Subject.Names); n > 1 {
			// Two identities in one subject: Go reads the last
			// CommonName, OpenSSL's first-index lookup (Envoy, nginx, what
			// an upstream reading the forwarded certificate builds on it)
			// the first; Warden would decide one name while another reader
			// names the other.
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, fmt.Sprintf("client certificate subject holds %d CommonNames (one is read as the principal)", n))
		}
		if strings.Contains(cn, ":") {
			// A name with a colon could read as a URI principal
			// (spiffe://td/alice) that only a URI SAN may prove.
			return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, fmt.Sprintf("subject CommonName %q holds a ':' (only a URI SAN may name a URI principal)", cn))
		}
		return Principal{ID: cn, Method: string(MethodMTLS), Expiry: leaf.NotAfter, Anchor: anchorOf(tlsChains)}, nil
	}
	return Principal{}, fail("mtls", ErrInvalidCredentials, CauseCertificate, "client certificate has no SPIFFE ID")
}

// commonNames counts the CommonName attributes (X.520, 2.5.4.3) of a
// subject: every RDN, multi-valued ones included.
func commonNames(names []pkix.AttributeTypeAndValue) int {
	n := 0
	for _, a := range names {
		if a.Type.Equal(asn1.ObjectIdentifier{2, 5, 4, 3}) {
			n++
		}
	}
	return n
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
