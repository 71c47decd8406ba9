package proxy

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentwarden/warden/rules"
)

// The doors a request comes in by (Served.Door).
const (
	DoorSidecar  = "sidecar"
	DoorExtAuthz = "ext_authz"
)

// The outcomes of a request (Served.Outcome).
const (
	// OutcomeAllowed: every decision made on the request allowed it (dry
	// run included) and its answer was not an error of Warden's or the
	// upstream's.
	OutcomeAllowed = "allowed"
	// OutcomeDenied: a decision made on it refused it.
	OutcomeDenied = "denied"
	// OutcomeError: Warden could not decide it (a store or the keys
	// unavailable), or the upstream failed or answered a server error.
	OutcomeError = "error"
)

// Served is one request a door served, as the request metrics count it.
// Every label is from a closed set: Method is one of the protocol's known
// methods (Protocol.Methods), else "other".
type Served struct {
	Protocol, Door, Method, Outcome string
	Took                            time.Duration
}

// RequestObserver is what an Observer may also implement to see every
// request of every door from its arrival (Started) to its answer (Served):
// the in-flight gauges, the request counters and the duration histogram.
type RequestObserver interface {
	Started(protocol, door string)
	Served(Served)
}

// Flight is one request a door serves, from Begin to End: it counts the
// request (RequestObserver) and carries its server span, which every
// decision made on the flight's context annotates (principal, decision and
// decision id). A door begins one per request, whatever the protocol.
//
// A flight is the context of its request too: Begin returns it, its values
// and deadline its parent's, FlightOf finds it; one allocation per request.
type Flight struct {
	context.Context
	obs            RequestObserver
	proto          *Protocol
	protocol, door string
	method         string // set by the door's goroutine before End
	began          time.Time
	denied, failed atomic.Bool
	span           trace.Span // nil when not traced
	ownSpan        bool
	ended          atomic.Bool
	src            Source // the request's (BeginAt), when hasSrc
	hasSrc         bool
}

type flightKey struct{}

// Protocol is what the core knows of one protocol's requests, to count and
// trace them (Begin): each protocol's front door gives its own
// (proxy/gate for MCP and A2A, proxy/macp/admission for MACP). It must not
// be changed once a flight uses it.
type Protocol struct {
	// Name is the protocol's metric label ("macp", "mcp", "a2a").
	Name string
	// Methods are its method labels (Flight.SetMethod): its methods, and
	// for the HTTP doors the requests that carry no message (MCP's GET
	// stream and DELETE, a client's JSON-RPC response; A2A's agent card).
	Methods map[string]bool
	// Service, when set, is the gRPC service (package.Service) of its
	// methods: a method path loses "/Service/" before it is looked up, and
	// a server span is named Service/Method with rpc.system grpc. Without
	// it a span is "Name Method", rpc.system jsonrpc.
	Service string
}

// label is m when it is one of p's methods, else "other" (a gRPC method is
// named without its service).
func (p *Protocol) label(m string) string {
	if p.Service != "" && len(m) > len(p.Service)+1 && m[0] == '/' && m[len(p.Service)+1] == '/' && m[1:len(p.Service)+1] == p.Service {
		m = m[len(p.Service)+2:]
	}
	if p.Methods[m] {
		return m
	}
	return "other"
}

// Begin starts the flight of one request of protocol at door, in ctx. With
// a tracer provider, the flight has a server span: a new one, the child of
// the trace context in from (the client's traceparent and tracestate) when
// from is not nil, or, when from is nil, the span ctx already carries (the
// MACP sidecar's, which otelgrpc starts). End must be called once.
func (e *Enforcer) Begin(ctx context.Context, p *Protocol, door string, from propagation.TextMapCarrier) (context.Context, *Flight) {
	f := new(Flight)
	e.BeginIn(f, ctx, p, door, from)
	return f, f
}

// BeginIn is Begin for a flight the door holds in an allocation of its own
// (the MACP relay's admitted call), f, which must be zero: the flight and
// its context are f. f must not be copied once begun.
func (e *Enforcer) BeginIn(f *Flight, ctx context.Context, p *Protocol, door string, from propagation.TextMapCarrier) {
	protocol := p.Name
	f.proto, f.protocol, f.door, f.began, f.method = p, protocol, door, time.Now(), "other"
	if o, ok := e.observer.(RequestObserver); ok {
		f.obs = o
		o.Started(protocol, door)
	}
	if e.tracer != nil {
		if from != nil {
			ctx = propagation.TraceContext{}.Extract(ctx, from)
			ctx, f.span = e.tracer.Start(ctx, protocol, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("warden.protocol", protocol), attribute.String("warden.door", door)))
			f.ownSpan = true
		} else if s := trace.SpanFromContext(ctx); s.IsRecording() {
			f.span = s
		}
	}
	f.Context = ctx
}

