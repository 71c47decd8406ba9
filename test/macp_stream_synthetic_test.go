package test

import (
	"strconv"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

// TestMACPStreamSyntheticEcho: the runtime writes the implicit
// HandoffAccept it synthesizes (id implicit-accept:<handoff_id>, sent as
// the offer's target) into the session's history when the next message
// finds it due, before deciding that message, and publishes it to the
// session's streams. The target, on a StreamSession bound to the session,
// sends after the timeout a HandoffDecline of the offer under that very
// id: the runtime publishes its synthesized accept, then refuses the
// decline (a client's id in the reserved namespace; the offer accepted
// anyway). The sidecar settled a stream envelope on the first envelope the
// runtime sent with its session and id, so it took the synthesized accept
// for the echo of the decline and committed the offer as declined, though
// the runtime accepted it: the owner's positive Commitment, which the
// runtime accepts, was refused ("a positive commitment needs an accepted
// offer"), and a negative one contradicting the accepted offer would pass.
// Runs on the runtime alone and through bin/warden (both front doors).
func TestMACPStreamSyntheticEcho(t *testing.T) {
	const timeoutMs = 300
	runtimeAddr := startRuntime(t, "MACP_CLEANUP_INTERVAL_SECS=1", "MACP_MESSAGE_LIMIT_PER_MINUTE=10000000") // the sweep synthesizes the accept
	runtime := dialMACP(t, runtimeAddr)
	var attempt func(t *testing.T, c macpClient)
	run := func(t *testing.T, c macpClient) {
		for range 4 { // the sweep's accept lands while a decline is held about half the time
			attempt(t, c)
		}
	}
	attempt = func(t *testing.T, c macpClient) {
		pol := "policy.handoff.synthetic." + newSession()[:8]
		ctx, cancel := as("planner")
		defer cancel()
		resp, err := macpv1.NewMACPRuntimeServiceClient(runtime.conn).RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
			PolicyId: pol, Mode: handoffMode, Description: "test", SchemaVersion: 2,
			Rules: `{"acceptance":{"implicit_accept_timeout_ms":` + strconv.Itoa(timeoutMs) + `},"commitment":{"authority":"initiator_only"}}`}})
		if err != nil || !resp.GetOk() {
			t.Fatalf("register: %v %s", err, resp.GetError())
		}
		sid := newSession()
		handoff := func(sender, typ, id string, p *handoffv1.HandoffDeclinePayload) *macpv1.Envelope {
			env := envelope(sender, sid, typ, id, p)
			env.Mode = handoffMode
			return env
		}
		start := envelope("planner", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "first", "second"},
			ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: pol})
		start.Mode = handoffMode
		offer := envelope("planner", sid, "HandoffOffer", "", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "first", Scope: "s"})
		offer.Mode = handoffMode
		c.mustAccept(start)
		c.mustAccept(offer)

		stream, scancel := c.subscribed(t, "first", sid)
		defer scancel()
		for range 2 { // the history: SessionStart, HandoffOffer
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("replay: %v", err)
			}
		}
		// Declines sent one after another from the deadline on: each is
		// held while the runtime has it, and the sweep, every second,
		// publishes the synthesized accept while one is.
		decline := handoff("first", "HandoffDecline", macp.ImplicitAcceptPrefix+"h1", &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: "first"})
		time.Sleep(timeoutMs * time.Millisecond)
		synthesized := false
		for deadline := time.Now().Add(4 * time.Second); !synthesized && time.Now().Before(deadline); {
			if err := stream.Send(&macpv1.StreamSessionRequest{Envelope: decline}); err != nil {
				t.Fatal(err)
			}
			for answered := false; !answered && !synthesized; {
				r, err := stream.Recv()
				if err != nil {
					t.Fatalf("the stream ended: %v", err)
				}
				if e := r.GetError(); e != nil {
					answered = true
					continue
				}
				t.Logf("on the stream: %s %s from %s", r.GetEnvelope().GetMessageType(), r.GetEnvelope().GetMessageId(), r.GetEnvelope().GetSender())
				synthesized = r.GetEnvelope().GetMessageId() == decline.GetMessageId()
			}
		}
		scancel()
		if !synthesized {
			t.Fatal("the runtime did not synthesize the implicit accept within 4 s")
		}

		commit := envelope("planner", sid, "Commitment", "", &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "handoff.accepted",
			AuthorityScope: "test", Reason: "r", OutcomePositive: true, ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: pol})
		commit.Mode = handoffMode
		if ack := c.send(commit); !ack.GetOk() {
			t.Errorf("the owner's positive Commitment after the implicit accept: %s %s (the runtime accepted the offer)", ack.GetError().GetCode(), ack.GetError().GetMessage())
		}
	}
	t.Run("runtime alone", func(t *testing.T) { run(t, runtime) })
	t.Run("sidecar", func(t *testing.T) {
		eachTransport(t, func(t *testing.T) {
			run(t, dialMACP(t, startWarden(t, runtimeAddr, "--auth", "dev", "--insecure-dev-auth", "--macp-message-limit-per-minute", "10000000")))
		})
	})
}
