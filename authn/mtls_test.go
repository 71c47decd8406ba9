package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// cert makes a self-signed certificate with the given subject CN and URI SANs.
func cert(t *testing.T, cn string, notAfter time.Time, uris ...string) *x509.Certificate {
	t.Helper()
	return subjectCert(t, notAfter, pkix.Name{CommonName: cn}.ToRDNSequence(), uris...)
}

// subjectCert makes a self-signed client certificate whose subject is
// exactly rdns (pkix.Name cannot write two CommonNames) and with the given
// URI SANs.
func subjectCert(t *testing.T, notAfter time.Time, rdns pkix.RDNSequence, uris ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: raw, NotBefore: t0.Add(-time.Hour), NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	return signed(t, tmpl, tmpl, key, key)
}

// cnAttr is a CommonName attribute.
func cnAttr(v string) pkix.AttributeTypeAndValue {
	return pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: v}
}

func TestAuthenticateMTLS(t *testing.T) {
	later := t0.Add(24 * time.Hour)
	tests := []struct {
		name         string
		allowSubject bool
		certs        []*x509.Certificate
		wantID       string
		wantErr      error
	}{
		{name: "SPIFFE ID", certs: []*x509.Certificate{cert(t, "ignored", later, "spiffe://example.org/ns/prod/sa/planner")}, wantID: "spiffe://example.org/ns/prod/sa/planner"},
		{name: "two SPIFFE IDs", certs: []*x509.Certificate{cert(t, "x", later, "https://example.org/x", "spiffe://example.org/a", "spiffe://example.org/b")}, wantErr: ErrInvalidCredentials},
		{name: "two SPIFFE IDs, the second malformed", certs: []*x509.Certificate{cert(t, "x", later, "spiffe://example.org/a", "spiffe://example.org/a/../b")}, wantErr: ErrInvalidCredentials},
		{name: "SPIFFE ID beside another URI", certs: []*x509.Certificate{cert(t, "x", later, "https://example.org/x", "spiffe://example.org/a")}, wantID: "spiffe://example.org/a"},
		{name: "SPIFFE ID preferred over subject", allowSubject: true, certs: []*x509.Certificate{cert(t, "cn", later, "spiffe://example.org/a")}, wantID: "spiffe://example.org/a"},
		{name: "subject allowed", allowSubject: true, certs: []*x509.Certificate{cert(t, "agent-a", later)}, wantID: "agent-a"},
		{name: "subject as a SPIFFE ID", allowSubject: true, certs: []*x509.Certificate{cert(t, "spiffe://example.org/alice", later)}, wantErr: ErrInvalidCredentials},
		{name: "subject as a URN", allowSubject: true, certs: []*x509.Certificate{cert(t, "urn:agent:a", later)}, wantErr: ErrInvalidCredentials},
		{name: "subject with a colon beside a SPIFFE ID", allowSubject: true, certs: []*x509.Certificate{cert(t, "spiffe://example.org/b", later, "spiffe://example.org/a")}, wantID: "spiffe://example.org/a"},
		{name: "subject with a non-SPIFFE URI SAN", allowSubject: true, certs: []*x509.Certificate{cert(t, "agent-a", later, "https://example.org/a")}, wantID: "agent-a"},
		{name: "subject not allowed", certs: []*x509.Certificate{cert(t, "agent-a", later)}, wantErr: ErrInvalidCredentials},
		{name: "no subject and no SPIFFE ID", allowSubject: true, certs: []*x509.Certificate{cert(t, "", later)}, wantErr: ErrInvalidCredentials},
		// Two identities in one subject: Go reads the last CommonName,
		// OpenSSL's first-index lookup (and what is built on it) the first.
		{name: "two subject CommonNames", allowSubject: true, certs: []*x509.Certificate{subjectCert(t, later, pkix.RDNSequence{{cnAttr("alice")}, {cnAttr("bob")}})}, wantErr: ErrInvalidCredentials},
		{name: "two CommonNames in one RDN", allowSubject: true, certs: []*x509.Certificate{subjectCert(t, later, pkix.RDNSequence{{cnAttr("alice"), cnAttr("bob")}})}, wantErr: ErrInvalidCredentials},
		{name: "one CommonName beside other attributes", allowSubject: true, certs: []*x509.Certificate{subjectCert(t, later, pkix.RDNSequence{{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Example"}}, {cnAttr("agent-a")}})}, wantID: "agent-a"},
		{name: "two CommonNames beside a SPIFFE ID", allowSubject: true, certs: []*x509.Certificate{subjectCert(t, later, pkix.RDNSequence{{cnAttr("alice")}, {cnAttr("bob")}}, "spiffe://example.org/a")}, wantID: "spiffe://example.org/a"},
		{name: "malformed SPIFFE ID", certs: []*x509.Certificate{cert(t, "", later, "spiffe://example.org/a/../b")}, wantErr: ErrInvalidCredentials},
		{name: "SPIFFE ID with query", certs: []*x509.Certificate{cert(t, "", later, "spiffe://example.org/a?x=1")}, wantErr: ErrInvalidCredentials},
		{name: "SPIFFE ID with port", certs: []*x509.Certificate{cert(t, "", later, "spiffe://example.org:8443/a")}, wantErr: ErrInvalidCredentials},
		{name: "SPIFFE ID upper-case trust domain", certs: []*x509.Certificate{cert(t, "", later, "spiffe://Example.org/a")}, wantErr: ErrInvalidCredentials},
		{name: "expired leaf", certs: []*x509.Certificate{cert(t, "", t0.Add(-time.Minute), "spiffe://example.org/a")}, wantErr: ErrExpired},
		{name: "no certs", wantErr: ErrNoCredentials},
		{name: "nil leaf", certs: []*x509.Certificate{nil}, wantErr: ErrNoCredentials},
	}
	clock := newClock()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, Config{Mode: Methods{MethodMTLS}, MTLS: MTLSConfig{AllowSubject: tt.allowSubject}}, clock)
			p, err := a.Authenticate(context.Background(), Credentials{PeerCerts: tt.certs})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if p.ID != tt.wantID {
				t.Fatalf("ID = %q, want %q", p.ID, tt.wantID)
			}
			if tt.wantErr == nil && (p.Method != "mtls" || p.Claims != nil || !p.Expiry.Equal(later)) {
				t.Fatalf("principal = %+v", p)
			}
		})
	}
}

// signed is tmpl, for key's public half, signed by parent's key signer.
func signed(t *testing.T, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) *x509.Certificate {
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

// ca is a CA certificate and key that issues leaves.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	c := signed(t, tmpl, tmpl, key, key)
	return ca{cert: c, key: key}
}

// issue signs a client leaf naming uri.
func (c ca) issue(t *testing.T, uri string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, URIs: []*url.URL{u}}
	return signed(t, tmpl, c.cert, key, c.key)
}

