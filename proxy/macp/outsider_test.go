package macp

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestOutsiderSeesNoSession (issue 24 item 11): on every door, a caller
// who is neither the initiator nor a participant gets, for every Send and
// control call on an existing session, exactly the answer the same call
// gets for a session that does not exist (its id aside), and that answer
// is the runtime's own: SESSION_NOT_FOUND "UnknownSession" in a Send's
// Ack, NOT_FOUND "Session '<id>' not found" for a control call, no
// decision id. Nothing reaches the runtime. On the old code the outsider
// learned the session's existence (FORBIDDEN), its mode (mode mismatch), a
// used message id (DUPLICATE_MESSAGE) and its state (SESSION_NOT_OPEN).
func TestOutsiderSeesNoSession(t *testing.T) {
	start, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	hdr := unaryHeader
	body := func(m proto.Message) []byte { return unaryBody(t, m) }
	send := func(sid, who, mode, typ, id string, payload []byte) []byte {
		return body(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: mode, MessageType: typ,
			MessageId: id, SessionId: sid, Sender: who, TimestampUnixMs: time.Now().UnixMilli(), Payload: payload}})
	}
	const task = "macp.mode.task.v1"
	// probes are the outsider's calls, each made on a session id.
	probes := []struct {
		name, method string
		body         func(sid string) []byte
	}{
		{"TaskRequest", "Send", func(sid string) []byte { return send(sid, "mallory", task, "TaskRequest", "probe-1", []byte("{}")) }},
		{"a used message id", "Send", func(sid string) []byte { return send(sid, "mallory", task, "TaskRequest", "start-"+sid, []byte("{}")) }},
		{"another mode", "Send", func(sid string) []byte {
			return send(sid, "mallory", "macp.mode.decision.v1", "Proposal", "probe-2", []byte("{}"))
		}},
		{"Commitment", "Send", func(sid string) []byte { return send(sid, "mallory", task, macp.TypeCommitment, "probe-3", nil) }},
		{"Progress", "Send", func(sid string) []byte { return send(sid, "mallory", task, macp.TypeProgress, "probe-4", nil) }},
		{"CancelSession", "CancelSession", func(sid string) []byte { return body(&macpv1.CancelSessionRequest{SessionId: sid}) }},
		{"SuspendSession", "SuspendSession", func(sid string) []byte { return body(&macpv1.SuspendSessionRequest{SessionId: sid}) }},
		{"ResumeSession", "ResumeSession", func(sid string) []byte { return body(&macpv1.ResumeSessionRequest{SessionId: sid}) }},
	}
	for _, door := range doors {
		t.Run(door, func(t *testing.T) {
			runtime, up := startFakeRuntime(t)
			call := openDoor(t, door, devEnforcer(t), up, DefaultMaxMessageBytes)
			open, cancelled := sessionID(), sessionID()
			for _, sid := range []string{open, cancelled} {
				if a := call(t, hdr("Send", "planner"), send(sid, "planner", task, macp.TypeSessionStart, "start-"+sid, start)); a.Ack != "ok=true " {
					t.Fatalf("SessionStart: %+v", a)
				}
			}
			if a := call(t, hdr("CancelSession", "planner"), body(&macpv1.CancelSessionRequest{SessionId: cancelled})); a.GRPCStatus != "0" {
				t.Fatalf("CancelSession by the initiator: %+v", a)
			}
			before := runtime.forwarded()
			for _, p := range probes {
				unknown := sessionID()
				want := call(t, hdr(p.method, "mallory"), p.body(unknown))
				want.GRPCMessage = strings.ReplaceAll(want.GRPCMessage, unknown, "ID")
				if want.MACP != string(rules.CodeSessionNotFound) && want.Ack != "ok=false SESSION_NOT_FOUND" {
					t.Errorf("%s on an unknown session: %+v, want SESSION_NOT_FOUND", p.name, want)
				}
				if p.method == "Send" && door != "extauthz" && want.AckMessage != "UnknownSession" {
					t.Errorf("%s on an unknown session: Ack message %q, want the runtime's UnknownSession", p.name, want.AckMessage)
				}
				if p.method != "Send" && want.GRPCMessage != "Session 'ID' not found" {
					t.Errorf("%s on an unknown session: %q, want the runtime's Session '<id>' not found", p.name, want.GRPCMessage)
				}
				for _, sid := range []string{open, cancelled} {
					got := call(t, hdr(p.method, "mallory"), p.body(sid))
					got.GRPCMessage = strings.ReplaceAll(got.GRPCMessage, sid, "ID")
					if got != want {
						t.Errorf("%s on an existing session tells the outsider more:\n got  %+v\n want %+v", p.name, got, want)
					}
				}
			}
			if n := runtime.forwarded() - before; n != 0 {
				t.Errorf("%d outsider calls reached the runtime", n)
			}
		})
	}
}
