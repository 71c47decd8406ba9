package proxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/proxytest"
	"github.com/agentwarden/warden/rules"
)

func engine(t testing.TB) *policies.Engine      { return proxytest.Engine(t) }
func devAuth(t testing.TB) *authn.Authenticator { return proxytest.DevAuth(t) }

// plainEnforcer is an enforcer with the development authenticator and the
// test policies, nothing else.
func plainEnforcer(t testing.TB) *Enforcer {
	t.Helper()
	e, err := New(Config{}, Options{Authenticator: devAuth(t), Policies: engine(t)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// testProtocols are protocols as their front doors describe them (proxy/gate,
// proxy/macp/admission), with a few of their methods.
var testProtocols = map[string]*Protocol{
	"mcp":  {Name: "mcp", Methods: map[string]bool{"tools/list": true, "tools/call": true, "tasks/get": true, "initialize": true, "GET": true}},
	"a2a":  {Name: "a2a", Methods: map[string]bool{"GetTask": true, "GET": true}},
	"macp": {Name: "macp", Service: "macp.v1.MACPRuntimeService", Methods: map[string]bool{"Send": true, "Initialize": true}},
}

// served records what a RequestObserver is told.
type served struct {
	mu      sync.Mutex
	started int
	got     []Served
}

func (s *served) Decided(Decision, time.Duration) {}
func (s *served) Requests(*Door) Requests         { return s }
func (s *served) Started()                        { s.mu.Lock(); s.started++; s.mu.Unlock() }
func (s *served) Served(x Served)                 { s.mu.Lock(); s.got = append(s.got, x); s.mu.Unlock() }

// TestFlight: a request's outcome comes from the decisions made on its
// context (a refusal denies it, an undecidable one is an error) and the
// door's answer; its method is bounded to the protocol's table; its server
// span carries the method, the principal, the decision and its id. There
// was no per-request observation before.
func TestFlight(t *testing.T) {
	deny := rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonOriginRefused, Detail: "no"}
	for _, tc := range []struct {
		name, protocol, method   string
		run                      func(e *Enforcer, ctx context.Context)
		failed                   bool
		wantMethod, wantOutcome  string
		wantDecision, wantReason string
	}{
		{name: "admitted", protocol: "mcp", method: "tools/list", run: func(e *Enforcer, ctx context.Context) { e.Admitted(ctx, "mcp", "alice", "tools/list") },
			wantMethod: "tools/list", wantOutcome: OutcomeAllowed, wantDecision: "allow", wantReason: "allowed"},
		{name: "refused", protocol: "a2a", method: "GetTask", run: func(e *Enforcer, ctx context.Context) { e.Deny(ctx, "a2a", "alice", "", deny) },
			wantMethod: "GetTask", wantOutcome: OutcomeDenied, wantDecision: "deny", wantReason: string(rules.ReasonOriginRefused)},
		{name: "undecidable", protocol: "mcp", method: "tasks/get", run: func(e *Enforcer, ctx context.Context) {
			e.Refuse(ctx, "mcp", "alice", "", rules.Verdict{Code: rules.CodeInternal, Reason: rules.ReasonUnavailable})
		}, wantMethod: "tasks/get", wantOutcome: OutcomeError, wantDecision: "deny", wantReason: string(rules.ReasonUnavailable)},
		{name: "upstream failed", protocol: "mcp", method: "initialize", run: func(*Enforcer, context.Context) {}, failed: true,
			wantMethod: "initialize", wantOutcome: OutcomeError},
		{name: "decision error", protocol: "macp", method: "/macp.v1.MACPRuntimeService/Send", run: func(e *Enforcer, ctx context.Context) { e.decided(ctx, Decision{}, errors.New("x"), 0) },
			wantMethod: "Send", wantOutcome: OutcomeError},
		{name: "method outside the table", protocol: "mcp", method: "made/up\nline", run: func(*Enforcer, context.Context) {},
			wantMethod: "other", wantOutcome: OutcomeAllowed},
		{name: "no method", protocol: "a2a", run: func(*Enforcer, context.Context) {}, wantMethod: "other", wantOutcome: OutcomeAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, rec := &served{}, tracetest.NewSpanRecorder()
			e, err := New(Config{}, Options{Authenticator: devAuth(t), Policies: engine(t), Observer: obs, Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
			if err != nil {
				t.Fatal(err)
			}
			door := e.Door(testProtocols[tc.protocol], DoorSidecar)
			_, f := e.Begin(context.Background(), door, nil)
			if f.span != nil {
				t.Fatal("a span without a carrier and none in the context")
			}
			ctx, f := e.Begin(context.Background(), door, mapCarrier{})
			if tc.method != "" {
				f.SetMethod(tc.method)
			}
			tc.run(e, ctx)
			f.End(tc.failed)
			f.End(true) // a second End does nothing
			if obs.started != 2 || len(obs.got) != 1 {
				t.Fatalf("started %d, served %v", obs.started, obs.got)
			}
			if g := obs.got[0]; g.Protocol != tc.protocol || g.Door != DoorSidecar || g.Method != tc.wantMethod || g.Outcome != tc.wantOutcome {
				t.Errorf("served %+v, want method %s outcome %s", g, tc.wantMethod, tc.wantOutcome)
			}
			if g, want := obs.got[0].Slot(), door.ServedAs(tc.wantMethod, tc.wantOutcome, 0).Slot(); g != want {
				t.Errorf("slot %d, want %d", g, want)
			}
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended", len(spans))
			}
			attrs := map[string]string{}
			for _, a := range spans[0].Attributes() {
				attrs[string(a.Key)] = a.Value.String()
			}
			if attrs["rpc.method"] != tc.wantMethod || attrs["warden.outcome"] != tc.wantOutcome || attrs["warden.decision"] != tc.wantDecision || attrs["warden.reason"] != tc.wantReason {
				t.Errorf("span attributes %v", attrs)
			}
			if tc.wantDecision != "" && len(attrs["warden.decision_id"]) != 26 {
				t.Errorf("decision id %q", attrs["warden.decision_id"])
			}
		})
	}
}

// TestDoorSlots: a door numbers each of its protocol's methods and each
// outcome into one slot below Slots, a different one per pair; a gRPC
// method's path is its name's slot, and a method outside the table is
// other's. Doors had no slots before.
func TestDoorSlots(t *testing.T) {
	for name, p := range testProtocols {
		d := NewDoor(p, DoorSidecar, nil)
		seen := map[int]string{}
		for m := range p.Methods {
			for _, o := range outcomes {
				s := d.ServedAs(m, o, 0)
				if s.Slot() < 0 || s.Slot() >= d.Slots() || seen[s.Slot()] != "" {
					t.Errorf("%s %s %s: slot %d of %d, taken by %q", name, m, o, s.Slot(), d.Slots(), seen[s.Slot()])
				}
				seen[s.Slot()] = m + " " + o
				if s.Method != m || s.Outcome != o || s.Protocol != p.Name || s.Door != DoorSidecar {
					t.Errorf("%s: served %+v, want %s %s", name, s, m, o)
				}
				if p.Service != "" {
					if g := d.ServedAs("/"+p.Service+"/"+m, o, 0); g != s {
						t.Errorf("%s: the path of %s served %+v, want %+v", name, m, g, s)
					}
				}
			}
		}
		other := d.ServedAs("other", OutcomeDenied, 0)
		if g := d.ServedAs("made/up", OutcomeDenied, 0); g != other || g.Method != "other" || seen[g.Slot()] != "" {
			t.Errorf("%s: an unknown method served %+v, other's %+v, the slot taken by %q", name, g, other, seen[g.Slot()])
		}
		if len(seen)+len(outcomes) != d.Slots() {
			t.Errorf("%s: %d slots for %d methods and other", name, d.Slots(), len(p.Methods))
		}
	}
}

type mapCarrier map[string]string

func (c mapCarrier) Get(k string) string { return c[k] }
func (c mapCarrier) Set(k, v string)     { c[k] = v }
func (c mapCarrier) Keys() []string      { return nil }

// discard is a RequestObserver that counts nothing.
type discard struct{}

func (discard) Decided(Decision, time.Duration) {}
func (discard) Requests(*Door) Requests         { return discard{} }
func (discard) Started()                        {}
func (discard) Served(Served)                   {}

// BenchmarkFlight is what the flight adds to one request: Begin, the
// method, one decision noted, End (no tracer: tracing off; the metrics'
// own cost is cmd/warden's BenchmarkRequestMetrics).
func BenchmarkFlight(b *testing.B) {
	e, err := New(Config{}, Options{Authenticator: devAuth(b), Policies: engine(b), Observer: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	d := Decision{ID: "x", Allow: true, Reason: rules.ReasonAllowed}
	door := e.Door(testProtocols["mcp"], DoorSidecar)
	b.ReportAllocs()
	for b.Loop() {
		ctx, f := e.Begin(context.Background(), door, nil)
		f.SetMethod("tools/call")
		e.decided(ctx, d, nil, 0)
		f.End(false)
	}
}
