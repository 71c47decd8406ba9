// Package gate is the one front door of Warden's JSON-RPC protocols (MCP
// Streamable HTTP, A2A's JSON-RPC binding), whatever the transport: the
// standalone sidecars build a Request from an *http.Request, ext_authz from
// Envoy's CheckRequest, and both admit it here, in one order:
//
//  1. path: the endpoint's, byte for byte (a public document such as the
//     agent card or the protected-resource metadata: GET or HEAD only);
//  2. HTTP method: the protocol's; a method without a message carries no body;
//  3. Origin and the protocol's routing headers;
//  4. credentials: keys unavailable is 503, any other failure 401 with the
//     challenge (RFC 6750, with RFC 9728's resource_metadata when the
//     protocol has one);
//  5. content headers: the body is application/json in UTF-8, with no
//     parameter but charset=utf-8, no Content-Encoding but identity, no
//     Transfer-Encoding but chunked, one Content-Type; every header that
//     could make the upstream decode other characters than Warden read is
//     refused (415);
//  6. body bounds: over the limit (or cut by Envoy) is 413;
//  7. parse: one JSON-RPC message in UTF-8, no byte order mark;
//  8. the protocol's method allow-list.
//
// A request target with a query (even an empty one, a bare "?") is refused
// at steps 1 and 2, at every path: the query is undecided input the
// upstream may read (MCP's legacy HTTP+SSE transport routes by
// ?sessionId=, servers take API keys in ?key=), and none of these
// protocols puts anything there. POST to the endpoint gets the protocol's
// parse-error answer (JSON-RPC), any other request 400. So is a request
// with a header some server frameworks read as its method or target in
// place of the request line's (X-HTTP-Method-Override, X-Original-URL, X-Forwarded-Prefix, ...:
// overridden): what Warden decided would not be what such an upstream
// serves; so is one asserting an identity (X-Forwarded-User, X-Tenant-Id);
// and so is any header name holding '_' (CGI and WSGI servers read
// Mcp_Name as Mcp-Name, X_Warden_Principal as X-Warden-Principal): the one
// rule on names every door applies, MACP's too (headername).
//
// Every refusal is an Answer: a value recorded as a decision (its id in
// X-Warden-Decision) and rendered once per wire, by Write for an
// http.ResponseWriter and by ext_authz for Envoy's CheckResponse. In dry run
// the refusals of steps 3, 4 (but keys unavailable), 5 and 8 are recorded
// with dry_run true and the request admitted (an unauthenticated one as the
// anonymous principal); those of steps 1, 2, 6 and 7 stay refused: there is
// no endpoint to forward to, or no whole message to forward and decide. What a
// protocol adds (its paths, methods, codes, challenge, parser and allow-list)
// is a Spec, not another copy of the sequence.
package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/headername"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Request is one HTTP request as a door sees it.
type Request struct {
	Method string
	// Path is the request target's path as sent (percent-escapes kept),
	// without its query; Query reports whether the target had one (a "?",
	// even with nothing after it).
	Path  string
	Query bool
	// Host is the request's host (HTTP/1.1 Host, HTTP/2 :authority), TLS
	// whether it came over TLS.
	Host string
	TLS  bool
	// Header holds every field line the door saw; Envoy's CheckRequest
	// joins repeated fields with commas into one value, and Joined says so
	// (a comma in a value cannot be told from a second line there).
	Header http.Header
	Joined bool
	// Creds and CredErr are the request's credentials as the door reads
	// them (authn.FromHTTP, or ext_authz's headers and client certificate).
	Creds   authn.Credentials
	CredErr error
	// HasBody reports whether the request carries or announces a body.
	HasBody bool
	// Body returns the body, reading at most limit+1 bytes; over limit it
	// returns what it read with ErrTooBig. FromHTTP leaves it nil and reads
	// the *http.Request it holds (readBody) instead: no closure per request.
	Body func(limit int64) ([]byte, error)

	// w and hr are FromHTTP's request and its writer, read when Body is nil.
	w  http.ResponseWriter
	hr *http.Request
}

