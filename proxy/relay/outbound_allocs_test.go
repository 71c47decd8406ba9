//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package relay

import (
	"context"
	"net/http"
	"testing"
)

// TestOutboundAllocs bounds what building a request to the upstream costs
// (Target.Request and Outbound, a caller's five headers): the request, its
// URL, its header map and that map's one group of entries (4). When
// Outbound replaced the empty map http.NewRequest made with one of its
// own: 5.
func TestOutboundAllocs(t *testing.T) {
	target, err := NewTarget("http://upstream.example/rpc")
	if err != nil {
		t.Fatal(err)
	}
	in := &http.Request{Header: http.Header{"Authorization": {"Bearer a"}, "Content-Type": {"application/json"},
		"Accept": {"application/json"}, "User-Agent": {"x"}, "Accept-Encoding": {"gzip"}}}
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		out, err := target.Request(ctx, http.MethodPost, nil)
		if err != nil {
			t.Fatal(err)
		}
		Outbound(out, in, true, "Authorization")
	})
	if n > 4 {
		t.Errorf("%v allocations, want at most 4", n)
	}
}

// TestSetBodyAllocs: a body in memory held in a Body the caller has costs
// the reader's wrapper and GetBody (2), SetBody its Body besides (3);
// bytes.NewReader given to http.NewRequest costs 3 (with io.NopCloser).
func TestSetBodyAllocs(t *testing.T) {
	out, err := http.NewRequest(http.MethodPost, "http://upstream.example/rpc", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`)
	var held Body
	if n := testing.AllocsPerRun(100, func() { held.Set(out, b) }); n > 2 {
		t.Errorf("Body.Set: %v allocations, want at most 2", n)
	}
	if n := testing.AllocsPerRun(100, func() { SetBody(out, b) }); n > 3 {
		t.Errorf("SetBody: %v allocations, want at most 3", n)
	}
}
