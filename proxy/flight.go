package proxy

import (
	"context"
	"maps"
	"slices"
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

// The outcomes by number (Flight.End, Served.Slot).
const (
	allowed = iota
	denied
	failed
)

// outcomes are the outcomes' labels by number.
var outcomes = [...]string{allowed: OutcomeAllowed, denied: OutcomeDenied, failed: OutcomeError}

// Served is one request a door served, as the request metrics count it.
// Every label is from a closed set: Method is one of the protocol's known
// methods (Protocol.Methods), else "other".
type Served struct {
	Protocol, Door, Method, Outcome string
	Took                            time.Duration
	slot                            int
}

// Slot numbers the request's method and outcome together, below its
// door's Slots: the same pair, the same slot, at every request of the
// door. An observer's series for the pair can be kept by it (Requests).
func (s Served) Slot() int { return s.slot }

// RequestObserver is what an Observer may also implement to see every
// request of every door from its arrival (Started) to its answer (Served):
// the in-flight gauges, the request counters and the duration histogram.
// It is asked once per door, when the door is built (Door), for the
// series of that door's requests, so that a request counted looks up
// none of its labels.
type RequestObserver interface {
	Requests(d *Door) Requests
}

// Requests counts one door's requests (RequestObserver): Started when one
// arrives, Served when it is answered. Safe for concurrent use.
type Requests interface {
	Started()
	Served(Served)
}

// Door is one protocol's requests at one door, as the door begins their
// flights (Begin): built once with the door (NewDoor, Enforcer.Door), its
// methods numbered and the observer's series for them taken (Requests).
type Door struct {
	proto  *Protocol
	name   string
	labels []string       // the method labels by number, "other" last
	number map[string]int // a method label's number
	reqs   Requests       // nil: requests not counted
}

// NewDoor is protocol p's requests at door (DoorSidecar, DoorExtAuthz),
// counted by o when it is a RequestObserver. p must not change after.
func NewDoor(p *Protocol, door string, o Observer) *Door {
	d := &Door{proto: p, name: door, labels: slices.Sorted(maps.Keys(p.Methods)), number: make(map[string]int, len(p.Methods))}
	d.labels = append(d.labels, "other")
	for i, m := range d.labels[:len(d.labels)-1] {
		d.number[m] = i
	}
	if r, ok := o.(RequestObserver); ok {
		d.reqs = r.Requests(d)
	}
	return d
}

// Door is NewDoor with the Enforcer's observer: what a door takes once,
// when it is built, to begin its requests' flights.
func (e *Enforcer) Door(p *Protocol, door string) *Door { return NewDoor(p, door, e.observer) }

// Protocol is the door's protocol.
func (d *Door) Protocol() *Protocol { return d.proto }

// Name is the door's metric label (DoorSidecar, DoorExtAuthz).
func (d *Door) Name() string { return d.name }

// Slots is how many method and outcome pairs the door's requests are
// counted under (Served.Slot).
func (d *Door) Slots() int { return len(d.labels) * len(outcomes) }

// Requests is the observer's series of the door's requests (nil when its
// requests are not counted).
func (d *Door) Requests() Requests { return d.reqs }

// ServedAs is what a request of the door's with method (a method of the
// protocol, else counted as other) and outcome, answered in took, is
// served as.
func (d *Door) ServedAs(method, outcome string, took time.Duration) Served {
	o := slices.Index(outcomes[:], outcome)
	if o < 0 {
		o = failed
	}
	return d.served(d.method(method), o, took)
}

// served is the Served of a request of method number m and outcome number o.
func (d *Door) served(m, o int, took time.Duration) Served {
	return Served{Protocol: d.proto.Name, Door: d.name, Method: d.labels[m], Outcome: outcomes[o], Took: took, slot: m*len(outcomes) + o}
}

// method is m's number when it is one of the protocol's methods, else
// other's (a gRPC method is named without its service).
func (d *Door) method(m string) int {
	p := d.proto
	if p.Service != "" && len(m) > len(p.Service)+1 && m[0] == '/' && m[len(p.Service)+1] == '/' && m[1:len(p.Service)+1] == p.Service {
		m = m[len(p.Service)+2:]
	}
	if i, ok := d.number[m]; ok {
		return i
	}
	return len(d.labels) - 1
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
	door           *Door
	method         int // the method's number (Door.method), set by the door's goroutine before End
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
// be changed once a door uses it (NewDoor).
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

// Begin starts the flight of one request at door (Door: made by this
// Enforcer when the door was built), in ctx. With a tracer provider, the flight has a server span: a new one, the child of
// the trace context in from (the client's traceparent and tracestate) when
// from is not nil, or, when from is nil, the span ctx already carries (the
// MACP sidecar's, which otelgrpc starts). End must be called once.
func (e *Enforcer) Begin(ctx context.Context, door *Door, from propagation.TextMapCarrier) (context.Context, *Flight) {
	f := new(Flight)
	e.BeginIn(f, ctx, door, from)
	return f, f
}

// BeginIn is Begin for a flight the door holds in an allocation of its own
// (the MACP relay's admitted call), f, which must be zero: the flight and
// its context are f. f must not be copied once begun.
func (e *Enforcer) BeginIn(f *Flight, ctx context.Context, door *Door, from propagation.TextMapCarrier) {
	f.door, f.began, f.method = door, time.Now(), len(door.labels)-1
	if door.reqs != nil {
		door.reqs.Started()
	}
	if e.tracer != nil {
		if from != nil {
			protocol := door.proto.Name
			ctx = propagation.TraceContext{}.Extract(ctx, from)
			ctx, f.span = e.tracer.Start(ctx, protocol, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("warden.protocol", protocol), attribute.String("warden.door", door.name)))
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
func (e *Enforcer) BeginAt(ctx context.Context, src Source, door *Door, from propagation.TextMapCarrier) (context.Context, *Flight) {
	_, f := e.Begin(ctx, door, from)
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
	f.method = f.door.method(m)
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

// End ends the flight: answerFailed is set when the answer is an error (an
// upstream failure, a server error status). The request is counted by its
// outcome and its span ended (status Error for an error). Safe on a nil
// flight and from any goroutine; only the first End counts.
func (f *Flight) End(answerFailed bool) {
	if f == nil || !f.ended.CompareAndSwap(false, true) {
		return
	}
	o := allowed
	switch {
	case answerFailed || f.failed.Load():
		o = failed
	case f.denied.Load():
		o = denied
	}
	d := f.door
	if d.reqs != nil {
		d.reqs.Served(d.served(f.method, o, time.Since(f.began)))
	}
	if f.span == nil {
		return
	}
	method, outcome := d.labels[f.method], outcomes[o]
	f.span.SetAttributes(attribute.String("rpc.method", method), attribute.String("warden.outcome", outcome))
	if outcome == OutcomeError {
		f.span.SetStatus(codes.Error, "")
	}
	if f.ownSpan {
		if d.proto.Service != "" { // as otelgrpc names a call's span
			f.span.SetAttributes(attribute.String("rpc.system", "grpc"))
			f.span.SetName(d.proto.Service + "/" + method)
		} else {
			f.span.SetAttributes(attribute.String("rpc.system", "jsonrpc"))
			f.span.SetName(d.proto.Name + " " + method)
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
