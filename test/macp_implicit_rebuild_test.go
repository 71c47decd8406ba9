package test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

// handoffDoor is one way a handoff session's messages reach the real
// runtime: alone, or through a MACP door that rebuilds. setup sends a
// message the scenario needs accepted; decide sends the one under test (at
// ext_authz, asks Check alone). pol is the run's own governance policy,
// setting acceptance.implicit_accept_timeout_ms; handoff makes an envelope
// of the run's own handoff session, whose participants are planner, first
// and second.
type handoffDoor struct {
	warden        bool // false: the runtime alone
	setup, decide func(*macpv1.Envelope) (bool, string)
	control       func(op, sid string) (bool, string) // the planner's SuspendSession or ResumeSession
	pol, sid      string
	handoff       func(sender, typ string, p proto.Message) *macpv1.Envelope
}

// mustControl has the planner call op (SuspendSession, ResumeSession) on
// the run's session and fails the test if it is refused.
func (d handoffDoor) mustControl(t *testing.T, op string) {
	t.Helper()
	if ok, why := d.control(op, d.sid); !ok {
		t.Fatalf("%s: %s", op, why)
	}
}

// must sends env at setup and fails the test if it is refused.
func (d handoffDoor) must(t *testing.T, env *macpv1.Envelope) {
	t.Helper()
	if ok, why := d.setup(env); !ok {
		t.Fatalf("%s from %s: %s", env.GetMessageType(), env.GetSender(), why)
	}
}

// start starts the run's session under its policy.
func (d handoffDoor) start(t *testing.T) {
	t.Helper()
	d.must(t, d.handoff("planner", "SessionStart", &macpv1.SessionStartPayload{Participants: []string{"planner", "first", "second"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: d.pol}))
}

// evict has another agent's session take the one slot of a Warden's table.
func (d handoffDoor) evict(t *testing.T) {
	t.Helper()
	d.must(t, envelope("other", newSession(), "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"other", "x"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
}

// commit is the run's session's Commitment c with its outcome.
func (d handoffDoor) commit(id string, positive bool) *macpv1.Envelope {
	return d.handoff("planner", "Commitment", &macpv1.CommitmentPayload{CommitmentId: id, Action: "handoff." + strconv.FormatBool(positive),
		AuthorityScope: "test", Reason: "r", OutcomePositive: positive, ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: d.pol})
}

// eachHandoffDoor runs test on the runtime alone and through every MACP
// door that rebuilds a session, each with a session table of one (--sessions
// 1) in front of the real runtime: the sidecar on the product's relay and
// on the grpc-go oracle, and ext_authz with --macp-upstream (Envoy forwards
// what it allows). timeoutMs is the implicit-accept timeout of each run's
// policy.
func eachHandoffDoor(t *testing.T, timeoutMs int, test func(t *testing.T, d handoffDoor)) {
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
	control := func(c macpClient) func(op, sid string) (bool, string) {
		return func(op, sid string) (bool, string) {
			ctx, cancel := as("planner")
			defer cancel()
			rt := macpv1.NewMACPRuntimeServiceClient(c.conn)
			var err error
			if op == "SuspendSession" {
				_, err = rt.SuspendSession(ctx, &macpv1.SuspendSessionRequest{SessionId: sid})
			} else {
				_, err = rt.ResumeSession(ctx, &macpv1.ResumeSessionRequest{SessionId: sid})
			}
			if err != nil {
				return false, err.Error()
			}
			return true, ""
		}
	}
	doors := map[string]func(t *testing.T) handoffDoor{
		"runtime alone": func(*testing.T) handoffDoor {
			return handoffDoor{setup: accepted(runtime), decide: accepted(runtime), control: control(runtime)}
		},
		"sidecar": func(t *testing.T) handoffDoor {
			w := dialMACP(t, startWarden(t, runtimeAddr, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1"))
			return handoffDoor{warden: true, setup: accepted(w), decide: accepted(w), control: control(w)}
		},
		"ext_authz": func(t *testing.T) handoffDoor {
			c, _ := startExtAuthz(t, "warden-extauthz", runtimeAddr, "--sessions", "1")
			check := func(env *macpv1.Envelope) (bool, string) {
				got := c.send(env)
				return got == "allow", got
			}
			return handoffDoor{warden: true, setup: func(env *macpv1.Envelope) (bool, string) {
				if ok, why := check(env); !ok {
					return ok, why
				}
				return accepted(runtime)(env)
			}, decide: check, control: func(op, sid string) (bool, string) {
				var req proto.Message = &macpv1.SuspendSessionRequest{SessionId: sid}
				if op != "SuspendSession" {
					req = &macpv1.ResumeSessionRequest{SessionId: sid}
				}
				if got := c.call(macpService+op, "planner", req); got != "allow" {
					return false, got
				}
				return control(runtime)(op, sid)
			}}
		},
	}
	for _, name := range []string{"runtime alone", "sidecar", "ext_authz"} {
		run := func(t *testing.T) {
			d := doors[name](t)
			d.pol = "policy.handoff.implicit." + newSession()[:8]
			ctx, cancel := as("planner")
			defer cancel()
			resp, err := macpv1.NewMACPRuntimeServiceClient(runtime.conn).RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
				PolicyId: d.pol, Mode: handoffMode, Description: "test", SchemaVersion: 2,
				Rules: `{"acceptance":{"implicit_accept_timeout_ms":` + strconv.Itoa(timeoutMs) + `},"commitment":{"authority":"initiator_only"}}`}})
			if err != nil || !resp.GetOk() {
				t.Fatalf("register: %v %s", err, resp.GetError())
			}
			d.sid = newSession()
			d.handoff = func(sender, typ string, p proto.Message) *macpv1.Envelope {
				env := envelope(sender, d.sid, typ, "", p)
				env.Mode = handoffMode
				return env
			}
			test(t, d)
		}
		if name == "sidecar" {
			t.Run(name, func(t *testing.T) { eachTransport(t, run) })
			continue
		}
		t.Run(name, run)
	}
}

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
	eachHandoffDoor(t, 300, func(t *testing.T, d handoffDoor) {
		d.start(t)
		d.must(t, d.handoff("planner", "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "first", Scope: "s"}))
		time.Sleep(600 * time.Millisecond) // past the implicit accept
		// the runtime synthesizes the accept into the history before this
		d.must(t, d.handoff("planner", "HandoffContext", &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain"}))
		d.evict(t)
		if ok, why := d.decide(d.commit("c1", true)); !ok {
			t.Errorf("the owner's Commitment after the implicit accept: %s; the runtime accepts it", why)
		}
	})
}
