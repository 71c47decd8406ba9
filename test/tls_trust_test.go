package test

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.pool, MinVersion: tls.VersionTLS12,
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}}}
			req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"td","version":"0"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%s issued by another CA: HTTP %d, want %d", tc.id, resp.StatusCode, tc.status)
			}
		})
	}
}
