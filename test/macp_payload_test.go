package test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
)

// TestMACPContributeReadings: Contribute payloads with two readings (valid
// JSON and valid protobuf, or JSON that Go's encoding/json and the runtime's
// serde_json read differently) are read by Warden as the real runtime reads
// them. For each payload, in a fresh ext.multi_round.v1 session, alice
// contributes the value the runtime should read (a payload with one
// reading), bob the payload, and the
// initiator commits: directly to the runtime and through Warden, every step
// must get the same answer. Before, Warden read the canonical protobuf
// payloads of lengths 13, 32 and 123 as their JSON, and lone surrogates,
// invalid UTF-8, deep nesting and a one-element array otherwise than the
// runtime: it believed a session converged that had not, or refused what
// would converge it.
func TestMACPContributeReadings(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth")
	canonical := func(v string) string {
		b, err := proto.Marshal(&multiroundv1.ContributePayload{Value: v})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// alice's payload has one reading: protobuf whose length is not minimal
	// (so not canonical, and not UTF-8, so not JSON), which both decoders
	// accept.
	unambiguous := func(v string) []byte {
		return append([]byte{0x0a, byte(len(v)) | 0x80, byte(len(v) >> 7)}, v...)
	}
	v32 := `{"value":"` + strings.Repeat("b", 20) + `"}`
	v123 := `"value":"` + strings.Repeat("c", 112) + `"}`
	for _, tc := range []struct {
		name, payload, value string // value: what alice contributes, the runtime's reading of payload
	}{
		{"canonical protobuf that is JSON too, length 13", canonical(`{"value":"x"}`), `{"value":"x"}`},
		{"canonical protobuf that is JSON too, length 32", canonical(v32), v32},
		{"canonical protobuf that is JSON too, length 123", canonical(v123), v123},
		{"a lone surrogate in the value", `{"value":"\ud800"}`, "\ufffd"},
		{"invalid UTF-8 in the value", "{\"value\":\"\xff\"}", "\ufffd"},
		{"an array of one string", `["x"]`, "x"},
		{"nesting past encoding/json's limit", `{"value":"a","x":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`, "a"},
		{"a lone surrogate in a skipped value", `{"value":"a","x":"\udc00"}`, "a"},
		{"an escaped key", `{"valu\u0065":"k"}`, "k"},
		{"legacy JSON", `{"value":"x"}`, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answers [2][]string
			for i, target := range []string{direct, warden} {
				c := dialMACP(t, target)
				sid := newSession()
				mr := func(who, typ string, payload []byte) string {
					env := envelope(who, sid, typ, "", nil)
					env.Mode, env.Payload = "ext.multi_round.v1", payload
					ack, err := c.sendOn(macpService+"Send", env)
					if err != nil {
						return "error " + err.Error()
					}
					if ack.GetOk() {
						return "ok"
					}
					return ack.GetError().GetCode()
				}
				c.mustAccept(func() *macpv1.Envelope {
					env := envelope("coord", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"alice", "bob"},
						ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
					env.Mode = "ext.multi_round.v1"
					return env
				}())
				commit, err := proto.Marshal(&macpv1.CommitmentPayload{CommitmentId: "c1", Action: "multi_round.converged", AuthorityScope: "test",
					Reason: "converged", OutcomePositive: true, ModeVersion: "1.0.0", ConfigurationVersion: "c"})
				if err != nil {
					t.Fatal(err)
				}
				answers[i] = []string{
					mr("alice", "Contribute", unambiguous(tc.value)),
					mr("bob", "Contribute", []byte(tc.payload)),
					mr("coord", "Commitment", commit),
				}
			}
			if strings.Join(answers[0], " ") != strings.Join(answers[1], " ") {
				t.Errorf("alice's contribution, bob's, the Commitment: the runtime answers %q, Warden %q", answers[0], answers[1])
			}
			t.Logf("the runtime: %q", answers[0])
		})
	}
}

// TestMACPPolicyRulesReadings: a registered policy's rules JSON, which Go's
// encoding/json reads otherwise than the runtime's serde_json, is read by
// Warden (macp.DescriptorOf) as the real runtime binds it: registered
// directly with the runtime, the rules it shows back (GetPolicy) are the
// ones Warden reads from the registration.
func TestMACPPolicyRulesReadings(t *testing.T) {
	c := dialMACP(t, startRuntime(t))
	client := macpv1.NewMACPRuntimeServiceClient(c.conn)
	const anyone = `"commitment":{"authority":"any_participant"}`
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for i, rules := range []string{
		`{` + anyone + `,"_x":"\ud800"}`,
		`{` + anyone + `,"_x":` + nest(127) + `}`,
		`{` + anyone + `,"_x":` + nest(126) + `}`,
		`{` + anyone + `,"_x":1e400}`,
		`{authority: any}`,
		``,
		`{` + anyone + `,"_x":"\ud83d\ude00"}`,
	} {
		pd := &macpv1.PolicyDescriptor{PolicyId: "policy.r" + string(rune('a'+i)), Mode: taskMode, Description: "t", Rules: rules, SchemaVersion: 1}
		ctx, cancel := as("admin")
		reg, err := client.RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: pd})
		if err != nil || !reg.GetOk() {
			cancel()
			t.Errorf("rules %.40q: the runtime refused the registration: %v %s", rules, err, reg.GetError())
			continue
		}
		got, err := client.GetPolicy(ctx, &macpv1.GetPolicyRequest{PolicyId: pd.GetPolicyId()})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		runtime, err := macp.DescriptorOf(got.GetPolicyDescriptor()) // the runtime's own JSON: one reading
		if err != nil {
			t.Fatal(err)
		}
		warden, err := macp.DescriptorOf(pd)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := fmt.Sprint(runtime.Rules["commitment"]), fmt.Sprint(warden.Rules["commitment"]); a != b {
			t.Errorf("rules %.40q: the runtime bound commitment %s, Warden reads %s", rules, a, b)
		}
	}
}
