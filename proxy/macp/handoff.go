package macp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"slices"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// chainHeader carries, from the relay front door to the grpc-go sidecar
// behind it, the client certificate chain the relay's TLS handshake
// verified: one value per certificate, leaf first, base64 DER.
const chainHeader = "x-warden-client-chain"

// handoff owns chainHeader, the one header through which a verified client
// chain passes from the relay front door to the grpc-go sidecar. A client's
// copy is never read nor passed on: give writes the field afresh on every
// header list the relay hands the sidecar, take reads it only on a call that
// came through the in-process pipe and removes it from the metadata every
// later use of the call reads (what the runtime receives included), and
// owned names it for the header lists the relay sends the runtime itself.
type handoff struct{}

// give is the header list the grpc-go sidecar receives for a request: the
// client's without any chainHeader, with the verified chain added; nil (the
// client's unchanged) when there is nothing to remove or add.
func (handoff) give(header []hpack.HeaderField, cs *tls.ConnectionState) []hpack.HeaderField {
	chain := verifiedChain(cs)
	if chain == nil && !slices.ContainsFunc(header, func(f hpack.HeaderField) bool { return f.Name == chainHeader }) {
		return nil
	}
	out := make([]hpack.HeaderField, 0, len(header)+len(chain))
	for _, f := range header {
		if f.Name != chainHeader {
			out = append(out, f)
		}
	}
	for _, c := range chain {
		out = append(out, hpack.HeaderField{Name: chainHeader, Value: base64.StdEncoding.EncodeToString(c.Raw), Sensitive: true})
	}
	return out
}

// take returns the verified client chain of a grpc-go call: its own TLS
// handshake's, or behind the relay front door the one give handed over;
// md, the call's metadata, no longer holds chainHeader.
func (handoff) take(ctx context.Context, md metadata.MD) ([]*x509.Certificate, error) {
	values := md[chainHeader]
	delete(md, chainHeader)
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, nil
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
		return ti.State.VerifiedChains[0], nil
	}
	if _, inner := p.Addr.(innerAddr); !inner {
		return nil, nil
	}
	var chain []*x509.Certificate
	for _, v := range values {
		der, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("client certificate chain from the relay: %w", err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("client certificate chain from the relay: %w", err)
		}
		chain = append(chain, c)
	}
	return chain, nil
}

// strip removes a client's chainHeader from the metadata of a call the
// relay decides itself (whose chain is its own handshake's).
func (handoff) strip(md metadata.MD) { delete(md, chainHeader) }

// owned reports whether a header field is one of the identity fields
// Warden owns (chainHeader, principalHeader): never passed on from a
// client.
func (handoff) owned(name string) bool { return name == chainHeader || name == principalHeader }

// verifiedChain is the client certificate chain a TLS handshake verified,
// or nil.
func verifiedChain(cs *tls.ConnectionState) []*x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 {
		return nil
	}
	return cs.VerifiedChains[0]
}
