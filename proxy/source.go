package proxy

import (
	"context"
	"log/slog"
)

// Source is whom a request came from and what it asked, as its door read
// it: every log line and decision record about the request carries it, for
// the operator to answer who sent it.
type Source struct {
	// Client is the client's address: the connection's peer on a sidecar,
	// Envoy's attributes.source.address under ext_authz.
	Client string
	// RequestID is the client's X-Request-Id when it sent one, else one
	// Warden minted (Enforcer.NewSource).
	RequestID string
	// Method and Path are the HTTP method and the request target's path
	// (a gRPC call's method path).
	Method, Path string
}

// RequestIDHeader is the header a request id is read from and, on the
// sidecars, returned in.
const RequestIDHeader = "X-Request-Id"

// maxRequestID bounds a client's request id; a longer one (or one with a
// byte that is not printable ASCII) is replaced by a minted one, so that a
// client cannot write what it likes into the operator's log.
const maxRequestID = 128

// NewSource is the source of a request, with the client's request id when
// it is one Warden keeps (printable ASCII, at most 128 bytes), else a fresh
// one minted by e as decision ids are (128 random bits, 26 base32
// characters): every door mints request ids here.
func (e *Enforcer) NewSource(client, requestID, method, path string) Source {
	if !keptRequestID(requestID) {
		requestID = e.ids.mint()
	}
	return Source{Client: client, RequestID: requestID, Method: method, Path: path}
}

func keptRequestID(s string) bool {
	if s == "" || len(s) > maxRequestID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

type sourceKey struct{}

// sourceCtx is a context carrying a source: one allocation per request,
// where context.WithValue took two (its context and the Source boxed in an
// interface).
type sourceCtx struct {
	context.Context
	src Source
}

// Value is the source for sourceKey, else the parent's value.
func (c *sourceCtx) Value(key any) any {
	if key == (sourceKey{}) {
		return &c.src
	}
	return c.Context.Value(key)
}

// WithSource returns ctx carrying the request's source, which every
// decision made on ctx records.
func WithSource(ctx context.Context, s Source) context.Context {
	return &sourceCtx{Context: ctx, src: s}
}

// SourceOf is the source ctx carries (zero when none).
func SourceOf(ctx context.Context) Source {
	if s, ok := ctx.Value(sourceKey{}).(*Source); ok {
		return *s
	}
	return Source{}
}

// Attr is the source as log fields (client_addr, request_id, http_method,
// path; empty ones dropped), inlined in the line.
func (s Source) Attr() slog.Attr {
	return slog.GroupAttrs("", optional("client_addr", s.Client), optional("request_id", s.RequestID),
		optional("http_method", s.Method), optional("path", s.Path))
}

// optional is a string field, dropped by slog when empty.
func optional(k, v string) slog.Attr {
	if v == "" {
		return slog.Attr{}
	}
	return slog.String(k, v)
}
