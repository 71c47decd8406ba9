package test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
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
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "SessionStart", MessageId: id, SessionId: session,
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
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "SessionStart", MessageId: id, SessionId: sid,
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

// TestExtAuthzStartSuspendFlood: ext_authz commits a SessionStart and a
// SuspendSession on allow, whether or not the runtime takes them, and a
// suspended session's TTL is paused. One principal's sessions count against
// --extauthz-max-unconfirmed-starts until they end: start then suspend,
// repeated, is refused past the cap (before, the suspend confirmed the start
// and the principal could park sessions in the table without bound), whether
// the runtime took them (forwarded here) or not (checked only); a session
// cancelled makes room.
func TestExtAuthzStartSuspendFlood(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	c, _ := startExtAuthz(t, "warden", runtime, "--extauthz-max-unconfirmed-starts", "3")
	start := func(sid string) *macpv1.Envelope {
		b, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"mallory", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "SessionStart", MessageId: "start-" + sid[:8], SessionId: sid,
			Sender: "mallory", TimestampUnixMs: time.Now().UnixMilli(), Payload: b}
	}
	// control checks op on sid and, when allowed, forwards it as Envoy would.
	control := func(op, sid string, forward bool) string {
		got := c.call(macpService+op, "mallory", &macpv1.CancelSessionRequest{SessionId: sid})
		if got != "allow" || !forward {
			return got
		}
		ctx, cancel := as("mallory")
		defer cancel()
		rt := macpv1.NewMACPRuntimeServiceClient(direct.conn)
		var err error
		switch op {
		case "SuspendSession":
			_, err = rt.SuspendSession(ctx, &macpv1.SuspendSessionRequest{SessionId: sid})
		case "CancelSession":
			_, err = rt.CancelSession(ctx, &macpv1.CancelSessionRequest{SessionId: sid})
		}
		if err != nil {
			t.Fatalf("the runtime refused the %s Warden allowed: %v", op, err)
		}
		return got
	}
	taken, phantom, phantom2, over := newSession(), newSession(), newSession(), newSession()
	for _, tc := range []struct {
		name string
		do   func() string
		want string
	}{
		{"a start the runtime takes", func() string { return envoy(t, c, direct, start(taken)) }, "allow"},
		{"its suspension", func() string { return control("SuspendSession", taken, true) }, "allow"},
		{"a start the runtime never sees", func() string { return c.send(start(phantom)) }, "allow"},
		{"its suspension", func() string { return control("SuspendSession", phantom, false) }, "allow"},
		{"another unseen start", func() string { return c.send(start(phantom2)) }, "allow"},
		{"its suspension", func() string { return control("SuspendSession", phantom2, false) }, "allow"},
		{"one start past the cap", func() string { return c.send(start(over)) }, string(rules.CodeResourceExhausted)},
		{"the first cancelled", func() string { return control("CancelSession", taken, true) }, "allow"},
		{"the start again", func() string { return envoy(t, c, direct, start(over)) }, "allow"},
	} {
		if got := tc.do(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
