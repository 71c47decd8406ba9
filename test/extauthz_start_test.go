package test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestExtAuthzStartOnUnknownSession: an ext_authz Warden that never saw a
// session (it was started before a restart without shared state, or past
// Warden) must not let a SessionStart for it through as new, which it would
// commit on allow, making the sender the initiator: it asks the real runtime
// first. The real initiator's later messages are decided on the runtime's
// session.
func TestExtAuthzStartOnUnknownSession(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	sid := newSession()
	msgs := taskMessages(sid)
	direct.mustAccept(msgs[0]) // the planner's session, which Warden never saw
	c, _ := startExtAuthz(t, "warden", runtime)

	restart := func(sender, id, session string) *macpv1.Envelope {
		b, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{sender, "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: rules.ModeTask, MessageType: "SessionStart", MessageId: id, SessionId: session,
			Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: b}
	}
	for _, tc := range []struct {
		name string
		msg  *macpv1.Envelope
		want string
	}{
		{"a stranger starts the planner's session", restart("mallory", "evil-1", sid), string(rules.CodeSessionAlreadyExists)},
		{"a participant starts it again", restart("other", "again-1", sid), string(rules.CodeSessionAlreadyExists)},
		{"the planner retransmits its start", msgs[0], "allow"},
		{"the planner's TaskRequest", msgs[1], "allow"},
		{"the worker's TaskAccept", msgs[2], "allow"},
		{"a stranger starts a new session", restart("mallory", "new-1", newSession()), "allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := envoy(t, c, direct, tc.msg); got != tc.want {
				t.Errorf("%s as %s: %s, want %s", tc.msg.GetMessageType(), tc.msg.GetSender(), got, tc.want)
			}
		})
	}
}

// TestMACPStartOnUnknownSession: the sidecar, fresh, in front of a runtime
// holding the planner's session: a stranger's SessionStart for it is refused
// on Send (by the runtime's own answer, which the commit waits for) and on a
// StreamSession (asked of the runtime first: an echo would commit it), and
// the planner's next message is decided on the runtime's session.
func TestMACPStartOnUnknownSession(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	sid := newSession()
	msgs := taskMessages(sid)
	direct.mustAccept(msgs[0])
	c := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	b, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"mallory", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
	evil := func(id string) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: rules.ModeTask, MessageType: "SessionStart", MessageId: id, SessionId: sid,
			Sender: "mallory", TimestampUnixMs: time.Now().UnixMilli(), Payload: b}
	}
	if ack := c.send(evil("evil-send")); ack.GetOk() {
		t.Errorf("a stranger's SessionStart on Send: accepted")
	}
	ctx, cancel := as("mallory")
	defer cancel()
	stream, err := macpv1.NewMACPRuntimeServiceClient(c.conn).StreamSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&macpv1.StreamSessionRequest{Envelope: evil("evil-stream")}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetError().GetCode() != string(rules.CodeSessionAlreadyExists) {
		t.Errorf("a stranger's SessionStart on a stream: %v %v, want SESSION_ALREADY_EXISTS", r, err)
	}
	c.mustAccept(msgs[1]) // the planner's TaskRequest
}
