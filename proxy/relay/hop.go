package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// hopHeaders are not forwarded (RFC 9110 §7.6.1).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

// CopyHeaders copies src's end-to-end headers into dst without copying their
// values: each key's slice is src's, capped (three-index) so that appending
// to it in dst copies it first. Sound because no code in Warden writes a
// header value in place (Set, Add and Del replace or extend slices), and
// src, the caller's request or the upstream's answer, is not written after.
func CopyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if !hopHeaders[k] {
			dst[k] = vs[:len(vs):len(vs)]
		}
	}
}

// ErrBodyTooLarge is an answer over the bound ReadBody was given.
var ErrBodyTooLarge = errors.New("the answer exceeds the size limit")

// ReadBody reads an upstream answer whole, within max bytes (-1: no bound):
// ReadBodyTo into a fresh buffer.
func ReadBody(r io.Reader, max int64) ([]byte, error) {
	return ReadBodyTo(make([]byte, 0, 512), r, max)
}

// ReadBodyTo reads an upstream answer whole, within max bytes (-1: no
// bound), appending to buf (a pooled buffer, so that an answer is not read
// into a fresh one grown from nothing): at most max+1 bytes are read, and
// an answer over max is ErrBodyTooLarge.
func ReadBodyTo(buf []byte, r io.Reader, max int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		p := buf[len(buf):cap(buf)]
		if left := max + 1 - int64(len(buf)); max >= 0 && int64(len(p)) > left {
			p = p[:left]
		}
		n, err := r.Read(p)
		buf = buf[:len(buf)+n]
		if max >= 0 && int64(len(buf)) > max {
			return nil, ErrBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Undialed reports whether err, a transport's error for a request, says
// the request never left: no connection to the upstream could be made (a
// dial that failed), so the upstream cannot have it. Any other error
// leaves that unknown.
func Undialed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// WriteError answers with a JSON-RPC error of Warden's own.
func WriteError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	b := jsonrpc.ErrorBody(id, code, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Refusal is a request refused for capacity (listener.Busy): its HTTP
// status, and the headers it sets (Retry-After).
type Refusal interface {
	error
	HTTPStatus() int
	Header(http.Header)
}

// Busy answers a request refused for capacity: its status, its headers and
// a JSON-RPC error with id.
func Busy(w http.ResponseWriter, r Refusal, id json.RawMessage) {
	r.Header(w.Header())
	WriteError(w, r.HTTPStatus(), id, jsonrpc.ErrInternal, r.Error())
}

// Unread answers the caller in place of an upstream answer that could not
// be read whole (err), for the MCP and A2A sidecars alike. None of the
// upstream's headers pass. A refusal for capacity in err's chain (the answer
// bytes in flight) is answered as it is; an answer over the size limit
// (ErrBodyTooLarge) is replaced by limit, a JSON-RPC error the client reads
// as the answer to its request (HTTP 200); anything else is 502, "the
// <server>'s answer could not be read whole".
func Unread(w http.ResponseWriter, id json.RawMessage, err error, server, limit string) {
	for k := range w.Header() {
		delete(w.Header(), k)
	}
	var busy Refusal
	switch {
	case errors.As(err, &busy):
		Busy(w, busy, id)
	case errors.Is(err, ErrBodyTooLarge):
		WriteError(w, http.StatusOK, id, jsonrpc.ErrInternal, limit)
	default:
		WriteError(w, http.StatusBadGateway, id, jsonrpc.ErrInternal, "the "+server+"'s answer could not be read whole")
	}
}

// EventMax is the bound of one SSE event (Events.Max) for a sidecar's
// max_response_bytes: -1 (no bound of Warden's own) is 0.
func EventMax(maxResponse int64) int {
	if maxResponse < 0 {
		return 0
	}
	return int(maxResponse)
}

// Behalf copies onto out, a request Warden makes of its own for a caller
// (a task's status, a tool list), the headers keys of in, the caller's
// request; with strip, as Outbound does, the credential headers are left
// out. It asks for the answer uncompressed (Identity) and carries the trace
// context of out's context (Traced).
func Behalf(out *http.Request, in http.Header, strip bool, keys []string, credentials ...string) {
	for _, k := range keys {
		k = http.CanonicalHeaderKey(k)
		credential := slices.ContainsFunc(credentials, func(c string) bool { return http.CanonicalHeaderKey(c) == k })
		if v := in.Values(k); len(v) > 0 && !(strip && credential) {
			out.Header[k] = slices.Clone(v)
		}
	}
	Identity(out.Header)
	Traced(out)
}

// identity is the one Accept-Encoding value Warden sends upstream.
var identity = []string{"identity"}

// Identity asks the upstream for its answer as it is, uncompressed
// (Accept-Encoding: identity), in place of whatever the caller accepts:
// Warden reads every answer it decides on (ids, owners, events), and reads
// bytes, not gzip. Clients that ask for gzip by default (undici's fetch, so
// the MCP TypeScript SDK's client; curl --compressed; browsers) would
// otherwise have an upstream that compresses on request (express's
// compression middleware, many gateways) answer in bytes Warden refuses.
// An answer compressed anyway is refused (Compressed). The value is shared,
// capped so that an append copies it (CopyHeaders).
func Identity(h http.Header) { h["Accept-Encoding"] = identity[:1:1] }

// Compressed answers the caller in place of an upstream answer that came
// compressed though Identity asked for none (a Content-Encoding other than
// identity): 502 with a JSON-RPC error saying so, none of the upstream's
// headers (call it before they are copied) or bytes; it reports whether it
// did. Warden reads no compressed
// answer, so nothing of one passes half-decided.
func Compressed(w http.ResponseWriter, resp *http.Response, id json.RawMessage, server string) bool {
	c := Encoding(resp.Header)
	if c == "" {
		return false
	}
	WriteError(w, http.StatusBadGateway, id, jsonrpc.ErrInternal, "the "+server+"'s answer "+compressed(c))
	return true
}

// Traced gives out, a request to the upstream, the W3C trace context
// (traceparent, tracestate) of the span its context carries, Warden's
// server span for the caller's request: the upstream's spans become its
// children, in the client's trace. Without a span (tracing off) the
// caller's trace context, copied by Outbound, passes as it came.
func Traced(out *http.Request) {
	if trace.SpanContextFromContext(out.Context()).IsValid() {
		propagation.TraceContext{}.Inject(out.Context(), propagation.HeaderCarrier(out.Header))
	}
}

// replayLicenses are the header names net/http's Transport reads as the
// client's word that a POST may be sent twice (Request.isReplayable, by
// the canonical key alone), each with the lower-case spelling Outbound
// sends it in: with one, a request whose body can be read again (Body.Set
// gives it GetBody) goes out again on a new connection when the kept-alive
// one closes before the first answer byte, after the upstream may have run
// it. Field names are case-insensitive (RFC 9110 §5.1), so the upstream
// reads the header as the client sent it; the transport no longer does.
var replayLicenses = [...][2]string{{"Idempotency-Key", "idempotency-key"}, {"X-Idempotency-Key", "x-idempotency-key"}}

// Outbound copies the caller's request onto out, the request to the
// upstream: its end-to-end headers but Accept-Encoding (Identity: the
// answer uncompressed), never X-Warden-Principal (an identity
// header Warden owns, never the client's), and never a license for the
// transport to send it twice (replayLicenses): a request Warden decided
// reaches the upstream at most once. Host stays out's, the upstream
// URL's: the client's Host would let a virtual-hosted upstream or gateway
// route to another agent than the one Warden's handles and state address
// (and an upstream that checks Host against DNS rebinding would refuse
// every name Warden is served under but its own; Warden checks Origin
// itself). With strip (Warden authenticated from what the upstream cannot
// check), the credential headers are left out too.
func Outbound(out, in *http.Request, strip bool, credentials ...string) {
	if out.Header == nil || len(out.Header) == 0 && len(in.Header) > mapGroup {
		// sized once for the caller's headers, not grown key by key; up
		// to 8 fit the one group the empty map http.NewRequest made
		// takes on its first key, and that map is kept
		out.Header = make(http.Header, len(in.Header))
	}
	CopyHeaders(out.Header, in.Header)
	Identity(out.Header)
	out.Header.Del("X-Warden-Principal")
	for _, k := range replayLicenses {
		if vs, ok := out.Header[k[0]]; ok {
			delete(out.Header, k[0])
			out.Header[k[1]] = append(out.Header[k[1]], vs...)
		}
	}
	if strip {
		for _, k := range credentials {
			out.Header.Del(k)
		}
	}
	Traced(out)
}

// mapGroup is the most keys a map holds in its first allocation of
// entries (a swiss table's group).
const mapGroup = 8

// Target is an upstream endpoint's URL as http.NewRequest reads it, read
// once: a request to it (Request) is not a URL printed and parsed again.
type Target struct {
	url  url.URL
	host string
}

// NewTarget reads raw as http.NewRequest does.
func NewTarget(raw string) (Target, error) {
	r, err := http.NewRequest(http.MethodPost, raw, nil)
	if err != nil {
		return Target{}, err
	}
	return Target{url: *r.URL, host: r.Host}, nil
}

// Request is http.NewRequestWithContext(ctx, method, the target's URL,
// body).
func (t Target) Request(ctx context.Context, method string, body io.Reader) (*http.Request, error) {
	out, err := http.NewRequestWithContext(ctx, method, "", body)
	if err != nil {
		return nil, err
	}
	*out.URL, out.Host = t.url, t.host
	return out, nil
}

// SetBody gives out, a request made without a body, body b (read from
// memory): Body.Set on a Body of its own.
func SetBody(out *http.Request, b []byte) { new(Body).Set(out, b) }

// Body is a request body in memory, for a request to the upstream: held in
// what the caller allocates for the request anyway (an exchange), it costs
// the request no reader of its own.
type Body struct {
	r bytes.Reader
	b []byte
}

// Set gives out, a request made without a body, body b as http.NewRequest
// gives one a *bytes.Reader: its length; a reader net/http knows is in
// memory (an io.NopCloser of a *bytes.Reader), so that the transport writes
// the headers and the body in one write (for a reader of any other type it
// flushes the headers first: a write system call more per request,
// TestSetBodyOneWrite); and a GetBody that reads it again (the transport
// sends a request again on a new connection when a kept-alive one was
// closed under it before a byte of it was written; after, only with a
// license Outbound never gives, replayLicenses). Two allocations (the
// reader's wrapper and GetBody).
func (bd *Body) Set(out *http.Request, b []byte) {
	out.ContentLength = int64(len(b))
	if len(b) == 0 {
		out.Body, out.GetBody = http.NoBody, noBody
		return
	}
	bd.b = b
	bd.r.Reset(b)
	out.Body = io.NopCloser(&bd.r)
	out.GetBody = bd.again
}

// again is the body read again from its start, in a reader of its own.
func (bd *Body) again() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(bd.b)), nil }

func noBody() (io.ReadCloser, error) { return http.NoBody, nil }

// MediaType is the media type mime.ParseMediaType reads in a Content-Type
// value ("" when it reads none), without the map of parameters it builds
// for the two types answers come in.
func MediaType(contentType string) string {
	base, _, _ := strings.Cut(contentType, ";")
	if mt := strings.TrimSpace(strings.ToLower(base)); mt == "application/json" || mt == "text/event-stream" {
		return mt
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}
