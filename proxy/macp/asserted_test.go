package macp

import (
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestAssertedMetadata: L4's class on MACP. The doors forwarded every
// metadata field of the client's but the credentials and Warden's own to
// the runtime, so a runtime (or a hop before it) that reads an identity
// from x-forwarded-user, x-tenant-id or x-macp-agent-id (which runtimes
// before 0.13.0 read as the sender in dev mode) took the client's word
// for who is calling. Every door now refuses such a call INVALID_ARGUMENT
// before credentials, by the rule the JSON-RPC gate applies (headername):
// before, each row was forwarded (Send answered ok). What gRPC clients
// send (user-agent, grpc-accept-encoding, te, a trace context, binary
// metadata) still passes.
func TestAssertedMetadata(t *testing.T) {
	refused := []string{"x-forwarded-user", "x-forwarded-email", "remote-user", "x-tenant-id", "x-warden-principal",
		"x-macp-agent-id", "x-agent-id", "x-sender", "impersonate-group", "x-user-bin", "x_macp_token", "x_request_id",
		"x-http-method-override", "x-original-url", "x-envoy-original-path", "x-roles", "x-jwt-assertion"}
	passed := []hpack.HeaderField{{Name: "user-agent", Value: "grpc-python/1.76.0 grpc-c/51.0.0 (linux; chttp2)"},
		{Name: "grpc-accept-encoding", Value: "identity, deflate, gzip"}, {Name: "x-request-id", Value: "r1"},
		{Name: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, {Name: "x-trace-bin", Value: "AAEC"}}
	start := func(t *testing.T, sid, id string) []byte {
		return unaryBody(t, &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "SessionStart",
			MessageId: id, SessionId: sid, Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(),
			Payload: unaryBody(t, &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})[grpcPrefix:]}})
	}
	for _, door := range doors {
		t.Run(door, func(t *testing.T) {
			runtime, up := startFakeRuntime(t)
			call := openDoor(t, door, devEnforcer(t), up, DefaultMaxMessageBytes)
			for _, name := range refused {
				before := runtime.forwarded()
				a := call(t, append(unaryHeader("Send", "planner"), hpack.HeaderField{Name: name, Value: "worker"}), start(t, sessionID(), "m-"+name))
				if a.GRPCStatus != "3" {
					t.Errorf("%s: %+v, want INVALID_ARGUMENT", name, a)
				}
				if n := runtime.forwarded() - before; n != 0 {
					t.Errorf("%s: the call reached the runtime", name)
				}
			}
			a := call(t, append(unaryHeader("Send", "planner"), passed...), start(t, sessionID(), "m-ok"))
			if a.Ack != "ok=true " {
				t.Errorf("a gRPC client's own metadata: %+v, want the Send forwarded", a)
			}
		})
	}
}
