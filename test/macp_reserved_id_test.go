package test

import (
	"strconv"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
	"google.golang.org/protobuf/proto"
)

// TestMACPReservedMessageIDs: macp-runtime 0.13.0 reserves the message ids
// beginning implicit-accept: in handoff sessions (RFC-MACP-0010 §5.1(3);
// macp-modes' HandoffMode.validate_client_envelope, from semantics revision
// 2, every session it starts being at revision 4): a client's envelope of
// any type under such an id is INVALID_ENVELOPE, after the sender's coarse
// authorization and before the mode reads the payload (SessionStart after
// its payload checks); a Progress (the runtime's signal path), another
// case (Implicit-Accept:) and another mode's session are not reserved. Each
// row runs on the runtime alone and through every door, the sidecar relay
// (and the grpc-go oracle) and ext_authz (Check, then forwarded as Envoy
// would when allowed), and must be answered alike; ext_authz commits what
// it allows, so an allow the runtime then refuses is a failure of its own.
// The last rows are what such an allow did to ext_authz's state: the
// offer's target declines under implicit-accept:h1, which ext_authz allowed
// and committed as declined while the runtime refused it and, past the
// policy's implicit_accept_timeout_ms, accepted the offer implicitly; the
// owner's positive Commitment, which the runtime accepts, was then refused,
// and a negative one, which Warden refuses after an accepted offer, passed.
func TestMACPReservedMessageIDs(t *testing.T) {
	const timeoutMs = 300
	runtimeAddr := startRuntime(t, "MACP_MESSAGE_LIMIT_PER_MINUTE=10000000")
	runtime := dialMACP(t, runtimeAddr)
	pol := "policy.handoff.reserved." + newSession()[:8]
	{
		ctx, cancel := as("planner")
		resp, err := macpv1.NewMACPRuntimeServiceClient(runtime.conn).RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
			PolicyId: pol, Mode: handoffMode, Description: "test", SchemaVersion: 2,
			Rules: `{"acceptance":{"implicit_accept_timeout_ms":` + strconv.Itoa(timeoutMs) + `},"commitment":{"authority":"initiator_only"}}`}})
		cancel()
		if err != nil || !resp.GetOk() {
			t.Fatalf("register: %v %s", err, resp.GetError())
		}
	}
	reserved := func(s string) string { return macp.ImplicitAcceptPrefix + s }
	type msg struct {
		sender, typ, id string
		payload         proto.Message
	}
	start := func(mode, id, policy string) msg {
		return msg{"planner", "SessionStart", id, &macpv1.SessionStartPayload{Participants: []string{"planner", "first", "second"},
			ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: policy}}
	}
	offer := func(id string) msg {
		return msg{"planner", "HandoffOffer", id, &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "first", Scope: "s"}}
	}
	decline := func(id string) msg {
		return msg{"first", "HandoffDecline", id, &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: "first"}}
	}
	commitment := func(id string, positive bool) msg {
		action := "handoff.accepted"
		if !positive {
			action = "handoff.declined"
		}
		return msg{"planner", "Commitment", id, &macpv1.CommitmentPayload{CommitmentId: "c1", Action: action, AuthorityScope: "test", Reason: "r",
			OutcomePositive: positive, ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: pol}}
	}
	wait := msg{typ: "wait"} // the implicit accept's timeout runs out
	type row struct {
		name  string
		mode  string
		steps []msg  // the last one's answer is the row's
		want  string // "ok" or the MACP error code
	}
	handoffStart := start(handoffMode, "", "")
	rows := []row{
		{"a decline under the reserved id", handoffMode, []msg{handoffStart, offer(""), decline(reserved("h1"))}, "INVALID_ENVELOPE"},
		{"an explicit accept under the reserved id", handoffMode, []msg{handoffStart, offer(""),
			{"first", "HandoffAccept", reserved("h1"), &handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: "first"}}}, "INVALID_ENVELOPE"},
		{"an offer under the reserved id", handoffMode, []msg{handoffStart, offer(reserved("h1"))}, "INVALID_ENVELOPE"},
		{"context under a reserved id", handoffMode, []msg{handoffStart, offer(""),
			{"planner", "HandoffContext", reserved("x"), &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain", Context: []byte("c")}}}, "INVALID_ENVELOPE"},
		{"a commitment under a reserved id", handoffMode, []msg{start(handoffMode, "", pol), offer(""), decline(""), commitment(reserved("c1"), false)}, "INVALID_ENVELOPE"},
		{"a SessionStart under a reserved id", handoffMode, []msg{start(handoffMode, reserved("s"), "")}, "INVALID_ENVELOPE"},
		{"a Progress under a reserved id", handoffMode, []msg{handoffStart, {"planner", "Progress", reserved("p"), nil}}, "ok"},
		{"a decline under the reserved id in another case", handoffMode, []msg{handoffStart, offer(""), decline("Implicit-Accept:h1")}, "ok"},
		{"a task session's SessionStart under the prefix", taskMode, []msg{start(taskMode, reserved("s"), "")}, "ok"},
		{"a task session's TaskRequest under the prefix", taskMode, []msg{start(taskMode, "", ""),
			{"planner", "TaskRequest", reserved("t"), &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "first"}}}, "ok"},
		{"the owner's positive Commitment after the offer was accepted implicitly", handoffMode, []msg{start(handoffMode, "", pol), offer(""),
			decline(reserved("h1")), wait, commitment("", true)}, "ok"},
		{"the owner's negative Commitment after the offer was accepted implicitly", handoffMode, []msg{start(handoffMode, "", pol), offer(""),
			decline(reserved("h1")), wait, commitment("", false)}, "POLICY_DENIED"},
	}
	run := func(t *testing.T, through macpDoor, alone bool) {
		for _, tc := range rows {
			t.Run(tc.name, func(t *testing.T) {
				sid := newSession()
				got := ""
				for i, m := range tc.steps {
					if m.typ == "wait" {
						time.Sleep(timeoutMs * time.Millisecond)
						continue
					}
					env := envelope(m.sender, sid, m.typ, m.id, m.payload)
					env.Mode = tc.mode
					got = through(t, env)
					if i < len(tc.steps)-1 && got != "ok" && m.id == "" {
						t.Fatalf("honest %s from %s: %s", m.typ, m.sender, got)
					}
				}
				want := tc.want
				if alone && tc.name == "the owner's negative Commitment after the offer was accepted implicitly" {
					want = "ok" // the rule is Warden's (the runtime leaves it open)
				}
				if got != want {
					t.Errorf("%s, want %s", got, want)
				}
			})
		}
	}
	eachMACPDoor(t, runtimeAddr, runtime, run, "--macp-message-limit-per-minute", "10000000") // the runtime's, raised
}

