package macp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // as bin/warden has it, through otlptracegrpc
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/internal/cputime"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestOddRequestsOnBothDoors sends what a gRPC client would not, or what
// only an odd one would, to both sidecar doors: every request is answered
// with a gRPC status, and the relay's answer (HTTP status, grpc-status and
// message, macp-error-code, reset) is the grpc-go door's. Before, the relay
// handed each of these to the grpc-go server in process behind it; it now
// answers them itself (TestRelayAnswersItself: no such server exists).
func TestOddRequestsOnBothDoors(t *testing.T) {
	hdr := func(method, path string, extra ...hpack.HeaderField) []hpack.HeaderField {
		h := []hpack.HeaderField{{Name: ":method", Value: method}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
			{Name: ":authority", Value: "warden"}}
		return append(h, extra...)
	}
	grpcCT := hpack.HeaderField{Name: "content-type", Value: "application/grpc"}
	planner := hpack.HeaderField{Name: "authorization", Value: "Bearer planner"}
	msg := func(m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return framed(b, len(b), 0)
	}
	get := msg(&macpv1.GetSessionRequest{SessionId: "6b1f0c9e-2d4a-4f6b-9c1e-ffffffffffff"})
	cancel := msg(&macpv1.CancelSessionRequest{SessionId: "6b1f0c9e-2d4a-4f6b-9c1e-ffffffffffff"})
	send := msg(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "TaskRequest",
		MessageId: "m1", SessionId: "6b1f0c9e-2d4a-4f6b-9c1e-ffffffffffff", Sender: "planner", Payload: []byte("{}")}})
	check := msg(&healthpb.HealthCheckRequest{})
	gz := hpack.HeaderField{Name: "grpc-encoding", Value: "gzip"}
	for _, tc := range []struct {
		name   string
		header []hpack.HeaderField
		body   []byte
	}{
		// what grpc-go's transport answers before any handler
		{"GET", hdr("GET", methodGet, grpcCT, planner), get},
		{"PUT without a body", hdr("PUT", methodGet, grpcCT, planner), nil},
		{"no content type", hdr("POST", methodGet, planner), get},
		{"text/plain", hdr("POST", methodGet, planner, hpack.HeaderField{Name: "content-type", Value: "text/plain"}), get},
		{"application/grpc-web", hdr("POST", methodGet, planner, hpack.HeaderField{Name: "content-type", Value: "application/grpc-web"}), get},
		{"GET with a JSON content type", hdr("GET", methodGet, planner, hpack.HeaderField{Name: "content-type", Value: "application/json"}), get},
		{"no authority", []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodGet}, grpcCT, planner}, get},
		{"two host headers", hdr("POST", methodGet, grpcCT, planner, hpack.HeaderField{Name: "host", Value: "a"}, hpack.HeaderField{Name: "host", Value: "b"}), get},
		{"malformed grpc-timeout", hdr("POST", methodGet, grpcCT, planner, hpack.HeaderField{Name: "grpc-timeout", Value: "1x"}), get},
		{"grpc-timeout too long", hdr("POST", methodSend, grpcCT, planner, hpack.HeaderField{Name: "grpc-timeout", Value: "1234567890S"}), send},
		{"grpc-timeout not a number", hdr("POST", methodSend, grpcCT, planner, hpack.HeaderField{Name: "grpc-timeout", Value: "aS"}), send},
		{"malformed binary metadata", hdr("POST", methodGet, grpcCT, planner, hpack.HeaderField{Name: "x-trace-bin", Value: "!!!"}), get},
		// the path, before any credential
		{"path without a leading slash", hdr("POST", "macp.v1.MACPRuntimeService/Send", grpcCT, planner), send},
		{"path with one slash", hdr("POST", "/Send", grpcCT), send},
		{"unknown service", hdr("POST", "/foo.Bar/Baz", grpcCT), get},
		{"unknown method, no credentials", hdr("POST", service+"Nope", grpcCT), get},
		{"a runtime method under a second slash", hdr("POST", "/"+methodSend, grpcCT, planner), send},
		// compression: what grpc-go has a compressor for (gzip, registered
		// by this package's tests as by bin/warden's dependencies)
		{"gzip Send", hdr("POST", methodSend, grpcCT, planner, gz), gzipped(send)},
		{"gzip Send, uncompressed", hdr("POST", methodSend, grpcCT, planner, gz), send},
		{"gzip GetSession, two messages", hdr("POST", methodGet, grpcCT, planner, gz), append(gzipped(get), gzipped(get)...)},
		{"gzip GetSession, not gzip", hdr("POST", methodGet, grpcCT, planner, gz), framed([]byte("nope"), 4, 1)},
		{"gzip GetSession, cut", hdr("POST", methodGet, grpcCT, planner, gz), func() []byte {
			b := gzipped(get)
			b = b[:len(b)-3]
			return framed(b[grpcPrefix:], len(b)-grpcPrefix, 1)
		}()},
		{"gzip GetSession, over max once inflated", hdr("POST", methodGet, grpcCT, planner, gz), gzipped(framed(make([]byte, 8192), 8192, 0))},
		{"gzip StreamSession, over max once inflated", hdr("POST", methodStream, grpcCT, planner, gz), gzipped(framed(make([]byte, 8192), 8192, 0))},
		{"gzip health Check", hdr("POST", healthCheck, grpcCT, gz), gzipped(check)},
		{"gzip on an unknown path", hdr("POST", "/foo.Bar/Baz", grpcCT, gz), get},
		{"gzip without credentials", hdr("POST", methodGet, grpcCT, gz), get},
		{"deflate: no decompressor", hdr("POST", methodSend, grpcCT, planner, hpack.HeaderField{Name: "grpc-encoding", Value: "deflate"}), send},
		{"deflate on an unknown path", hdr("POST", "/foo.Bar/Baz", grpcCT, hpack.HeaderField{Name: "grpc-encoding", Value: "deflate"}), get},
		{"identity encoding", hdr("POST", methodGet, grpcCT, planner, hpack.HeaderField{Name: "grpc-encoding", Value: "identity"}), get},
		// content types grpc-go reads as gRPC
		{"application/grpc+json", hdr("POST", methodGet, planner, hpack.HeaderField{Name: "content-type", Value: "application/grpc+json"}), get},
		{"application/grpc;charset", hdr("POST", methodGet, planner, hpack.HeaderField{Name: "content-type", Value: "application/grpc;charset=utf-8"}), get},
		{"two content types, the second gRPC", hdr("POST", methodGet, planner, hpack.HeaderField{Name: "content-type", Value: "application/json"}, grpcCT), get},
		// bodies that are not exactly one uncompressed message
		{"CancelSession without a message", hdr("POST", service+"CancelSession", grpcCT, planner), nil},
		{"GetSession, two messages", hdr("POST", methodGet, grpcCT, planner), append(slices.Clone(get), get...)},
		{"GetSession, a message and a partial prefix", hdr("POST", methodGet, grpcCT, planner), append(slices.Clone(get), 0, 0)},
		{"GetSession, a message and a compressed one", hdr("POST", methodGet, grpcCT, planner), append(slices.Clone(get), framed(nil, 0, 1)...)},
		{"GetSession, a message and one too large", hdr("POST", methodGet, grpcCT, planner), append(slices.Clone(get), framed(nil, 1<<20, 0)...)},
		{"ListSessions, truncated", hdr("POST", service+"ListSessions", grpcCT, planner), framed(nil, 4, 0)},
		{"Send, two messages", hdr("POST", methodSend, grpcCT, planner), append(slices.Clone(send), send...)},
		{"Send, a partial prefix", hdr("POST", methodSend, grpcCT, planner), []byte{0, 0}},
		{"SuspendSession, compressed", hdr("POST", service+"SuspendSession", grpcCT, planner), framed(cancel[grpcPrefix:], len(cancel)-grpcPrefix, 1)},
		{"RegisterPolicy, two messages", hdr("POST", service+"RegisterPolicy", grpcCT, planner), append(framed(nil, 0, 0), framed(nil, 0, 0)...)},
		{"ListModes without a message", hdr("POST", service+"ListModes", grpcCT, planner), nil},
		{"ListModes, two messages", hdr("POST", service+"ListModes", grpcCT, planner), append(framed(nil, 0, 0), framed(nil, 0, 0)...)},
		{"WatchSessions without a message", hdr("POST", service+"WatchSessions", grpcCT, planner), nil},
		{"WatchSignals, two messages", hdr("POST", service+"WatchSignals", grpcCT, planner), append(framed(nil, 0, 0), framed(nil, 0, 0)...)},
		{"WatchPolicies, truncated", hdr("POST", service+"WatchPolicies", grpcCT, planner), framed(nil, 3, 0)},
		{"health Check without a message", hdr("POST", healthCheck, grpcCT), nil},
		{"health Check, two messages", hdr("POST", healthCheck, grpcCT), append(slices.Clone(check), check...)},
		{"health Watch, compressed", hdr("POST", healthWatch, grpcCT), framed(nil, 0, 1)},
		{"StreamSession, compressed", hdr("POST", methodStream, grpcCT, planner), framed(nil, 0, 1)},
		{"StreamSession, truncated", hdr("POST", methodStream, grpcCT, planner), framed(nil, 7, 0)},
		{"StreamSession, payload format 2", hdr("POST", methodStream, grpcCT, planner), framed(nil, 0, 2)},
		{"StreamSession, too large", hdr("POST", methodStream, grpcCT, planner), framed(nil, 1<<20, 0)},
		{"GetSession, payload format 7", hdr("POST", methodGet, grpcCT, planner), framed(nil, 0, 7)},
		{"reflection, payload format 2", hdr("POST", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", grpcCT), framed(nil, 0, 2)},
		{"reflection, truncated", hdr("POST", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", grpcCT), framed(nil, 9, 0)},
		{"reflection, compressed", hdr("POST", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", grpcCT), framed(nil, 0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]rawAnswer{}
			for _, transport := range transports {
				_, up := startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return historyRuntime{f, 0, 0, nil} }, func(s *grpc.Server) {
					healthpb.RegisterHealthServer(s, health.NewServer())
					reflection.Register(s)
				})
				addr := serveSidecar(t, devEnforcer(t), Config{Upstream: up, Transport: transport, MaxMessageBytes: 4096})
				a, _ := rawExchange(t, addr, tc.header, tc.body)
				if a.GRPCStatus == "" && a.Reset == 0 {
					t.Errorf("%s: answered without a gRPC status: %+v", transport, a)
				}
				got[transport] = a
			}
			t.Logf("grpc: %+v", got[TransportGRPC])
			if grpcDoorBuilt && got[TransportGRPC] != got[TransportRelay] {
				t.Errorf("the doors answer differently:\ngrpc  %+v\nrelay %+v", got[TransportGRPC], got[TransportRelay])
			}
		})
	}
}

