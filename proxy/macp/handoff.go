package macp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// chainHeader carries, from the relay front door to the grpc-go sidecar
// behind it, the client certificate chain the relay's TLS handshake
// verified: one value per certificate, leaf first, base64 DER.
const chainHeader = "x-warden-client-chain"

// clientHeader carries, likewise, the address of the client connection the
// relay took the call on: behind the relay the grpc-go sidecar's peer is the
// in-process pipe, and decision records name the client, whose connection a
// valid credential proves (authn.Proven).
const clientHeader = "x-warden-client-addr"

// handoff owns chainHeader and clientHeader, the headers through which the
// relay front door hands the grpc-go sidecar behind it what only the relay
// knows of a call: the verified client chain and the client's address. A
// client's copy is never read nor passed on: give writes the fields afresh
// on every header list the relay hands the sidecar, take reads them only on
// a call that came through the in-process pipe and removes them from the
// metadata every later use of the call reads (what the runtime receives
// included), and owned names them for the header lists the relay sends the
// runtime itself.
type handoff struct{}

// give is the header list the grpc-go sidecar receives for a request: the
// client's without any field handoff owns, with the verified chain and the
// client's address added.
func (handoff) give(header []hpack.HeaderField, client net.Addr, cs *tls.ConnectionState) []hpack.HeaderField {
	chain := verifiedChain(cs)
	out := make([]hpack.HeaderField, 0, len(header)+len(chain)+1)
	for _, f := range header {
		if f.Name != chainHeader && f.Name != clientHeader {
			out = append(out, f)
		}
	}
	for _, c := range chain {
		out = append(out, hpack.HeaderField{Name: chainHeader, Value: base64.StdEncoding.EncodeToString(c.Raw), Sensitive: true})
	}
	if client != nil {
		out = append(out, hpack.HeaderField{Name: clientHeader, Value: client.String()})
	}
	return out
}

// through reports whether a grpc-go call came through the relay front
// door's in-process pipe.
func (handoff) through(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	_, inner := p.Addr.(innerAddr)
	return inner
}

// take returns the verified client chain and the client's address of a
// grpc-go call: its own connection's (TLS handshake and peer), or behind the
// relay front door the ones give handed over; md, the call's metadata, no
// longer holds the fields handoff owns.
func (handoff) take(ctx context.Context, md metadata.MD) ([]*x509.Certificate, string, error) {
	values, clients := md[chainHeader], md[clientHeader]
	handoff{}.strip(md)
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, "", nil
	}
	if _, inner := p.Addr.(innerAddr); !inner {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			return ti.State.VerifiedChains[0], addrString(p.Addr), nil
		}
		return nil, addrString(p.Addr), nil
	}
	var client string
	if len(clients) == 1 { // give writes exactly one
		client = clients[0]
	}
	var chain []*x509.Certificate
	for _, v := range values {
		der, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, client, fmt.Errorf("client certificate chain from the relay: %w", err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, client, fmt.Errorf("client certificate chain from the relay: %w", err)
		}
		chain = append(chain, c)
	}
	return chain, client, nil
}

// strip removes a client's copies of the fields handoff owns from the
// metadata of a call the relay decides itself (whose chain and address are
// its own connection's).
func (handoff) strip(md metadata.MD) {
	delete(md, chainHeader)
	delete(md, clientHeader)
}

// owned reports whether a header field is one of the identity fields
// Warden owns (chainHeader, clientHeader, principalHeader): never passed on
// from a client.
func (handoff) owned(name string) bool {
	return name == chainHeader || name == clientHeader || name == principalHeader
}

// verifiedChain is the client certificate chain a TLS handshake verified,
// or nil.
func verifiedChain(cs *tls.ConnectionState) []*x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 {
		return nil
	}
	return cs.VerifiedChains[0]
}
