// Package testcerts builds throwaway certificates for tests: CAs, client
// leaves naming a SPIFFE ID (or any URI) or a subject, CAs cross-signed by
// another, and their PEM files. Every key is a new P-256 key.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Key returns a new P-256 key.
func Key(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Sign returns tmpl, for key's public half, signed by parent's key signer
// (tmpl itself and key for a self-signed certificate).
func Sign(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// URLs parses uris (SANs).
func URLs(t testing.TB, uris ...string) []*url.URL {
	t.Helper()
	var out []*url.URL
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pu)
	}
	return out
}

// SelfSigned is a self-signed client certificate with subject CommonName
// cn ("" none) and URI SANs uris, valid from notBefore until notAfter.
func SelfSigned(t testing.TB, cn string, notBefore, notAfter time.Time, uris ...string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, URIs: URLs(t, uris...)}
	k := Key(t)
	return Sign(t, tmpl, tmpl, k, k)
}

// Server is a self-signed certificate for the DNS name host, valid for an
// hour around now, that is its own CA (a client trusts it as its root),
// and its key.
func Server(t testing.TB, host string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	k := Key(t)
	return Sign(t, tmpl, tmpl, k, k), k
}

// CA is a CA certificate and its key, issuing client leaves valid around
// its time.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	at   time.Time
}

// NewCA is a self-signed CA named name, valid from an hour before at to two
// days after; its leaves are valid from an hour before at to a day after.
func NewCA(t testing.TB, name string, at time.Time) CA {
	t.Helper()
	k := Key(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: at.Add(-time.Hour), NotAfter: at.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	return CA{Cert: Sign(t, tmpl, tmpl, k, k), Key: k, at: at}
}

// Issue signs a client leaf naming uri (a SPIFFE ID) in its URI SAN.
func (c CA) Issue(t testing.TB, uri string) *x509.Certificate {
	t.Helper()
	return c.leaf(t, &x509.Certificate{SerialNumber: big.NewInt(2), URIs: URLs(t, uri)})
}

// IssueCN signs a client leaf with subject CommonName cn and no SAN.
func (c CA) IssueCN(t testing.TB, cn string) *x509.Certificate {
	t.Helper()
	return c.leaf(t, &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: cn}})
}

func (c CA) leaf(t testing.TB, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	tmpl.NotBefore, tmpl.NotAfter = c.at.Add(-time.Hour), c.at.Add(24*time.Hour)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return Sign(t, tmpl, c.Cert, Key(t), c.Key)
}

// Leaf signs a leaf with subject CommonName name and returns it with its
// key: a server certificate for 127.0.0.1 when server, else a client
// certificate naming uri ("" none) in its URI SAN.
func (c CA) Leaf(t testing.TB, name string, server bool, uri string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: c.at.Add(-time.Hour), NotAfter: c.at.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else if uri != "" {
		tmpl.URIs = URLs(t, uri)
	}
	k := Key(t)
	return Sign(t, tmpl, c.Cert, k, c.Key), k
}

// CrossSigned is c's certificate (its subject and key) signed by another
// CA: a chain through it ends at that CA.
func (c CA) CrossSigned(t testing.TB, by CA) *x509.Certificate {
	t.Helper()
	return Sign(t, c.Cert, by.Cert, c.Key, by.Key)
}

// PEM is c's certificate in PEM.
func (c CA) PEM() []byte { return PEM(c.Cert) }

// PEM is a certificate in PEM.
func PEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// KeyPEM is a key in PEM (SEC 1, "EC PRIVATE KEY").
func KeyPEM(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// Bundle writes the PEM bundle of cas to a file of the test's and returns
// its path.
func Bundle(t testing.TB, cas ...CA) string {
	t.Helper()
	var b []byte
	for _, c := range cas {
		b = append(b, c.PEM()...)
	}
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// Fingerprint is the hex SHA-256 of a certificate's DER (authn.ClientCAs).
func Fingerprint(c *x509.Certificate) string {
	h := sha256.Sum256(c.Raw)
	return hex.EncodeToString(h[:])
}
