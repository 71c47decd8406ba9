package macp

// A unary call's forward on the relay (relayForward): the header list the
// runtime gets, the runtime's answer read, and the client span around it.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/frames"
)

// relayForward is the forward of a unary call on the relay: the call's
// original bytes on a stream to the runtime, under the header list the
// runtime gets for upctx; the runtime's whole answer is kept, and the
// client gets exactly it when it is the client's answer.
type relayForward struct {
	s     *Server
	ctx   context.Context
	req   *frames.Request
	name  string // the call's span name
	upctx context.Context
	up    credentialGetter // the credential fields the runtime is sent (upctx's metadata, or the call's upstreamCtx)
	resp  frames.Response
	err   error // the runtime's answer, when it is a failure
}

func (f *relayForward) call() ([]byte, error) {
	fctx, endCall := f.s.clientSpan(f.ctx, f.name)
	var room [16]hpack.HeaderField // the relay encodes the list as it opens the stream: it need not outlive this call
	resp, err := f.req.Forward(f.ctx, poolRuntime, f.header(room[:0], fctx))
	endCall()
	return f.read(resp, err)
}

// header is the header list the runtime gets for the call, appended to
// out; ctx carries the client span.
func (f *relayForward) header(out []hpack.HeaderField, ctx context.Context) []hpack.HeaderField {
	return forwardHeader(out, f.req.Header, f.s.cfg.Upstream, f.up, ctx)
}

// read is the runtime's answer to the forward as a forward returns it
// (resp, err as frames.Request.Forward returned them): its message, or the
// error the client is told.
func (f *relayForward) read(resp frames.Response, err error) ([]byte, error) {
	s := f.s
	if err != nil {
		var wire error
		switch {
		case errors.Is(err, frames.ErrPoolFull):
			wire = errUpstreamFull
		case f.ctx.Err() != nil:
			wire = status.FromContextError(f.ctx.Err()).Err()
		case errors.Is(err, context.DeadlineExceeded): // ForwardThen's deadline, which may pass before ctx's own timer ran
			wire = status.FromContextError(err).Err()
		default:
			wire = s.upstreamError(err)
		}
		if errors.Is(err, frames.ErrNotSent) {
			// it never reached the runtime, as the grpc-go path's
			// errUpstreamFull: Warden's state still follows the runtime's
			return nil, notReached{wire}
		}
		return nil, wire
	}
	f.resp = resp
	m, err := runtimeMessage(resp)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			f.err = err
			return nil, err
		}
		return nil, s.upstreamError(err)
	}
	return m, nil
}

// answer maps unary's outcome onto the relay's wire: Warden's own answer,
// or the runtime's.
func (f *relayForward) answer(ct string, own proto.Message, err error) frames.Response {
	switch {
	case own != nil:
		return messageAnswer(ct, own)
	case err == nil || err == f.err:
		return f.resp
	}
	var r refusal
	if errors.As(err, &r) {
		return refusalAnswer(ct, r.Refusal)
	}
	return statusAnswer(ct, err)
}

// runtimeMessage reads the runtime's answer to a unary call: its message
// when the call succeeded, its status error when it failed, and a plain
// error (a transport failure to the client) when it is not a gRPC answer.
func runtimeMessage(resp frames.Response) ([]byte, error) {
	st := resp.Trailer
	if st == nil {
		st = resp.Header // Trailers-Only
	}
	code, msg, found := "", "", false
	for _, f := range st {
		switch f.Name {
		case "grpc-status":
			code, found = f.Value, true
		case "grpc-message":
			msg = f.Value
		}
	}
	n, err := strconv.ParseUint(code, 10, 32)
	if !found || err != nil || headerValue(resp.Header, ":status") != "200" {
		return nil, errors.New("the runtime's answer is not a gRPC response")
	}
	if n != 0 {
		return nil, status.Error(codes.Code(n), decodeGRPCMessage(msg))
	}
	m, ok := grpcMessage(resp.Body)
	if !ok {
		return nil, errors.New("the runtime's answer is not one uncompressed message")
	}
	return m, nil
}

func headerValue(h []hpack.HeaderField, name string) string {
	for _, f := range h {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// grpcContentType is the content type the runtime is sent every request
// under: the body Warden decided on is protobuf.
const grpcContentType = "application/grpc"

// forwardHeader is the header list the runtime receives for a decided
// Send: the client's, but that :authority is the runtime's (authority),
// the identity and credential headers are the ones upstreamContext chose
// (up), the trace context is ctx's span when it is traced, and the reserved
// grpc-* fields are Warden's own as a grpc-go client's would be: none of
// the client's (grpc-accept-encoding would have the runtime compress an Ack
// Warden must read; grpc-status and the like are not a request's), and
// grpc-timeout from ctx's deadline, which the client's grpc-timeout set.
// The list is appended to out.
func forwardHeader(out, header []hpack.HeaderField, authority string, up credentialGetter, ctx context.Context) []hpack.HeaderField {
	traced := trace.SpanContextFromContext(ctx).IsValid()
	typed := false
	for _, f := range header {
		switch {
		case f.Name == ":authority":
			f.Value = authority
		case f.Name == "content-type":
			// The body was read as protobuf whatever subtype or
			// parameters the client named (grpc-go's server reads an
			// unknown subtype so): the runtime is told what was read, once,
			// as grpc-go's client would tell it, never a codec of the
			// client's choosing.
			if typed {
				continue
			}
			f.Value, typed = grpcContentType, true
		case handoff{}.owned(f.Name), f.Name == authn.HeaderAuthorization, f.Name == authn.HeaderMACPToken:
			continue
		case f.Name == "traceparent", f.Name == "tracestate":
			if traced {
				continue
			}
		case strings.HasPrefix(f.Name, "grpc-"):
			continue
		}
		out = append(out, f)
	}
	if dl, ok := ctx.Deadline(); ok {
		out = append(out, hpack.HeaderField{Name: "grpc-timeout", Value: encodeTimeout(time.Until(dl))})
	}
	for _, name := range []string{authn.HeaderAuthorization, authn.HeaderMACPToken} {
		for _, v := range getCredential(up, name) {
			out = append(out, hpack.HeaderField{Name: name, Value: v, Sensitive: true})
		}
	}
	if traced {
		tc := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, tc)
		for k, v := range tc {
			out = append(out, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return out
}

// mdCarrier reads a trace context from a request's metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// clientSpan starts the client span, named name (the method path without
// its leading slash, as otelgrpc names it), of a call answered on the
// relay, as otelgrpc does on the grpc-go path (the server span is the
// flight's, proxy.Enforcer.Begin); end ends it. Without a tracer provider
// it does nothing.
func (s *Server) clientSpan(ctx context.Context, name string) (context.Context, func()) {
	if s.tp == nil {
		return ctx, func() {}
	}
	ctx, span := s.tp.Tracer("github.com/agentwarden/warden/proxy/macp").Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	return ctx, func() { span.End() }
}

// credentialGetter returns the values of the credential fields the runtime
// is sent for a call (metadata.MD's Get: the edited metadata of
// upstreamContext; upstreamCtx's).
type credentialGetter interface {
	Get(name string) []string
}

// getCredential is up's values of the field name, none without up.
func getCredential(up credentialGetter, name string) []string {
	if up == nil {
		return nil
	}
	return up.Get(name)
}
