package macp

import (
	"context"
	"net"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// testClock is the Enforcer's clock, set by the test to each step's time and
// read by the sidecar's goroutines.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// transcriptFiles are the spec's conformance fixtures and Warden's attack
// transcripts.
func transcriptFiles(t *testing.T) []string {
	t.Helper()
	files, err := replay.Transcripts("../../testdata/macp/conformance", "../../test/conformance", "../../test/attacks/macp")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 61 {
		t.Fatalf("found %d transcripts, want at least 61", len(files))
	}
	return files
}

// transports are the sidecar's front doors built into the test binary;
// every test that runs a sidecar runs on each: the relay, and the grpc-go
// door, the oracle the relay is held to, where it is built (-tags
// wardenoracle).
var transports = builtDoors()

// builtDoors are the sidecar's front doors built into the test binary.
func builtDoors() []string {
	if grpcDoorBuilt {
		return []string{TransportGRPC, TransportRelay}
	}
	return []string{TransportRelay}
}

// startSidecar serves a Server for enf on a loopback port in front of
// upstream, with the front door transport, until the test ends and returns
// a client connection to it.
func startSidecar(t testing.TB, enf *sessions.Decider, upstream, transport string) *grpc.ClientConn {
	t.Helper()
	return startSidecarWith(t, enf, Config{Upstream: upstream, Transport: transport})
}

// startSidecarWith is startSidecar with cfg (plaintext both ways).
func startSidecarWith(t testing.TB, enf *sessions.Decider, cfg Config) *grpc.ClientConn {
	t.Helper()
	return startSidecarConn(t, serveSidecar(t, enf, cfg))
}

// startSidecarConn is a client connection to the sidecar at addr, closed
// when the test ends.
func startSidecarConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serveSidecar serves a plaintext Server with cfg (plaintext both ways, on
// a loopback port) until the test ends and returns its address.
func serveSidecar(t testing.TB, enf *sessions.Decider, cfg Config) string {
	t.Helper()
	_, addr := serveSidecarServer(t, enf, cfg)
	return addr
}

// serveSidecarServer is serveSidecar that returns the Server too.
func serveSidecarServer(t testing.TB, enf *sessions.Decider, cfg Config) (*Server, string) {
	t.Helper()
	return serveSidecarAs(t, "warden", enf, cfg)
}

// serveSidecarAs is serveSidecarServer with its goroutines labelled
// side=side (a benchmark's setup served apart from what it measures).
func serveSidecarAs(t testing.TB, side string, enf *sessions.Decider, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Transport == TransportGRPC && !grpcDoorBuilt {
		t.Skip("the grpc-go front door, the test oracle, is built only with -tags wardenoracle")
	}
	cfg.Listen, cfg.Plaintext, cfg.UpstreamPlaintext = "127.0.0.1:0", true, true
	up, err := DialUpstream(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	srv, err := New(cfg, enf, up, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, serveLabelledAs(t, side, srv.Serve)
}

// serveLabelled runs serve on a loopback listener until the test ends and
// returns its address. Its goroutines carry the label side=warden, for
// profiles (go tool pprof -tagfocus side=warden).
func serveLabelled(t testing.TB, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	return serveLabelledAs(t, "warden", serve)
}

// serveLabelledAs is serveLabelled with the label side=side.
func serveLabelledAs(t testing.TB, side string, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go pprof.Do(ctx, pprof.Labels("side", side), func(ctx context.Context) { done <- serve(ctx, lis) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// sendStep sends one transcript step through a MACP client, with the step's
// principal as a dev bearer, and reads the answer back into a Decision: a
// Send's Ack, or a refusal's status, whose macp-error-code trailer is the
// MACP code (a call refused at the door, Send included, has no Ack).
func sendStep(ctx context.Context, c macpv1.MACPRuntimeServiceClient, st replay.Step) (proxy.Decision, error) {
	r := st.Request
	if r.Credentials.Bearer != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.Credentials.Bearer)
	}
	var trailer metadata.MD
	c = trailed{c, &trailer}
	var ack *macpv1.Ack
	var err error
	switch r.Op {
	case "":
		var resp *macpv1.SendResponse
		resp, err = c.Send(ctx, &macpv1.SendRequest{Envelope: r.Envelope})
		ack = resp.GetAck()
	case macp.OpCancel:
		var resp *macpv1.CancelSessionResponse
		resp, err = c.CancelSession(ctx, &macpv1.CancelSessionRequest{SessionId: r.SessionID})
		ack = resp.GetAck()
	case macp.OpSuspend:
		var resp *macpv1.SuspendSessionResponse
		resp, err = c.SuspendSession(ctx, &macpv1.SuspendSessionRequest{SessionId: r.SessionID})
		ack = resp.GetAck()
	case macp.OpResume:
		var resp *macpv1.ResumeSessionResponse
		resp, err = c.ResumeSession(ctx, &macpv1.ResumeSessionRequest{SessionId: r.SessionID})
		ack = resp.GetAck()
	}
	if err != nil {
		st, ok := status.FromError(err)
		code := trailer.Get("macp-error-code")
		if !ok || len(code) != 1 {
			return proxy.Decision{}, err // not an answer: the call failed
		}
		return proxy.Decision{Code: rules.Code(code[0]), Message: st.Message()}, nil
	}
	return proxy.Decision{Allow: ack.GetOk(), Duplicate: ack.GetDuplicate(), Code: rules.Code(ack.GetError().GetCode()), Message: ack.GetError().GetMessage()}, nil
}

// trailed is a client whose every call records its trailer.
type trailed struct {
	macpv1.MACPRuntimeServiceClient
	trailer *metadata.MD
}

func (c trailed) Send(ctx context.Context, in *macpv1.SendRequest, opts ...grpc.CallOption) (*macpv1.SendResponse, error) {
	return c.MACPRuntimeServiceClient.Send(ctx, in, append(opts, grpc.Trailer(c.trailer))...)
}

func (c trailed) CancelSession(ctx context.Context, in *macpv1.CancelSessionRequest, opts ...grpc.CallOption) (*macpv1.CancelSessionResponse, error) {
	return c.MACPRuntimeServiceClient.CancelSession(ctx, in, append(opts, grpc.Trailer(c.trailer))...)
}

func (c trailed) SuspendSession(ctx context.Context, in *macpv1.SuspendSessionRequest, opts ...grpc.CallOption) (*macpv1.SuspendSessionResponse, error) {
	return c.MACPRuntimeServiceClient.SuspendSession(ctx, in, append(opts, grpc.Trailer(c.trailer))...)
}

func (c trailed) ResumeSession(ctx context.Context, in *macpv1.ResumeSessionRequest, opts ...grpc.CallOption) (*macpv1.ResumeSessionResponse, error) {
	return c.MACPRuntimeServiceClient.ResumeSession(ctx, in, append(opts, grpc.Trailer(c.trailer))...)
}

// TestTranscriptsThroughSidecar replays the spec's conformance fixtures and
// Warden's attack transcripts through the standalone sidecar over gRPC, in
// front of a runtime that accepts everything: every outcome a client sees must
// be the transcript's (as in replay and ext_authz), the session must end as
// the transcript says, and exactly the allowed messages reach the runtime.
func TestTranscriptsThroughSidecar(t *testing.T) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, transport := range transports {
		for _, file := range transcriptFiles(t) {
			t.Run(transport+"/"+filepath.Base(file), func(t *testing.T) {
				tr, err := replay.Load(file)
				if err != nil {
					t.Fatal(err)
				}
				clock := &testClock{}
				enf, err := replay.NewEnforcer(engine, tr, clock.now)
				if err != nil {
					t.Fatal(err)
				}
				runtime, addr := startFakeRuntime(t)
				client := macpv1.NewMACPRuntimeServiceClient(startSidecar(t, enf, addr, transport))
				res, err := replay.Evaluate(ctx, tr, func(ctx context.Context, st replay.Step) (proxy.Decision, error) {
					clock.set(st.At)
					before := runtime.forwarded()
					ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					d, err := sendStep(ctx, client, st)
					if err != nil {
						return d, err
					}
					if got := runtime.forwarded() - before; got != map[bool]int{true: 1, false: 0}[d.Allow] {
						t.Errorf("%s:%s: allow=%v, but %d calls reached the runtime", tr.Name, st.Index, d.Allow, got)
					}
					return d, nil
				}, func() (*macp.Session, error) { return enf.Session(ctx, tr.SessionID) })
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range res.Failures {
					t.Error(f)
				}
			})
		}
	}
}
