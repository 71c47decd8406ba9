package macp

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestGetSessionDoors: a GetSession gets the same answer at every door,
// ext_authz in its default configuration (session reads not opted in): the
// initiator and a participant read the session; an outsider gets, for an
// existing session, exactly the runtime's answer for an unknown one
// (NOT_FOUND "Session '<id>' not found"), as the sidecar answers. Before,
// ext_authz refused every GetSession PERMISSION_DENIED, participants
// included.
func TestGetSessionDoors(t *testing.T) {
	start, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	hdr := unaryHeader
	body := func(m proto.Message) []byte { return unaryBody(t, m) }
	type answer struct{ status, grpcStatus, message string }
	answers := map[string]map[string]answer{} // door: row: answer
	for _, door := range doors {
		t.Run(door, func(t *testing.T) {
			_, up := startFakeRuntime(t)
			call := openDoorWith(t, door, devEnforcer(t), up, DefaultMaxMessageBytes, extauthz.Config{Listen: "127.0.0.1:0"})
			sid := sessionID()
			if a := call(t, hdr("Send", "planner"), body(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: macp.TypeSessionStart,
				MessageId: "start", SessionId: sid, Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: start}})); a.Ack != "ok=true " {
				t.Fatalf("SessionStart: %+v", a)
			}
			got := map[string]answer{}
			for _, r := range []struct{ name, who, sid string }{
				{"initiator", "planner", sid},
				{"participant", "worker", sid},
				{"outsider", "mallory", sid},
				{"unknown session", "planner", sessionID()},
			} {
				a := call(t, hdr("GetSession", r.who), body(&macpv1.GetSessionRequest{SessionId: r.sid}))
				got[r.name] = answer{a.Status, a.GRPCStatus, strings.ReplaceAll(a.GRPCMessage, r.sid, "ID")}
			}
			for _, r := range []string{"initiator", "participant"} {
				if got[r].grpcStatus != "0" {
					t.Errorf("%s: %+v, want the session", r, got[r])
				}
			}
			for _, r := range []string{"outsider", "unknown session"} {
				if got[r].grpcStatus != "5" || got[r].message != "Session 'ID' not found" {
					t.Errorf("%s: %+v, want NOT_FOUND Session 'ID' not found", r, got[r])
				}
			}
			answers[door] = got
		})
	}
	for _, door := range doors[1:] {
		for r, a := range answers[doors[0]] {
			if b := answers[door][r]; b.grpcStatus != a.grpcStatus || b.message != a.message {
				t.Errorf("%s: %s answers %+v, %s %+v", r, door, b, doors[0], a)
			}
		}
	}
}

// unaryHeader is the header list of a unary call of method by who.
func unaryHeader(method, who string) []hpack.HeaderField {
	return []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: service + method},
		{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "authorization", Value: "Bearer " + who}}
}

// unaryBody is m in one gRPC message frame.
func unaryBody(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return framed(b, len(b), 0)
}
