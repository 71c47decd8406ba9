package test

import (
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestMACPRebuildImplicitAccept: under a policy with
// acceptance.implicit_accept_timeout_ms, the real runtime writes the implicit
// HandoffAccept it synthesizes into the session's history (before the message
// that finds it due). A Warden rebuilding that session (its entry evicted by
// another agent's session, or a restart) must replay it, not take it for a
// client's forged implicit accept: before, the rebuild diverged and every
// later message of the session was refused, though the runtime accepts them.
func TestMACPRebuildImplicitAccept(t *testing.T) {
	direct := startRuntime(t)
	addr := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1")
	for _, door := range []struct {
		name string
		c    macpClient
	}{{"runtime alone", dialMACP(t, direct)}, {"through Warden", dialMACP(t, addr)}} {
		t.Run(door.name, func(t *testing.T) {
			c := door.c
			pol := "policy.handoff.implicit." + newSession()[:8]
			ctx, cancel := as("planner")
			defer cancel()
			resp, err := macpv1.NewMACPRuntimeServiceClient(c.conn).RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
				PolicyId: pol, Mode: handoffMode, Description: "test", SchemaVersion: 2,
				Rules: `{"acceptance":{"implicit_accept_timeout_ms":300},"commitment":{"authority":"initiator_only"}}`}})
			if err != nil || !resp.GetOk() {
				t.Fatalf("register: %v %s", err, resp.GetError())
			}
			sid := newSession()
			handoff := func(sender, typ string, p interface{ ProtoReflect() protoreflect.Message }) *macpv1.Envelope {
				env := envelope(sender, sid, typ, "", p)
				env.Mode = handoffMode
				return env
			}
			c.mustAccept(handoff("planner", "SessionStart", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
				ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: pol}))
			c.mustAccept(handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "worker", Scope: "s"}))
			time.Sleep(600 * time.Millisecond) // past the implicit accept
			c.mustAccept(handoff("planner", "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain"}))
			// another agent's session takes the one slot: the handoff is rebuilt
			c.mustAccept(envelope("other", newSession(), "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"other", "x"},
				ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
			ack, err := c.sendOn(macpService+"Send", handoff("planner", "Commitment", &macpv1.CommitmentPayload{CommitmentId: "c1",
				Action: "handoff.accepted", AuthorityScope: "test", Reason: "done", OutcomePositive: true, ModeVersion: "1.0.0",
				ConfigurationVersion: "c", PolicyVersion: pol}))
			if err != nil || !ack.GetOk() {
				t.Errorf("the owner's Commitment after the implicit accept: %v %s %s; want accepted", err, ack.GetError().GetCode(), ack.GetError().GetMessage())
			}
		})
	}
}
