package test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
)

// TestMCPTrustDomains: two trust domains' CAs in one client CA bundle, each
// bound to its own domain (authn.mtls.trust_domain_ca_files), in front of
// the TypeScript SDK's server over real TLS: a certificate one domain's CA
// issued naming the other domain's ID is refused 401 (admitted as that ID
// before: the handshake verifies against the union), as is a domain not
// bound; each CA's own IDs are admitted.
func TestMCPTrustDomains(t *testing.T) {
	a, b := newPKI(t), newPKI(t)
	serverCert, serverKey, _ := a.issue(t, "warden", true, "")
	bundle := filepath.Join(t.TempDir(), "client-ca.pem")
	writeBundle(t, bundle, a, b)
	cfg := filepath.Join(t.TempDir(), "warden.yaml")
	yaml := "authn:\n  mode: mtls\n  mtls:\n    trust_domain_ca_files:\n      a.example: " + filepath.Join(a.dir, "ca.pem") + "\n      b.example: " + filepath.Join(b.dir, "ca.pem") + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	upstream := startNodeMCP(t)
	addr := freeAddr(t)
	start(t, "warden", addr, nil, wardenBinary(t), "serve", "--config", cfg, "--mcp-listen", addr, "--mcp-upstream", upstream+"/mcp",
		"--tls-cert", serverCert, "--tls-key", serverKey, "--tls-client-ca", bundle)
	for _, tc := range []struct {
		name   string
		issuer *pki
		id     string
		status int
	}{
		{"b.example's CA naming an a.example ID", b, "spiffe://a.example/alice", http.StatusUnauthorized},
		{"a.example's CA naming a b.example ID", a, "spiffe://b.example/bob", http.StatusUnauthorized},
		{"a trust domain not bound", a, "spiffe://c.example/carol", http.StatusUnauthorized},
		{"a.example's own ID", a, "spiffe://a.example/alice", http.StatusOK},
		{"b.example's own ID", b, "spiffe://b.example/bob", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, pair := tc.issuer.issue(t, strings.NewReplacer(":", "-", "/", "-").Replace(tc.id), false, tc.id)
			if got := initializeAs(t, addr, a.pool, pair); got != tc.status {
				t.Fatalf("%s issued by another CA: HTTP %d, want %d", tc.id, got, tc.status)
			}
		})
	}
}

// TestMCPSubjectCommonNames: with authn.mtls.allow_subject, a client
// certificate whose subject holds two CommonNames is two identities in one
// credential (Go reads the last, OpenSSL's first-index lookup the first): it
// is refused, through bin/warden over real TLS in front of the TypeScript
// SDK's server; one CommonName beside other attributes is admitted.
func TestMCPSubjectCommonNames(t *testing.T) {
	ca := newPKI(t)
	serverCert, serverKey, _ := ca.issue(t, "warden", true, "")
	cfg := filepath.Join(t.TempDir(), "warden.yaml")
	if err := os.WriteFile(cfg, []byte("authn:\n  mode: mtls\n  mtls:\n    allow_subject: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	upstream := startNodeMCP(t)
	addr := freeAddr(t)
	start(t, "warden", addr, nil, wardenBinary(t), "serve", "--config", cfg, "--mcp-listen", addr, "--mcp-upstream", upstream+"/mcp",
		"--tls-cert", serverCert, "--tls-key", serverKey, "--tls-client-ca", filepath.Join(ca.dir, "ca.pem"))
	cn := func(v string) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: v}
	}
	org := pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "Example"}
	for _, tc := range []struct {
		name    string
		subject pkix.RDNSequence
		status  int
	}{
		{"two CommonNames", pkix.RDNSequence{{cn("alice")}, {cn("bob")}}, http.StatusUnauthorized},
		{"two CommonNames in one RDN", pkix.RDNSequence{{cn("alice"), cn("bob")}}, http.StatusUnauthorized},
		{"one CommonName beside an organization", pkix.RDNSequence{{org}, {cn("bob")}}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := initializeAs(t, addr, ca.pool, ca.issueSubject(t, tc.subject)); got != tc.status {
				t.Fatalf("subject %v: HTTP %d, want %d", tc.subject, got, tc.status)
			}
		})
	}
}

// initializeAs sends an MCP initialize to the sidecar at addr over TLS
// (the server verified against roots) with the client certificate pair,
// and returns the HTTP status.
func initializeAs(t *testing.T, addr string, roots *x509.CertPool, pair tls.Certificate) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}}}
	req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tls","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// issueSubject returns a client certificate whose subject is exactly rdns
// (pkix.Name cannot write two CommonNames).
func (p *pki) issueSubject(t *testing.T, rdns pkix.RDNSequence) tls.Certificate {
	t.Helper()
	raw, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), RawSubject: raw, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	key := testcerts.Key(t)
	return tls.Certificate{Certificate: [][]byte{testcerts.Sign(t, tmpl, p.Cert, key, p.Key).Raw}, PrivateKey: key}
}
