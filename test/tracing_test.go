package test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// collector receives OTLP trace exports, as an OpenTelemetry collector does.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, sp.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *collector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans...)
}

// TestMACPTracing checks that Warden exports a server span for each call and
// a client span for the call it makes to the runtime.
func TestMACPTracing(t *testing.T) { eachTransport(t, testMACPTracing) }

func testMACPTracing(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--otlp-endpoint", lis.Addr().String())
	conn, err := grpc.NewClient(warden, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if ack, err := sendStart(ctx, conn, "planner", payload); err != nil || !ack.GetOk() {
		t.Fatalf("SessionStart: %v %v", err, ack.GetError())
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, s := range col.names() {
			if strings.HasSuffix(s, "MACPRuntimeService/Send") {
				n++
			}
		}
		if n >= 2 { // Warden's server span and its client span to the runtime
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("collector received spans %v; want a server and a client span for Send", col.names())
}
