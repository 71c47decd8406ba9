package proxy

import (
	"context"
	"testing"
)

// TestBeginAt: the flight BeginAt starts carries the request's source as
// WithSource does (a decision made on it records it), and a source set
// below it still wins; Begin's carries none.
func TestBeginAt(t *testing.T) {
	e := plainEnforcer(t)
	src := Source{Client: "192.0.2.7:41234", RequestID: "req-1", Method: "POST", Path: "/mcp"}
	ctx, f := e.BeginAt(context.Background(), src, e.Door(testProtocols["mcp"], DoorSidecar), nil)
	defer f.End(false)
	if got := SourceOf(ctx); got != src {
		t.Errorf("source %+v, want %+v", got, src)
	}
	if FlightOf(ctx) != f {
		t.Error("the flight is not its context's")
	}
	if d := e.Start(ctx, "mcp"); d.Source != src {
		t.Errorf("a decision records %+v, want %+v", d.Source, src)
	}
	inner := Source{Client: "x", RequestID: "req-2"}
	if got := SourceOf(WithSource(ctx, inner)); got != inner {
		t.Errorf("below the flight: %+v, want %+v", got, inner)
	}
	if _, g := e.Begin(context.Background(), e.Door(testProtocols["mcp"], DoorSidecar), nil); SourceOf(g) != (Source{}) {
		t.Errorf("Begin's flight carries a source: %+v", SourceOf(g))
	}
}