// body is Body(limit), or FromHTTP's request read by readBody.
func (r *Request) body(limit int64) ([]byte, error) {
	if r.Body != nil {
		return r.Body(limit)
	}
	return readBody(r.w, r.hr, limit)
}

// FromHTTP is the Request of a sidecar's *http.Request; its body is read
// through http.MaxBytesReader, so a client sending more than the limit has
// its connection closed after the answer.
func FromHTTP(w http.ResponseWriter, r *http.Request) *Request {
	creds, err := authn.FromHTTP(r)
	return &Request{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery != "" || r.URL.ForceQuery, Host: r.Host, TLS: r.TLS != nil, Header: r.Header,
		Creds: creds, CredErr: err, HasBody: r.ContentLength != 0,
		w: w, hr: r,
	}
}

// maxSized is the largest announced body read into a buffer of its size.
const maxSized = 16 << 10

// readBody reads r's body within limit: a small body of announced length
// within it into a buffer of that length (net/http's body ends there, so
// that no bound is met), any other through http.MaxBytesReader into a
// buffer grown as the bytes arrive (a length announced is not memory given
// before they do).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= limit && n <= maxSized {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
		return b, ErrTooBig
	}
	return b, err
}

// ErrTooBig is Request.Body's error for a body over the limit, and ErrCut
// for one Envoy buffered only in part: both are refused 413.
var (
	ErrTooBig = errors.New("the request body is over the limit")
	ErrCut    = errors.New("the request body reached Warden cut short (raise Envoy's max_request_bytes to at least the body limit)")
)

// Spec is what a protocol gives the gate.
type Spec[C any] struct {
	// Protocol names the decisions ("mcp", "a2a").
	Protocol string
	// Requests is the protocol as its requests are counted and traced
	// (proxy.Enforcer.Begin): its method labels.
	Requests *proxy.Protocol
	// Endpoint is the JSON-RPC endpoint's path, compared byte for byte: an
	// escape, a dot segment or a doubled slash is another path, which an
	// upstream may route to another handler.
	Endpoint string
	// Public are the paths of documents read without credentials by GET or
	// HEAD (the agent card, the protected-resource metadata).
	Public []string
	// REST answers refusals of paths and of public documents in the
	// HTTP+JSON binding's error shape (A2A) instead of JSON-RPC's.
	REST bool
	// Methods are the endpoint's HTTP methods; POST carries a message, the
	// others none.
	Methods []string
	// Origin reports whether a request's Origin may call the endpoint (nil:
	// any).
	Origin func(origin string) bool
	// Own are the protocol's own headers whose names may read as a method
	// or target (MCP's Mcp-Method; a name ending in '-' is a prefix: MCP's
	// Mcp-Param-, whose names a server's tools choose): the protocol
	// defines and decides them (Routing and the protocol's decision), so
	// the gate's override rule leaves them alone.
	Own []string
	// Routing returns why the protocol's routing headers cannot be read as
	// the upstream reads them ("" when they can).
	Routing func(h http.Header) string
	// ResourceMetadata is the protected-resource metadata URL of the 401
	// challenge ("" for none); it must come from configuration.
	ResourceMetadata func(r *Request) string
	// MaxBody bounds a message; MaxBodyKey names the setting.
	MaxBody    int64
	MaxBodyKey string
	// ParseStatus is the HTTP status of a parse error's answer, and EchoID
	// whether it names the request's id when it could be read.
	ParseStatus int
	EchoID      bool
	// Parse reads the message; it returns the request's id as far as it
	// could read it.
	Parse func(body []byte) (C, json.RawMessage, error)
	// Method names the message's method for the request metrics and the
	// server span (proxy.Flight.SetMethod bounds it to the protocol's
	// table).
	Method func(C) string
	// Check is the protocol's method allow-list: a refusal of the message
	// (and the id to answer it with), or an OK verdict.
	Check func(C) (rules.Verdict, json.RawMessage)
	// Answer maps a refusal's code to the protocol's HTTP status, JSON-RPC
	// code and message.
	Answer func(code rules.Code, detail string) (status, rpc int, msg string)
}

