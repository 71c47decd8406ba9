package authn

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
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
	raw, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: raw, NotBefore: t0.Add(-time.Hour), NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, URIs: testcerts.URLs(t, uris...)}
	key := testcerts.Key(t)
	return testcerts.Sign(t, tmpl, tmpl, key, key)
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

// ca is a CA certificate and key that issues leaves valid at t0.
type ca = testcerts.CA

func newCA(t *testing.T, name string) ca { return testcerts.NewCA(t, name, t0) }

// TestMTLSTrustDomains: with trust domains bound to their CAs, a SPIFFE ID
// is accepted only from its own trust domain's CA (without, the TLS stack's
// one bundle lets any trust domain's CA issue any domain's IDs: the first
// case authenticated as spiffe://a.example/alice before).
func TestMTLSTrustDomains(t *testing.T) {
	a, b := newCA(t, "a.example CA"), newCA(t, "b.example CA")
	cfg := Config{Mode: Methods{MethodMTLS}, MTLS: MTLSConfig{TrustDomainCAFiles: map[string]string{"a.example": testcerts.Bundle(t, a), "b.example": testcerts.Bundle(t, b)}}}
	tests := []struct {
		name    string
		certs   []*x509.Certificate
		wantID  string
		wantErr error
	}{
		{name: "b's CA issuing an a.example ID", certs: []*x509.Certificate{b.Issue(t, "spiffe://a.example/alice")}, wantErr: ErrInvalidCredentials},
		{name: "a's CA issuing a b.example ID, b's CA as intermediate", certs: []*x509.Certificate{a.Issue(t, "spiffe://b.example/bob"), b.Cert}, wantErr: ErrInvalidCredentials},
		{name: "a trust domain not bound", certs: []*x509.Certificate{a.Issue(t, "spiffe://c.example/carol")}, wantErr: ErrInvalidCredentials},
		{name: "a's CA, an a.example ID", certs: []*x509.Certificate{a.Issue(t, "spiffe://a.example/alice")}, wantID: "spiffe://a.example/alice"},
		{name: "b's CA, a b.example ID", certs: []*x509.Certificate{b.Issue(t, "spiffe://b.example/bob")}, wantID: "spiffe://b.example/bob"},
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
	for _, bad := range []map[string]string{{"A.example": testcerts.Bundle(t, a)}, {"a.example": ""}, {"a.example": filepath.Join(t.TempDir(), "none.pem")}} {
		if _, err := New(Config{Mode: Methods{MethodMTLS}, MTLS: MTLSConfig{TrustDomainCAFiles: bad}}, Options{}); err == nil {
			t.Errorf("New with trust_domain_ca_files %v: no error", bad)
		}
	}
}
