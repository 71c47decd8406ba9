package extauthz

import (
	"crypto/x509"
	"encoding/pem"
)

// parsePEM reads the client certificate chain Envoy forwards (it verified
// it when it terminated mTLS); nil when there is none.
func parsePEM(s string) []*x509.Certificate {
	var out []*x509.Certificate
	rest := []byte(s)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