// Gate admits requests for one protocol.
type Gate[C any] struct {
	spec Spec[C]
	enf  *proxy.Enforcer
	door *proxy.Door // the protocol's requests at the sidecar (Serve)
	log  *slog.Logger
}

// New builds a gate.
func New[C any](spec Spec[C], enf *proxy.Enforcer, log *slog.Logger) *Gate[C] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate[C]{spec: spec, enf: enf, door: enf.Door(spec.Requests, proxy.DoorSidecar), log: log}
}

// Admitted is a request the gate let in.
type Admitted[C any] struct {
	// Public is set for a public document's path (read with GET or HEAD):
	// nothing else was checked.
	Public string
	// Principal is the authenticated caller, Creds its credentials.
	Principal authn.Principal
	Creds     authn.Credentials
	// Message reports whether the request carries a message (POST): Call
	// and Body are set.
	Message bool
	Call    C
	Body    []byte
}

// Admit runs the front door. A request is either admitted or refused with
// the Answer to send.
func (g *Gate[C]) Admit(ctx context.Context, r *Request) (Admitted[C], *Answer) {
	var in Admitted[C]
	f := proxy.FlightOf(ctx)
	if slices.Contains(g.spec.Public, r.Path) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.Query || refusedHeader(r.Header, g.spec.Own)) {
			a := g.refuseQuery(ctx, r, http.StatusBadRequest, g.spec.REST)
			return in, &a
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			f.SetMethod(r.Method)
			in.Public = r.Path
			return in, nil
		}
		a := g.refuse(ctx, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: "the document at " + r.Path + " is read with GET"},
			http.StatusMethodNotAllowed, jsonrpc.ErrInvalidRequest, nil, g.spec.REST)
		a.Header = append(a.Header, [2]string{"Allow", "GET, HEAD"})
		return in, &a
	}
	if r.Path != g.spec.Endpoint {
		msg := "Warden serves the " + g.name() + " endpoint at " + g.spec.Endpoint + " only"
		a := g.refuse(ctx, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonUnknownMethod, Detail: msg}, http.StatusNotFound, jsonrpc.ErrInvalidRequest, nil, g.spec.REST)
		return in, &a
	}
	if !slices.Contains(g.spec.Methods, r.Method) {
		msg := "method not allowed: the " + g.name() + " endpoint takes " + strings.Join(g.spec.Methods, ", ")
		a := g.refuse(ctx, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg}, http.StatusMethodNotAllowed, jsonrpc.ErrInvalidRequest, nil, false)
		a.Header = append(a.Header, [2]string{"Allow", strings.Join(g.spec.Methods, ", ")})
		return in, &a
	}
	in.Message = r.Method == http.MethodPost
	if r.Query || refusedHeader(r.Header, g.spec.Own) {
		status := http.StatusBadRequest
		if in.Message {
			status = g.spec.ParseStatus
		}
		a := g.refuseQuery(ctx, r, status, false)
		return in, &a
	}
	if !in.Message {
		f.SetMethod(r.Method)
	}
	if !in.Message && r.HasBody {
		msg := "invalid request: " + r.Method + " carries no message body"
		a := g.refuse(ctx, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg}, http.StatusBadRequest, jsonrpc.ErrInvalidRequest, nil, false)
		return in, &a
	}
	if o := r.Header.Get("Origin"); g.spec.Origin != nil && !g.spec.Origin(o) {
		if a := g.deny(ctx, "", rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonOriginRefused, Detail: "Origin " + o + " is not allowed"}, nil, 0, 0); a != nil {
			return in, a
		}
	}
	if g.spec.Routing != nil {
		if why := g.spec.Routing(r.Header); why != "" {
			if a := g.deny(ctx, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: why}, nil, 0, 0); a != nil {
				return in, a
			}
		}
	}
	p, a := g.authenticate(ctx, r)
	if a != nil {
		return in, a
	}
	in.Principal, in.Creds = p, r.Creds
	f.SetPrincipal(p.ID)
	if !in.Message {
		return in, nil
	}
	if why := checkContent(r.Header); why != "" {
		if a := g.deny(ctx, p.ID, rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: why}, nil, http.StatusUnsupportedMediaType, jsonrpc.ErrInvalidRequest); a != nil {
			return in, a
		}
	}
	body, err := r.body(g.spec.MaxBody)
	if errors.Is(err, ErrTooBig) || errors.Is(err, ErrCut) {
		g.log.Warn("request over the body limit refused", "protocol", g.spec.Protocol, "principal", p.ID, "limit", g.spec.MaxBody, "err", err, proxy.SourceOf(ctx).Attr())
		msg := fmt.Sprintf("the request exceeds Warden's limit %s (%d bytes)", g.spec.MaxBodyKey, g.spec.MaxBody)
		if errors.Is(err, ErrCut) {
			msg = err.Error()
		}
		a := g.refuse(ctx, p.ID, rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg}, http.StatusRequestEntityTooLarge, jsonrpc.ErrInvalidRequest, headID(body), false)
		return in, &a
	}
	if err != nil {
		a := g.refuse(ctx, p.ID, rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: "could not read the request body"}, http.StatusBadRequest, jsonrpc.ErrParse, nil, false)
		return in, &a
	}
	call, id, err := g.parse(body)
	if err != nil {
		if !g.spec.EchoID || !jsonrpc.ValidID(id) {
			id = nil
		}
		a := g.refuse(ctx, p.ID, rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: err.Error()}, g.spec.ParseStatus, jsonrpc.CodeOf(err), id, false)
		return in, &a
	}
	f.SetMethod(g.spec.Method(call))
	if v, id := g.spec.Check(call); !v.OK() {
		if a := g.deny(ctx, p.ID, v, id, 0, 0); a != nil {
			return in, a
		}
	}
	in.Call, in.Body = call, body
	return in, nil
}

