package listener

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ServerTLS loads a listener's TLS configuration: the certificate and key
// (TLS 1.2 at least) and, when clientCAFile is set, the CAs that verify
// client certificates. A client certificate is verified if given but not
// required, so bearer credentials keep working beside mTLS. nextProtos are
// the ALPN protocols offered (none for gRPC, which sets its own).
func ServerTLS(certFile, keyFile, clientCAFile string, nextProtos ...string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	if clientCAFile != "" {
		pool, err := CertPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// CertPool reads a PEM bundle of CA certificates.
func CertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}
