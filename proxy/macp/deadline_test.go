package macp

import (
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestDeadlineFromHeaders: a call's grpc-timeout counts from its HEADERS,
// as grpc-go's server counts it, not from when its body ended. A Send whose
// 200 ms pass before its body comes is answered DEADLINE_EXCEEDED and never
// reaches the runtime; one whose body comes within them is forwarded.
func TestDeadlineFromHeaders(t *testing.T) {
	runtime, up := startFakeRuntime(t)
	addr := serveSidecar(t, devEnforcer(t), Config{Upstream: up, Transport: TransportRelay})
	start, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	header := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodSend},
		{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "authorization", Value: "Bearer planner"},
		{Name: "grpc-timeout", Value: "200m"}}
	for _, tc := range []struct {
		delay   time.Duration
		status  string
		reaches bool
	}{
		{0, "0", true},
		{400 * time.Millisecond, "4", false}, // DEADLINE_EXCEEDED
	} {
		msg, _ := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: macp.TypeSessionStart,
			MessageId: "m1", SessionId: sessionID(), Sender: "planner", Payload: start}})
		before := runtime.forwarded()
		got, _ := rawPiecesAfter(t, addr, header, [][]byte{framed(msg, len(msg), 0)}, true, tc.delay)
		if got.GRPCStatus != tc.status {
			t.Errorf("body after %v: %+v, want grpc-status %s", tc.delay, got, tc.status)
		}
		if reached := runtime.forwarded() != before; reached != tc.reaches {
			t.Errorf("body after %v: reached the runtime %v, want %v", tc.delay, reached, tc.reaches)
		}
	}
}