// refuseQuery refuses a request target with a query, or a header naming
// another method or target: the upstream could read it, Warden decides
// neither (no protocol it serves puts anything there).
func (g *Gate[C]) refuseQuery(ctx context.Context, r *Request, status int, rest bool) Answer {
	msg := "invalid request: Warden serves " + r.Path + " without a query (remove the ?... from the URL)"
	if h, kind := overridden(r.Header, g.spec.Own); kind != headername.None {
		msg = "invalid request: " + kind.Why(h)
	}
	return g.refuse(ctx, "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: msg}, status, jsonrpc.ErrInvalidRequest, nil, rest)
}

// overridden names a header of h the gate refuses ("" when none) and why:
// the one rule on header names every door applies (headername), the
// protocol's own headers, which it decides (MCP's Mcp-Method,
// Mcp-Param-*), left to it.
func overridden(h http.Header, own []string) (string, headername.Kind) {
	for k := range h {
		if kind := headername.Of(k, own); kind != headername.None {
			return k, kind
		}
	}
	return "", headername.None
}

// refusedHeader reports whether h holds a header overridden names.
func refusedHeader(h http.Header, own []string) bool {
	_, kind := overridden(h, own)
	return kind != headername.None
}

// authenticate checks the request's credentials: keys unavailable is 503,
// any other failure 401 with the challenge.
func (g *Gate[C]) authenticate(ctx context.Context, r *Request) (authn.Principal, *Answer) {
	var p authn.Principal
	err := r.CredErr
	if err == nil {
		p, err = g.enf.Authenticate(ctx, r.Creds)
	}
	switch {
	case errors.Is(err, authn.ErrKeysUnavailable):
		g.log.Warn("cannot authenticate: verification keys unavailable", "protocol", g.spec.Protocol, "err", err, proxy.SourceOf(ctx).Attr())
		a := g.answer(ctx, "", rules.Verdict{Code: rules.CodeInternal, Reason: rules.ReasonUnavailable, Detail: "authentication is unavailable; retry later"}, nil)
		return p, &a
	case err != nil:
		var metadata string
		if g.spec.ResourceMetadata != nil {
			metadata = g.spec.ResourceMetadata(r)
		}
		d := g.enf.RefuseAuth(ctx, g.spec.Protocol, "", err) // the cause for the operator, the generic reason for the client
		if d.DryRun {
			return authn.Principal{}, nil // forwarded as the anonymous principal
		}
		status, rpc, msg := g.spec.Answer(rules.CodeUnauthenticated, authn.Reason(err))
		a := jsonrpcAnswer(status, nil, rpc, msg, d.ID)
		a.Header = append(a.Header, [2]string{"WWW-Authenticate", authn.Challenge(metadata, err)})
		return p, &a
	}
	return p, nil
}

// parse reads a message that must be UTF-8 JSON: a byte order mark or a
// byte that is not UTF-8 is a parse error (peers that decode it replace or
// strip it, each its own way).
func (g *Gate[C]) parse(body []byte) (C, json.RawMessage, error) {
	if why := checkText(body); why != "" {
		var zero C
		return zero, nil, &jsonrpc.Error{Code: jsonrpc.ErrParse, Message: why}
	}
	return g.spec.Parse(body)
}

func (g *Gate[C]) name() string { return strings.ToUpper(g.spec.Protocol) }

// Refused is the Answer to a request the Enforcer refused (d.Allow false):
// the protocol's status, code and message, the decision's id.
func (g *Gate[C]) Refused(d proxy.Decision, id json.RawMessage) Answer {
	status, rpc, msg := g.spec.Answer(d.Code, d.Message)
	return jsonrpcAnswer(status, id, rpc, msg, d.ID)
}

// Refuse records a refusal the door makes after the gate (a session or an
// event id that is not the caller's) and returns its Answer.
func (g *Gate[C]) Refuse(ctx context.Context, principal string, v rules.Verdict, status, rpc int, id json.RawMessage) Answer {
	return g.refuse(ctx, principal, v, status, rpc, id, false)
}

// Deny records a refusal the door makes after the gate of a request Warden
// could forward whole (a session or an event id that is not the caller's)
// and returns its Answer; nil in dry run, which forwards the request and
// records the refusal with dry_run, as every dry-run refusal is.
func (g *Gate[C]) Deny(ctx context.Context, principal string, v rules.Verdict, status, rpc int, id json.RawMessage) *Answer {
	return g.deny(ctx, principal, v, id, status, rpc)
}

// Unavailable is the one answer to a request Warden could not decide (a
// store, a status or the shared state could not be read): logged with the
// cause, recorded, and 503 for the client to retry. A refusal for capacity
// in err's chain (listener.Busy: a read of Warden's own past the caller's
// streams.per_principal, security.md X3, or past the answer budget) is
// recorded and answered as that refusal is when it refuses a forwarded
// request: its status, its Retry-After, its message.
func (g *Gate[C]) Unavailable(ctx context.Context, principal, method string, id json.RawMessage, err error) Answer {
	var busy interface {
		error
		HTTPStatus() int
		Header(http.Header)
	}
	if errors.As(err, &busy) {
		d := g.enf.Refuse(ctx, g.spec.Protocol, principal, "", rules.Verdict{Code: rules.CodeInternal, Reason: rules.ReasonUnavailable, Detail: busy.Error()})
		a := jsonrpcAnswer(busy.HTTPStatus(), id, jsonrpc.ErrInternal, busy.Error(), d.ID)
		h := http.Header{}
		busy.Header(h)
		for k, vs := range h {
			for _, v := range vs {
				a.Header = append(a.Header, [2]string{k, v})
			}
		}
		return a
	}
	g.log.Warn("could not decide a request; refusing it", "protocol", g.spec.Protocol, "method", method, "principal", principal, "err", err, proxy.SourceOf(ctx).Attr())
	detail := Undecided
	if c, ok := Cause(err); ok {
		detail = "Warden could not decide this request: " + c
	}
	return g.answer(ctx, principal, rules.Verdict{Code: rules.CodeInternal, Reason: rules.ReasonUnavailable, Detail: detail}, id)
}

// Undecided is what a client is told when Warden could not decide.
const Undecided = "Warden could not decide this request; retry later"

// Cause returns what a client may be told of err, an error of Warden's
// own request to the upstream: the cause it names (relay.Unusable: an
// answer compressed, not JSON, an HTTP error, over the bound) when it has
// one. Other errors (a connection's, the store's) are the log's alone.
func Cause(err error) (string, bool) {
	var c interface{ ClientCause() string }
	if errors.As(err, &c) {
		return c.ClientCause(), true
	}
	return "", false
}

// answer records v and answers it as the protocol maps its code.
func (g *Gate[C]) answer(ctx context.Context, principal string, v rules.Verdict, id json.RawMessage) Answer {
	d := g.enf.Refuse(ctx, g.spec.Protocol, principal, "", v)
	status, rpc, msg := g.spec.Answer(v.Code, v.Detail)
	return jsonrpcAnswer(status, id, rpc, msg, d.ID)
}

// deny records v, a refusal of a request Warden could forward whole
// (proxy.Enforcer.Deny), and answers it with status and rpc (0: as the
// protocol maps its code); nil when dry run forwards it.
func (g *Gate[C]) deny(ctx context.Context, principal string, v rules.Verdict, id json.RawMessage, status, rpc int) *Answer {
	d := g.enf.Deny(ctx, g.spec.Protocol, principal, "", v)
	if d.DryRun {
		return nil
	}
	msg := v.Detail
	if status == 0 {
		status, rpc, msg = g.spec.Answer(v.Code, v.Detail)
	}
	a := jsonrpcAnswer(status, id, rpc, msg, d.ID)
	return &a
}

// refuse records v and answers it with status and rpc (rest: in the
// HTTP+JSON binding's shape).
func (g *Gate[C]) refuse(ctx context.Context, principal string, v rules.Verdict, status, rpc int, id json.RawMessage, rest bool) Answer {
	d := g.enf.Refuse(ctx, g.spec.Protocol, principal, "", v)
	if rest {
		return restAnswer(status, v.Detail, d.ID)
	}
	return jsonrpcAnswer(status, id, rpc, v.Detail, d.ID)
}

// Requests is the gate's protocol as its requests are counted and traced.
func (g *Gate[C]) Requests() *proxy.Protocol { return g.spec.Requests }

// Serve serves a sidecar's request with h as one flight of the gate's
// protocol (proxy.Enforcer.BeginAt): stamped with its source (Stamp's, the flight carries it), its server span
// the child of the client's trace context, and counted when h returns by
// the decisions made on it and its status (a server error, Warden's or the
// upstream's, is an error). The one way both HTTP sidecars serve.
func (g *Gate[C]) Serve(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request)) {
	ctx, f := g.enf.BeginAt(r.Context(), g.source(w, r), g.door, propagation.HeaderCarrier(r.Header))
	sw := &statusWriter{ResponseWriter: w}
	defer func() { f.End(sw.status >= 500) }()
	h(sw, r.WithContext(ctx))
}

