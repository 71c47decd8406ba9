package macp

import (
	"context"
	"crypto/tls"
	"crypto/x509"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// chainHeader and clientHeader are identity fields Warden owns (they once
// carried the verified client chain and the client's address from the
// relay front door to a grpc-go server behind it): a client's copy is never
// read nor passed on.
const (
	chainHeader  = "x-warden-client-chain"
	clientHeader = "x-warden-client-addr"
)

// handoff owns the identity fields a client may not set for the runtime
// (chainHeader, clientHeader, principalHeader): both doors take a call's
// verified chain and address from its own connection only, strip the
// fields from the metadata every later use of the call reads (what the
// runtime receives included), and owned names them for the header lists
// the relay sends the runtime itself.
type handoff struct{}

// take returns the verified client chain and the client's address of a
// grpc-go call, its own connection's (TLS handshake and peer); md, the
// call's metadata, no longer holds the fields handoff owns.
func (handoff) take(ctx context.Context, md metadata.MD) ([]*x509.Certificate, string) {
	handoff{}.strip(md)
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, ""
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
		return ti.State.VerifiedChains[0], addrString(p.Addr)
	}
	return nil, addrString(p.Addr)
}

// strip removes a client's copies of the fields handoff owns from the
// metadata of a call (whose chain and address are its own connection's).
func (handoff) strip(md metadata.MD) {
	delete(md, chainHeader)
	delete(md, clientHeader)
}

// taken reports whether a metadata name is one strip removes.
func (handoff) taken(name string) bool { return name == chainHeader || name == clientHeader }

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
