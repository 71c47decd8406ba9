package macp

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/authn"
)

// TestUpstreamCtx: what the runtime is sent for a call answered on the
// relay, read off its header list when a call to the runtime is made
// (outgoing) and for the forward's credentials (upstreamCtx.Get), is what
// upstreamContext makes of the call's metadata: the client's credential
// as it came, or the token for a principal authenticated by certificate
// instead; no identity field of the client's. Metadata appended to the
// context comes after; outgoing applied twice adds nothing.
func TestUpstreamCtx(t *testing.T) {
	header := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: methodSend}, {Name: ":authority", Value: "a"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "authorization", Value: "Bearer client"},
		{Name: principalHeader, Value: "forged"}, {Name: chainHeader, Value: "forged"}, {Name: "x-app", Value: "1"}, {Name: "x-app", Value: "2"}}
	s := &Server{tokens: authn.UpstreamTokens{"svc": "upstream-token"}}
	for _, tc := range []struct {
		name   string
		header []hpack.HeaderField
		p      authn.Principal
	}{
		{"bearer", header, authn.Principal{ID: "agent", Method: "jwt"}},
		{"certificate, a token for it", header, authn.Principal{ID: "svc", Method: string(authn.MethodMTLS)}},
		{"certificate, no token", header, authn.Principal{ID: "other", Method: string(authn.MethodMTLS)}},
		{"each field once", slices.Delete(slices.Clone(header), 8, 9), authn.Principal{ID: "agent", Method: "jwt"}},
	} {
		c := authn.Credentials{Bearer: "client"}
		g, early := grpcHeader(tc.header)
		if early != nil {
			t.Fatal(early)
		}
		want, _ := metadata.FromOutgoingContext(s.upstreamContext(context.Background(), g.md.whole(), tc.p, c))
		g2, _ := grpcHeader(tc.header)
		u := &upstreamCtx{Context: context.Background(), s: s, md: &g2.md, p: &tc.p, c: &c}
		for _, name := range []string{authn.HeaderAuthorization, authn.HeaderMACPToken} {
			if got := u.Get(name); !slices.Equal(got, want[name]) {
				t.Errorf("%s: Get(%q) = %q, want %q", tc.name, name, got, want[name])
			}
		}
		ctx := outgoing(metadata.AppendToOutgoingContext(u, "x-added", "3"))
		got, _ := metadata.FromOutgoingContext(outgoing(ctx))
		wantAll := metadata.Join(want, metadata.Pairs("x-added", "3"))
		if !reflect.DeepEqual(got, wantAll) {
			t.Errorf("%s: outgoing metadata %v, want %v", tc.name, got, wantAll)
		}
		if got, _ := metadata.FromOutgoingContext(outgoing(context.Background())); got != nil {
			t.Errorf("%s: outgoing made metadata %v for a context not made for a call", tc.name, got)
		}
	}
}