// TestPassThroughOnBothDoors: a pass-through service other than health
// (gRPC server reflection, a stream each way) works through both doors,
// and the service receives none of the client's credential or identity
// headers on either (relayAnonymous), while it receives the client's other
// metadata. Before, the relay handed it to the grpc-go server in process.
func TestPassThroughOnBothDoors(t *testing.T) {
	var mu sync.Mutex
	var seen []metadata.MD
	record := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		mu.Lock()
		seen = append(seen, md)
		mu.Unlock()
		return handler(srv, ss)
	}
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			lisAddr := startRuntimeServer(t, grpc.StreamInterceptor(record))
			_, addr := serveSidecarServer(t, devEnforcer(t), Config{Upstream: lisAddr, Transport: transport})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer planner", "x-macp-token", "planner",
				chainHeader, "Zm9yZ2Vk", clientHeader, "203.0.113.66:1", "x-kept", "yes")
			mu.Lock()
			seen = nil
			mu.Unlock()
			st, err := reflectionpb.NewServerReflectionClient(startSidecarConn(t, addr)).ServerReflectionInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var services []string
			for range 2 { // two requests on the one stream
				if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
					t.Fatal(err)
				}
				r, err := st.Recv()
				if err != nil {
					t.Fatalf("reflection through %s: %v", transport, err)
				}
				for _, s := range r.GetListServicesResponse().GetService() {
					services = append(services, s.GetName())
				}
			}
			_ = st.CloseSend()
			if !slices.Contains(services, "macp.v1.MACPRuntimeService") || len(services)%2 != 0 {
				t.Errorf("reflection through %s listed %v", transport, services)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 {
				t.Fatalf("the runtime saw %d reflection streams, want 1", len(seen))
			}
			for _, h := range []string{"authorization", "x-macp-token", chainHeader, clientHeader} {
				if v := seen[0].Get(h); len(v) > 0 {
					t.Errorf("%s: the pass-through service received %s: %v", transport, h, v)
				}
			}
			if v := seen[0].Get("x-kept"); !slices.Equal(v, []string{"yes"}) {
				t.Errorf("%s: x-kept = %v, want the client's", transport, v)
			}
		})
	}
}