// issueCN signs a client leaf with subject CommonName cn and no SAN.
func (c ca) issueCN(t *testing.T, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: cn}, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return signed(t, tmpl, c.cert, key, c.key)
}

// crossSigned is c's certificate (its subject and key) signed by another
// CA: a chain through it ends at that CA.
func (c ca) crossSigned(t *testing.T, by ca) *x509.Certificate {
	t.Helper()
	return signed(t, c.cert, by.cert, c.key, by.key)
}

func (c ca) file(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMTLSTrustDomains: with trust domains bound to their CAs, a SPIFFE ID
// is accepted only from its own trust domain's CA (without, the TLS stack's
// one bundle lets any trust domain's CA issue any domain's IDs: the first
// case authenticated as spiffe://a.example/alice before).
func TestMTLSTrustDomains(t *testing.T) {
	a, b := newCA(t, "a.example CA"), newCA(t, "b.example CA")
	cfg := Config{Mode: Methods{MethodMTLS}, MTLS: MTLSConfig{TrustDomainCAFiles: map[string]string{"a.example": a.file(t), "b.example": b.file(t)}}}
	tests := []struct {
		name    string
		certs   []*x509.Certificate
		wantID  string
		wantErr error
	}{
		{name: "b's CA issuing an a.example ID", certs: []*x509.Certificate{b.issue(t, "spiffe://a.example/alice")}, wantErr: ErrInvalidCredentials},
		{name: "a's CA issuing a b.example ID, b's CA as intermediate", certs: []*x509.Certificate{a.issue(t, "spiffe://b.example/bob"), b.cert}, wantErr: ErrInvalidCredentials},
		{name: "a trust domain not bound", certs: []*x509.Certificate{a.issue(t, "spiffe://c.example/carol")}, wantErr: ErrInvalidCredentials},
		{name: "a's CA, an a.example ID", certs: []*x509.Certificate{a.issue(t, "spiffe://a.example/alice")}, wantID: "spiffe://a.example/alice"},
		{name: "b's CA, a b.example ID", certs: []*x509.Certificate{b.issue(t, "spiffe://b.example/bob")}, wantID: "spiffe://b.example/bob"},
	}
	au := mustNew(t, cfg, newClock())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := au.Authenticate(context.Background(), Credentials{PeerCerts: tt.certs})
			if !errors.Is(err, tt.wantErr) || p.ID != tt.wantID {
				t.Fatalf("got %q, %v; want %q, %v", p.ID, err, tt.wantID, tt.wantErr)
			}
		})
	}
	for _, bad := range []map[string]string{{"A.example": a.file(t)}, {"a.example": ""}, {"a.example": filepath.Join(t.TempDir(), "none.pem")}} {
		if _, err := New(Config{Mode: Methods{MethodMTLS}, MTLS: MTLSConfig{TrustDomainCAFiles: bad}}, Options{}); err == nil {
			t.Errorf("New with trust_domain_ca_files %v: no error", bad)
		}
	}
}
