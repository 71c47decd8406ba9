package proxy_test

import (
	"context"
	"testing"

	"github.com/agentwarden/warden/proxy"
)

type otherKey struct{}

// ctxSink keeps what the allocation count measures from being optimized away.
var ctxSink context.Context

// TestWithSource: the source a context carries is the innermost one set,
// the parent's values and cancellation pass through it, and setting it is
// one allocation (fails on the old code: context.WithValue took two, its
// context and the boxed Source).
func TestWithSource(t *testing.T) {
	a := proxy.Source{Client: "127.0.0.1:1", RequestID: "a", Method: "POST", Path: "/p"}
	b := proxy.Source{Client: "127.0.0.1:2", RequestID: "b"}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), otherKey{}, "v"))
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want proxy.Source
	}{
		{"none", parent, proxy.Source{}},
		{"one", proxy.WithSource(parent, a), a},
		{"innermost", proxy.WithSource(proxy.WithSource(parent, a), b), b},
		{"under a value", context.WithValue(proxy.WithSource(parent, a), otherKey{}, "w"), a},
	} {
		if got := proxy.SourceOf(tc.ctx); got != tc.want {
			t.Errorf("%s: SourceOf = %+v, want %+v", tc.name, got, tc.want)
		}
		if tc.ctx.Value(otherKey{}) == nil {
			t.Errorf("%s: the parent's value is lost", tc.name)
		}
	}
	child, stop := context.WithCancel(proxy.WithSource(parent, a))
	defer stop()
	cancel()
	<-child.Done() // cancellation passes through (the test times out otherwise)
	if n := testing.AllocsPerRun(100, func() { ctxSink = proxy.WithSource(parent, a) }); n != 1 {
		t.Errorf("WithSource: %v allocations, want 1", n)
	}
}
