package test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

// TestMACPRebuildImplicitAccept (O1): under a policy with
// acceptance.implicit_accept_timeout_ms the real runtime writes the implicit
// HandoffAccept it synthesizes into the session's history, before the message
// that finds it due. A Warden rebuilding that session must replay it as the
// runtime's own entry, not refuse it as a client's forged implicit accept:
// before, the rebuild diverged and every later message of the session was
// refused, though the runtime accepts them. Every MACP door that rebuilds:
// the sidecar (on the product's relay and the grpc-go oracle) and ext_authz
// with --macp-upstream, each with its entry evicted by another agent's
// session from a table of one.
func TestMACPRebuildImplicitAccept(t *testing.T) {
	runtimeAddr := startRuntime(t)
	runtime := dialMACP(t, runtimeAddr)
	accepted := func(c macpClient) func(*macpv1.Envelope) (bool, string) {
		return func(env *macpv1.Envelope) (bool, string) {
			ack, err := c.sendOn(macpService+"Send", env)
			if err != nil {
				return false, err.Error()
			}
			return ack.GetOk(), ack.GetError().GetCode() + " " + ack.GetError().GetMessage()
		}
	}
	type door struct {
		setup, decide func(*macpv1.Envelope) (bool, string)
	}
	doors := map[string]func(t *testing.T) door{
		"runtime alone": func(*testing.T) door { return door{accepted(runtime), accepted(runtime)} },
		"sidecar": func(t *testing.T) door {
			w := dialMACP(t, startWarden(t, runtimeAddr, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1"))
			return door{accepted(w), accepted(w)}
		},
		"ext_authz": func(t *testing.T) door {
			c, _ := startExtAuthz(t, "warden-extauthz", runtimeAddr, "--sessions", "1")
			check := func(env *macpv1.Envelope) (bool, string) {
				got := c.send(env)
				return got == "allow", got
			}
			return door{func(env *macpv1.Envelope) (bool, string) { // Envoy forwards what Warden allows
				if ok, why := check(env); !ok {
					return ok, why
				}
				return accepted(runtime)(env)
			}, check}
		},
	}
	for _, name := range []string{"runtime alone", "sidecar", "ext_authz"} {
		run := func(t *testing.T) {
			d := doors[name](t)
			pol := "policy.handoff.implicit." + newSession()[:8]
			ctx, cancel := as("planner")
			defer cancel()
			resp, err := macpv1.NewMACPRuntimeServiceClient(runtime.conn).RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
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
			must := func(env *macpv1.Envelope) {
				t.Helper()
				if ok, why := d.setup(env); !ok {
					t.Fatalf("%s from %s: %s", env.GetMessageType(), env.GetSender(), why)
				}
			}
			must(handoff("planner", "SessionStart", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
				ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: pol}))
			must(handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "worker", Scope: "s"}))
			time.Sleep(600 * time.Millisecond) // past the implicit accept
			// the runtime synthesizes the accept into the history before this
			must(handoff("planner", "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain"}))
			// another agent's session takes the sidecar's one slot
			must(envelope("other", newSession(), "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"other", "x"},
				ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
			if ok, why := d.decide(handoff("planner", "Commitment", &macpv1.CommitmentPayload{CommitmentId: "c1",
				Action: "handoff.accepted", AuthorityScope: "test", Reason: "done", OutcomePositive: true, ModeVersion: "1.0.0",
				ConfigurationVersion: "c", PolicyVersion: pol})); !ok {
				t.Errorf("the owner's Commitment after the implicit accept: %s; the runtime accepts it", why)
			}
		}
		if name == "sidecar" {
			t.Run(name, func(t *testing.T) { eachTransport(t, run) })
			continue
		}
		t.Run(name, run)
	}
}