// BeginAt is Begin for a request from src: the flight's context carries
// the source as WithSource's would (every decision made on it records it),
// in the flight's own allocation rather than a context of its own.
func (e *Enforcer) BeginAt(ctx context.Context, src Source, p *Protocol, door string, from propagation.TextMapCarrier) (context.Context, *Flight) {
	_, f := e.Begin(ctx, p, door, from)
	f.src, f.hasSrc = src, true
	return f, f
}

// Value is the flight for its key, the source for its own when it holds
// one (BeginAt), else its parent's value.
func (f *Flight) Value(key any) any {
	switch {
	case key == (flightKey{}):
		return f
	case f.hasSrc && key == (sourceKey{}):
		return &f.src
	}
	return f.Context.Value(key)
}

// FlightOf is the flight ctx carries (nil when none).
func FlightOf(ctx context.Context) *Flight {
	f, _ := ctx.Value(flightKey{}).(*Flight)
	return f
}

// SetMethod names the request's method once the door has read it; a method
// outside the protocol's table is "other". Safe on a nil flight.
func (f *Flight) SetMethod(m string) {
	if f == nil {
		return
	}
	f.method = f.proto.label(m)
}

// SetPrincipal names on the server span whom the door authenticated
// (decisions made later name theirs too). Safe on a nil flight.
func (f *Flight) SetPrincipal(id string) {
	if f != nil && f.span != nil {
		f.span.SetAttributes(attribute.String("warden.principal", id))
	}
}

// Fail marks the request an error: the upstream failed or Warden could not
// answer it. Safe on a nil flight.
func (f *Flight) Fail() {
	if f != nil {
		f.failed.Store(true)
	}
}

// decided notes a decision made on the flight's request: a refusal makes
// it denied (an undecidable one an error), and its server span records the
// principal, the decision and its id (the last decision's, for a stream).
func (f *Flight) decided(d Decision) {
	switch {
	case d.Reason == rules.ReasonUnavailable:
		f.failed.Store(true)
	case !d.Allow:
		f.denied.Store(true)
	}
	if f.span == nil {
		return
	}
	f.span.SetAttributes(attribute.String("warden.decision", DecisionLabel(d)), attribute.String("warden.decision_id", d.ID),
		attribute.String("warden.principal", d.Principal), attribute.String("warden.reason", string(d.Reason)))
}

// End ends the flight: failed is set when the answer is an error (an
// upstream failure, a server error status). The request is counted by its
// outcome and its span ended (status Error for an error). Safe on a nil
// flight and from any goroutine; only the first End counts.
func (f *Flight) End(failed bool) {
	if f == nil || !f.ended.CompareAndSwap(false, true) {
		return
	}
	outcome := OutcomeAllowed
	switch {
	case failed || f.failed.Load():
		outcome = OutcomeError
	case f.denied.Load():
		outcome = OutcomeDenied
	}
	method := f.method
	if f.obs != nil {
		f.obs.Served(Served{Protocol: f.protocol, Door: f.door, Method: method, Outcome: outcome, Took: time.Since(f.began)})
	}
	if f.span == nil {
		return
	}
	f.span.SetAttributes(attribute.String("rpc.method", method), attribute.String("warden.outcome", outcome))
	if outcome == OutcomeError {
		f.span.SetStatus(codes.Error, "")
	}
	if f.ownSpan {
		if f.proto.Service != "" { // as otelgrpc names a call's span
			f.span.SetAttributes(attribute.String("rpc.system", "grpc"))
			f.span.SetName(f.proto.Service + "/" + method)
		} else {
			f.span.SetAttributes(attribute.String("rpc.system", "jsonrpc"))
			f.span.SetName(f.protocol + " " + method)
		}
		f.span.End()
	}
}

// DecisionLabel is a decision's outcome as the decision metric and the
// span name it: allow, deny, dry_run_deny or duplicate.
func DecisionLabel(d Decision) string {
	switch {
	case d.DryRun:
		return "dry_run_deny"
	case !d.Allow:
		return "deny"
	case d.Duplicate:
		return "duplicate"
	}
	return "allow"
}