// statusWriter records the status a handler answered with. It keeps
// Flush and, through Unwrap, http.ResponseController working.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Stamp is the context of a sidecar's request with its source
// (proxy.Source: the peer's address, the client's X-Request-Id or a fresh
// one, the method and the path), for every decision made on it; the request
// id is returned to the client in the response's X-Request-Id and is the one
// the upstream is given, so that its logs and Warden's name the request
// alike.
func (g *Gate[C]) Stamp(w http.ResponseWriter, r *http.Request) context.Context {
	return proxy.WithSource(r.Context(), g.source(w, r))
}

// source is Stamp's source, its request id set on the request and the
// response; Serve gives it to the flight (proxy.Enforcer.BeginAt), which
// carries it in its own allocation.
func (g *Gate[C]) source(w http.ResponseWriter, r *http.Request) proxy.Source {
	src := g.enf.NewSource(r.RemoteAddr, r.Header.Get(proxy.RequestIDHeader), r.Method, r.URL.EscapedPath())
	// One value for both (capped: an append to either copies it), under
	// the name as it is canonical (TestRequestIDCanonical).
	id := []string{src.RequestID}
	w.Header()[proxy.RequestIDHeader] = id[:1:1]
	r.Header[proxy.RequestIDHeader] = id[:1:1]
	return src
}
