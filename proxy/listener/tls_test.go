package listener

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
)

// testCA is a throwaway CA issuing leaves.
type testCA = testcerts.CA

func newTestCA(t *testing.T, name string) testCA { return testcerts.NewCA(t, name, time.Now()) }

// leafPEM issues a server (127.0.0.1) or client certificate of ca as PEM.
func leafPEM(t *testing.T, ca testCA, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k := ca.Leaf(t, "leaf", server, "")
	return testcerts.PEM(c), testcerts.KeyPEM(t, k)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSReload: a reload (Reload, as SIGHUP does, or Watch noticing the
// files changed) installs the new client CA bundle and certificate for new
// handshakes and closes the open connections whose client chain no longer
// verifies; connections without a client certificate, or whose chain still
// verifies, stay. Before, the bundle read at start admitted forever.
func TestTLSReload(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reload func(t *testing.T, m *TLS)
	}{
		{"Reload", func(t *testing.T, m *TLS) {
			if err := m.Reload(); err != nil {
				t.Fatal(err)
			}
		}},
		{"Watch", func(t *testing.T, m *TLS) {
			replaced := make(chan error, 1)
			m.OnReload(func(err error) {
				select {
				case replaced <- err:
				default:
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = m.Watch(ctx, 20*time.Millisecond); close(done) }()
			select { // the watch noticed the files changed (not a fixed wait, which a loaded machine can outlast)
			case err := <-replaced:
				if err != nil {
					t.Errorf("the watch's reload: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("the watch did not reload the changed files in 10 s")
			}
			cancel()
			<-done
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testTLSReload(t, tc.reload) })
	}
}

func testTLSReload(t *testing.T, reload func(t *testing.T, m *TLS)) {
	dir := t.TempDir()
	serverCA, oldCA, newCA := newTestCA(t, "server CA"), newTestCA(t, "old client CA"), newTestCA(t, "new client CA")
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	sc, sk := leafPEM(t, serverCA, true)
	writeFile(t, certFile, sc)
	writeFile(t, keyFile, sk)
	writeFile(t, caFile, append(append([]byte{}, oldCA.PEM()...), newCA.PEM()...))
	m, err := NewTLS(certFile, keyFile, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := tls.NewListener(m.Track(raw), m.Config())
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }() // echo until closed
		}
	}()
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)
	dial := func(ca *testCA) (net.Conn, error) {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if ca != nil {
			cp, kp := leafPEM(t, *ca, false)
			pair, err := tls.X509KeyPair(cp, kp)
			if err != nil {
				t.Fatal(err)
			}
			// Sent whatever CAs the server names (Go's client would
			// otherwise send none that the server does not name).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		c, err := tls.Dial("tcp", raw.Addr().String(), cfg)
		if err != nil {
			return nil, err
		}
		// TLS 1.3 reports a refused client certificate on the first read.
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			c.Close()
			return nil, err
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			c.Close()
			return nil, err
		}
		_ = c.SetDeadline(time.Time{})
		return c, nil
	}
	open := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(time.Second))
		defer func() { _ = c.SetDeadline(time.Time{}) }()
		if _, err := c.Write([]byte("y")); err != nil {
			return false
		}
		_, err := io.ReadFull(c, make([]byte, 1))
		return err == nil
	}
	oldConn, err := dial(&oldCA)
	if err != nil {
		t.Fatalf("old CA before the reload: %v", err)
	}
	defer oldConn.Close()
	newConn, err := dial(&newCA)
	if err != nil {
		t.Fatalf("new CA before the reload: %v", err)
	}
	defer newConn.Close()
	bearer, err := dial(nil)
	if err != nil {
		t.Fatalf("no client certificate: %v", err)
	}
	defer bearer.Close()

	// The old CA leaves the bundle; the server certificate is rotated.
	writeFile(t, caFile, newCA.PEM())
	sc2, sk2 := leafPEM(t, serverCA, true)
	writeFile(t, certFile, sc2)
	writeFile(t, keyFile, sk2)
	reload(t, m)

	if open(oldConn) {
		t.Error("the connection whose client certificate the removed CA issued is still open")
	}
	if !open(newConn) {
		t.Error("a connection whose client certificate still verifies was closed")
	}
	if !open(bearer) {
		t.Error("a connection without a client certificate was closed")
	}
	if c, err := dial(&oldCA); err == nil {
		c.Close()
		t.Error("a new handshake with the removed CA's certificate succeeded")
	}
	c, err := dial(&newCA)
	if err != nil {
		t.Fatalf("new CA after the reload: %v", err)
	}
	defer c.Close()
	blk, _ := pem.Decode(sc2)
	if got := c.(*tls.Conn).ConnectionState().PeerCertificates[0].Raw; string(got) != string(blk.Bytes) {
		t.Error("the new handshake did not get the rotated server certificate")
	}

	// A half-written file keeps the current material.
	writeFile(t, keyFile, []byte("partial"))
	if err := m.Reload(); err == nil {
		t.Error("a broken key file was accepted")
	}
	if c, err := dial(&newCA); err != nil {
		t.Errorf("after a failed reload: %v", err)
	} else {
		c.Close()
	}
}