// macpDoor sends env through a MACP door and returns its answer: "ok" or
// the MACP error code.
type macpDoor func(t *testing.T, env *macpv1.Envelope) string

// eachMACPDoor runs test against the runtime alone (alone true) and through
// every door before it: the sidecar (the relay, and the grpc-go oracle) and
// ext_authz, whose allow is forwarded as Envoy would forward it. ext_authz
// commits what it allows, so an allow the runtime then refuses is answered
// as a failure of its own. args are Warden's own, for every door.
func eachMACPDoor(t *testing.T, runtimeAddr string, runtime macpClient, test func(t *testing.T, through macpDoor, alone bool), args ...string) {
	ack := func(a *macpv1.Ack) string {
		if a.GetOk() {
			return "ok"
		}
		return a.GetError().GetCode()
	}
	t.Run("runtime alone", func(t *testing.T) {
		test(t, func(t *testing.T, env *macpv1.Envelope) string { return ack(runtime.send(env)) }, true)
	})
	t.Run("sidecar", func(t *testing.T) {
		eachTransport(t, func(t *testing.T) {
			c := dialMACP(t, startWarden(t, runtimeAddr, append([]string{"--auth", "dev", "--insecure-dev-auth"}, args...)...))
			test(t, func(t *testing.T, env *macpv1.Envelope) string { return ack(c.send(env)) }, false)
		})
	})
	t.Run("ext_authz", func(t *testing.T) {
		c, _ := startExtAuthz(t, "warden", runtimeAddr, args...)
		test(t, func(t *testing.T, env *macpv1.Envelope) string {
			got := c.send(env)
			if got != "allow" {
				return got
			}
			a := ack(runtime.send(env)) // forwarded, as Envoy would
			if a != "ok" {
				return "allowed and committed, refused by the runtime " + a
			}
			return a
		}, false)
	})
}
