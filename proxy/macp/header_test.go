package macp

import (
	"context"
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/admission"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestForwardHeader: a decided Send reaches the runtime with its own
// :authority, none of the client's reserved grpc-* fields nor credentials,
// and grpc-timeout from the call's deadline.
func TestForwardHeader(t *testing.T) {
	in := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodSend},
		{Name: ":authority", Value: "client.example"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "grpc-accept-encoding", Value: "gzip"}, {Name: "grpc-encoding", Value: "identity"}, {Name: "grpc-timeout", Value: "99999999H"},
		{Name: "grpc-status", Value: "0"}, {Name: "authorization", Value: "Bearer client"}, {Name: principalHeader, Value: "forged"}, {Name: "x-app", Value: "1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got := forwardHeader(nil, in, "runtime:50051", metadata.Pairs("authorization", "Bearer up"), ctx)
	var names []string
	for _, f := range got {
		names = append(names, f.Name+"="+f.Value)
	}
	want := []string{":method=POST", ":scheme=http", ":path=" + methodSend, ":authority=runtime:50051", "content-type=application/grpc", "te=trailers", "x-app=1"}
	if len(names) != len(want)+2 || !slices.Equal(names[:len(want)], want) || names[len(want)+1] != "authorization=Bearer up" {
		t.Fatalf("forwarded %q, want %q then grpc-timeout and the upstream credential", names, want)
	}
	if d, err := decodeTimeout(headerValue(got, "grpc-timeout")); err != nil || d <= time.Second || d > 2*time.Second {
		t.Errorf("forwarded grpc-timeout %q (%v), want the deadline's 2 s", names[len(want)], d)
	}
}

// TestForwardHeaderContentType: the body is decided as protobuf whatever
// content subtype or parameters the client named (grpc-go reads an unknown
// subtype as protobuf), so the runtime is sent application/grpc, once: a
// client cannot have the runtime pick another codec (+json) than the one
// Warden read the message with, nor name two.
func TestForwardHeaderContentType(t *testing.T) {
	for _, cts := range [][]string{
		{"application/grpc"}, {"application/grpc+proto"}, {"application/grpc+json"},
		{"application/grpc;codec=json"}, {"application/grpc", "application/grpc+json"},
	} {
		in := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: methodSend}}
		for _, ct := range cts {
			in = append(in, hpack.HeaderField{Name: "content-type", Value: ct})
		}
		var got []string
		for _, f := range forwardHeader(nil, in, "runtime:50051", nil, context.Background()) {
			if f.Name == "content-type" {
				got = append(got, f.Value)
			}
		}
		if !slices.Equal(got, []string{"application/grpc"}) {
			t.Errorf("client content types %q reached the runtime as %q, want only application/grpc", cts, got)
		}
	}
}

func TestGRPCTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1S", time.Second, true},
		{"250m", 250 * time.Millisecond, true},
		{"99999999H", math.MaxInt64, true}, // clamped, not overflowed
		{"99999999M", 99999999 * time.Minute, true},
		{"1x", 0, false},
		{"123456789S", 0, false},
		{"S", 0, false},
	} {
		got, err := decodeTimeout(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("decodeTimeout(%q) = %v %v, want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{{0, "0n"}, {time.Second, "1000000u"}, {1500 * time.Millisecond, "1500000u"}, {time.Hour, "3600000m"}, {math.MaxInt64, "2562048H"}} {
		if got := encodeTimeout(tc.in); got != tc.want {
			t.Errorf("encodeTimeout(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// BenchmarkGRPCHeader reads the header list a grpc-go client sends for a
// Send with a deadline, as the relay does for every call.
func BenchmarkGRPCHeader(b *testing.B) {
	h := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/macp.v1.MACPRuntimeService/Send"},
		{Name: ":authority", Value: "127.0.0.1:50051"}, {Name: "content-type", Value: "application/grpc"}, {Name: "user-agent", Value: "grpc-go/1.77.0"},
		{Name: "te", Value: "trailers"}, {Name: "grpc-timeout", Value: "4999876u"}, {Name: "authorization", Value: "Bearer agent://worker"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, early := grpcHeader(h); early != nil {
			b.Fatal(early)
		}
	}
}

// TestGRPCHeaderMetadata: the metadata grpcHeader collects is grpc-go's
// for the same header list, read field by field (Get) or whole, whether
// the map is made at once (a name repeated, a long list) or later: every
// regular field by name, repeated ones in order, no pseudo-header; a
// repeated field's second value does not overwrite the value of the field
// after its first (they share one array); the names each once, in order.
func TestGRPCHeaderMetadata(t *testing.T) {
	pseudo := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: "/macp.v1.MACPRuntimeService/Send"},
		{Name: ":authority", Value: "a"}, {Name: "content-type", Value: "application/grpc"}}
	long := slices.Clone(pseudo)
	longMD := metadata.MD{"content-type": {"application/grpc"}}
	longNames := []string{"content-type"}
	for i := range scanNames + 2 {
		n, v := fmt.Sprintf("x-%d", i), strconv.Itoa(i)
		long = append(long, hpack.HeaderField{Name: n, Value: v})
		longMD[n], longNames = []string{v}, append(longNames, n)
	}
	for _, tc := range []struct {
		name   string
		header []hpack.HeaderField
		want   metadata.MD
		names  []string
	}{
		{"repeated", append(slices.Clone(pseudo), hpack.HeaderField{Name: "x-a", Value: "1"}, hpack.HeaderField{Name: "x-b", Value: "2"},
			hpack.HeaderField{Name: "x-a", Value: "3"}, hpack.HeaderField{Name: "x-c", Value: "4"}, hpack.HeaderField{Name: "x-a", Value: "5"}),
			metadata.MD{"content-type": {"application/grpc"}, "x-a": {"1", "3", "5"}, "x-b": {"2"}, "x-c": {"4"}},
			[]string{"content-type", "x-a", "x-b", "x-c"}},
		{"each once", append(slices.Clone(pseudo), hpack.HeaderField{Name: "authorization", Value: "Bearer x"}, hpack.HeaderField{Name: "x-b", Value: "2"}),
			metadata.MD{"content-type": {"application/grpc"}, "authorization": {"Bearer x"}, "x-b": {"2"}},
			[]string{"content-type", "authorization", "x-b"}},
		{"long", long, longMD, longNames},
	} {
		g, early := grpcHeader(tc.header)
		if early != nil {
			t.Fatal(early)
		}
		if g.path != "/macp.v1.MACPRuntimeService/Send" || !slices.Equal(g.md.names, tc.names) {
			t.Errorf("%s: path %q names %q, want %q", tc.name, g.path, g.md.names, tc.names)
		}
		for _, name := range append(slices.Clone(tc.names), "x-none", ":path") {
			if got := g.md.Get(name); !slices.Equal(got, tc.want[name]) {
				t.Errorf("%s: Get(%q) = %q, want %q", tc.name, name, got, tc.want[name])
			}
		}
		if got := g.md.whole(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: md %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRelayAdmitAllocs bounds the allocations of admitting one Send on the
// relay front door: grpcHeader's metadata (one array for its values and
// names: the names have no array of their own, which the gate's Source
// would keep on the heap; its map is made only when read whole), the
// request id minted, and the admitted call, which holds the call's flight. The gate makes no context
// for a call it admits (the source is put in one only for a decision it
// records), reads the metadata through the map itself (a method value
// was a closure for every call), and the flight is not an allocation of
// its own: 8 before, 5, 3 with the map made when it is read whole.
func TestRelayAdmitAllocs(t *testing.T) {
	// the server is not served: Admit reads the connection caps serveRelay
	// sets up, set here on the test's goroutine (a served one would set
	// them on another, which the race detector sees unordered with the
	// measured calls)
	cfg := Config{Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1", Transport: TransportRelay, Plaintext: true, UpstreamPlaintext: true}
	up, err := DialUpstream(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	srv, err := New(cfg, devEnforcer(t), up, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	srv.conns = listener.Bound(lis, cfg.Limits.WithDefaults().Conns(), nil)
	header := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodSend},
		{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "grpc-timeout", Value: "5S"}, {Name: "user-agent", Value: "grpc-go/1.77.0"}, {Name: "authorization", Value: "Bearer agent://worker"}}
	h := callHandler{srv, admission.CallSend}
	n := testing.AllocsPerRun(200, func() {
		adm, refusal := h.Admit(context.Background(), header, nil)
		if refusal != nil {
			t.Fatalf("refused: %v", refusal)
		}
		adm.(*relayAdmitted).Abandon()
	})
	const want = 3
	if n > want {
		t.Errorf("%.0f allocations to admit a Send, want at most %d", n, want)
	}
	t.Logf("%.0f allocations", n)
}

// TestRouterCallKinds: the router looks a call's path up once and routes
// it to the handler of its kind, which is the gate's reading of the path:
// a kind handed on wrong would decide a call as another method.
func TestRouterCallKinds(t *testing.T) {
	s := &Server{methods: admission.NewMethods([]string{"grpc.health.v1.Health"}), cfg: Config{MaxMessageBytes: 1 << 20}}
	r := newRouter(s)
	paths := []string{healthCheck, healthWatch, "/grpc.health.v1.Health/Other", "/nope.Service/Send", "/macp.v1.MACPRuntimeService/send", ""}
	for _, m := range macpv1.MACPRuntimeService_ServiceDesc.Methods {
		paths = append(paths, admission.MACPService+m.MethodName)
	}
	for _, m := range macpv1.MACPRuntimeService_ServiceDesc.Streams {
		paths = append(paths, admission.MACPService+m.StreamName)
	}
	for _, path := range paths {
		rt := r.Route([]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: path}}, nil, nil)
		h, ok := rt.Handler.(*callHandler)
		if !ok {
			t.Fatalf("%s: handler %T", path, rt.Handler)
		}
		want := s.methods.Lookup(path)
		if h.call != want || rt.Stream != streamed(want, path) {
			t.Errorf("%s: routed as %v (stream %v), the table says %v", path, h.call, rt.Stream, want)
		}
	}
}