// startRuntimeServer serves the fake runtime, gRPC health and reflection
// on a grpc-go server with opts, and returns its address.
func startRuntimeServer(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt := grpc.NewServer(opts...)
	macpv1.RegisterMACPRuntimeServiceServer(rt, &fakeRuntime{sessions: map[string]*fakeSession{}})
	healthpb.RegisterHealthServer(rt, health.NewServer())
	reflection.Register(rt)
	go func() { _ = rt.Serve(lis) }()
	t.Cleanup(rt.Stop)
	return lis.Addr().String()
}

// gzipped is the framed message m (prefix and bytes) gzip-compressed, with
// the compressed flag.
func gzipped(m []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write(m[grpcPrefix:])
	_ = w.Close()
	return framed(b.Bytes(), b.Len(), 1)
}

// BenchmarkRelayOddCalls measures, end to end through the relay front door,
// the calls it once handed to a grpc-go server in process and now answers
// itself: an unknown path (refused by the gate), a reflection stream
// (ListServices, relayed to the runtime) and a gzip-compressed GetSession
// (decompressed, decided, forwarded).
func BenchmarkRelayOddCalls(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	rt := grpc.NewServer()
	macpv1.RegisterMACPRuntimeServiceServer(rt, benchRuntime{})
	reflection.Register(rt)
	go func() { _ = rt.Serve(lis) }()
	b.Cleanup(rt.Stop)
	conn := startSidecar(b, devEnforcer(b), lis.Addr().String(), TransportRelay)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer agent://worker")
	for _, bc := range []struct {
		name string
		call func() error
	}{
		{"unknown path", func() error {
			err := conn.Invoke(ctx, service+"Nope", &macpv1.GetSessionRequest{}, &macpv1.GetSessionResponse{})
			if status.Code(err) != codes.Unimplemented {
				return fmt.Errorf("unknown path: %v", err)
			}
			return nil
		}},
		{"reflection", func() error {
			st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err == nil {
				err = st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			}
			if err == nil {
				_, err = st.Recv()
			}
			if err == nil {
				_ = st.CloseSend()
				_, err = st.Recv()
			}
			if !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		}},
		{"gzip GetSession", func() error {
			_, err := macpv1.NewMACPRuntimeServiceClient(conn).GetSession(ctx, &macpv1.GetSessionRequest{SessionId: "00000000-0000-4000-8000-000000000000"}, grpc.UseCompressor("gzip"))
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, cputime.Used())
			for b.Loop() {
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
