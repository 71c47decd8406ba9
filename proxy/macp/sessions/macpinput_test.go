package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/macp_input.golden")

// macpStep is one envelope of a scripted session.
type macpStep struct {
	sender, typ string
	payload     []byte
}

func pb(t testing.TB, m proto.Message) []byte { return mustMarshal(t, m) }

// TestMACPInputGolden: the operator policy's input document for MACP
// messages of several modes, as the Decider builds it, against
// testdata/macp_input.golden (go test ./proxy/macp/sessions -run TestMACPInputGolden
// -update rewrites it). Each message is first sent with an id starting
// "probe-", which a policy refuses with json.marshal(input) as its message
// (so the state does not move), then as itself. On the old code the input
// has no macp and no time member.
func TestMACPInputGolden(t *testing.T) {
	ctx := context.Background()
	probe := writeRego(t, "probe.rego", `package warden.macp
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": json.marshal(input)} if startswith(input.message.id, "probe-")
`)
	eng, err := policies.New(ctx, policies.Config{Files: []string{probe}})
	if err != nil {
		t.Fatal(err)
	}
	e, c := newEnforcer(t, proxy.Config{}, nil)
	e.e.Swap(devAuth(t), eng)
	c.add(17 * time.Second) // input.time is the minute: 12:00:17 reads 12:00
	start := func(parts ...string) []byte {
		return pb(t, &macpv1.SessionStartPayload{Intent: "golden", Participants: parts, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	}
	alice, bob := "agent://alice", "agent://bob"
	sessions := []struct {
		mode  string
		steps []macpStep
	}{
		{macp.ModeDecision, []macpStep{
			{planner, macp.TypeSessionStart, start(planner, alice, bob)},
			{planner, "Proposal", pb(t, &decisionv1.ProposalPayload{ProposalId: "p1", Option: "ship it", SupportingData: []byte{0, 1, 0xfe}})},
			{alice, "Evaluation", pb(t, &decisionv1.EvaluationPayload{ProposalId: "p1", Recommendation: "approve", Confidence: 0.75})},
			{bob, "Objection", pb(t, &decisionv1.ObjectionPayload{ProposalId: "p1", Reason: "risky"})},
			{bob, "Vote", pb(t, &decisionv1.VotePayload{ProposalId: "p1", Vote: "reject", Reason: "too early"})},
			{planner, macp.TypeProgress, pb(t, &macpv1.ProgressPayload{ProgressToken: "x", Progress: 0.5})},
		}},
		{macp.ModeTask, []macpStep{
			{planner, macp.TypeSessionStart, start(planner, worker)},
			{planner, "TaskRequest", pb(t, &taskv1.TaskRequestPayload{TaskId: "t1", Title: "summarize", RequestedAssignee: worker, Input: []byte(`{"doc":1}`), DeadlineUnixMs: 1_795_000_000_000})},
			{worker, "TaskAccept", pb(t, &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: worker})},
			{worker, "TaskUpdate", pb(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Status: "running", Progress: 0.5, Message: "half way", PartialOutput: []byte("so far")})},
			{worker, "TaskComplete", pb(t, &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: worker, Output: []byte("done"), Summary: "ok"})},
			{planner, macp.TypeCommitment, pb(t, &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed", AuthorityScope: "s", Reason: "r",
				ModeVersion: "1.0.0", ConfigurationVersion: "c", OutcomePositive: true})},
		}},
		{macp.ModeQuorum, []macpStep{
			{planner, macp.TypeSessionStart, start(planner, alice, bob)},
			{planner, "ApprovalRequest", pb(t, &quorumv1.ApprovalRequestPayload{RequestId: "r1", Action: "deploy.staging", RequiredApprovals: 2})},
		}},
		{macp.ModeMultiRound, []macpStep{
			{planner, macp.TypeSessionStart, start(planner, alice, bob)},
			{alice, "Contribute", []byte(`{"valu\u0065":"blue"}`)}, // the legacy JSON reading: the value "blue"
		}},
	}
	var got bytes.Buffer
	for i, s := range sessions {
		sid := sessionID(700 + i)
		for j, st := range s.steps {
			send := func(id string) proxy.Decision {
				en := &macpv1.Envelope{MacpVersion: "1.0", Mode: s.mode, MessageType: st.typ, MessageId: id, SessionId: sid, Sender: st.sender,
					TimestampUnixMs: c.now().UnixMilli() - 1000, Payload: st.payload}
				d, err := e.Enforce(ctx, req(en))
				if err != nil {
					t.Fatal(err)
				}
				d.Settle(d.Allow)
				return d
			}
			id := st.typ + "-" + string(rune('a'+j))
			d := send("probe-" + id)
			if d.Allow {
				t.Fatalf("%s: the probe was allowed", id)
			}
			var doc any
			dec := json.NewDecoder(strings.NewReader(d.Message))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("%s: %v: %s", id, err, d.Message)
			}
			b, _ := json.MarshalIndent(doc, "", "  ")
			got.WriteString("# " + s.mode + " " + st.typ + "\n")
			got.Write(b)
			got.WriteString("\n")
			if d := send(id); !d.Allow {
				t.Fatalf("%s refused: %s %s", id, d.Reason, d.Message)
			}
		}
	}
	const golden = "testdata/macp_input.golden"
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the policy input differs from %s (-update rewrites it):\n%s", golden, got.String())
	}
}

// TestEnforceMACPPayloadPolicy decides votes and approval requests through
// the Decider with the example policies of deploy/policies (MACP votes
// only during business hours; only these payload field values) on a fake
// clock: a vote is refused by its payload (a REJECT without a reason,
// whatever its case) or by the time of day, Warden's, whatever the sender's
// timestamp says; a payload over the bound is refused when a policy reads
// it. On the old code the input has no payload and no time: the hours rule
// refuses every vote and the payload rule none.
func TestEnforceMACPPayloadPolicy(t *testing.T) {
	ctx := context.Background()
	eng, err := policies.New(ctx, policies.Config{Files: []string{"../../../deploy/policies/macp-votes-hours.rego", "../../../deploy/policies/macp-payload.rego"}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := eng.Memoized(); !ok {
		t.Fatalf("not memoized: %s", why)
	}
	e, c := newEnforcer(t, proxy.Config{}, nil)
	e.e.Swap(devAuth(t), eng)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	friday := func(h, m int) time.Time { return time.Date(2026, 11, 27, h, m, 0, 0, paris) }
	voters := []string{"agent://v0", "agent://v1", "agent://v2", "agent://v3", "agent://v4", "agent://v5", "agent://v6", "agent://v7", "agent://v8"}
	n := 800
	session := func(mode string) (string, func(sender, typ, id string, ts int64, payload []byte) proxy.Decision) {
		n++
		sid := sessionID(n)
		send := func(sender, typ, id string, ts int64, payload []byte) proxy.Decision {
			d, err := e.Enforce(ctx, req(&macpv1.Envelope{MacpVersion: "1.0", Mode: mode, MessageType: typ, MessageId: id, SessionId: sid,
				Sender: sender, TimestampUnixMs: ts, Payload: payload}))
			if err != nil {
				t.Fatal(err)
			}
			d.Settle(d.Allow)
			return d
		}
		parts := append([]string{planner}, voters...)
		if d := send(planner, macp.TypeSessionStart, "start", 0, pb(t, &macpv1.SessionStartPayload{Participants: parts, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 86_400_000})); !d.Allow {
			t.Fatalf("start: %s %s", d.Reason, d.Message)
		}
		return sid, send
	}
	set := func(at time.Time) { c.mu.Lock(); c.t = at; c.mu.Unlock() }
	hours := "votes are accepted 09:00-17:00 (Europe/Paris)"
	for i, tc := range []struct {
		name   string
		at     time.Time
		ts     time.Time // the envelope's timestamp, the sender's clock
		vote   *decisionv1.VotePayload
		refuse string // in the refusal's message; "" for allowed
	}{
		{"approve in hours", friday(10, 0), friday(10, 0), &decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE"}, ""},
		{"reject with a reason", friday(10, 5), friday(10, 5), &decisionv1.VotePayload{ProposalId: "p1", Vote: "REJECT", Reason: "cost"}, ""},
		{"reject without a reason", friday(10, 6), friday(10, 6), &decisionv1.VotePayload{ProposalId: "p1", Vote: "REJECT"}, "a REJECT vote must give a reason"},
		{"reject in lower case without a reason", friday(10, 7), friday(10, 7), &decisionv1.VotePayload{ProposalId: "p1", Vote: "reject", Reason: " "}, "a REJECT vote must give a reason"},
		{"approve after hours", friday(17, 0), friday(17, 0), &decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE"}, hours},
		{"approve after hours, backdated", friday(22, 0), friday(10, 0), &decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE"}, hours},
		{"approve on Saturday", friday(10, 0).AddDate(0, 0, 1), friday(10, 0).AddDate(0, 0, 1), &decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE"}, hours},
		{"abstain at opening", friday(9, 0).AddDate(0, 0, 3), friday(9, 0).AddDate(0, 0, 3), &decisionv1.VotePayload{ProposalId: "p1", Vote: "ABSTAIN"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set(tc.at)
			_, decide := session(macp.ModeDecision)
			if d := decide(planner, "Proposal", "p", 0, pb(t, &decisionv1.ProposalPayload{ProposalId: "p1", Option: "o"})); !d.Allow {
				t.Fatalf("proposal: %s %s", d.Reason, d.Message)
			}
			d := decide(voters[i], "Vote", "vote-"+tc.name, tc.ts.UnixMilli(), pb(t, tc.vote))
			if d.Allow != (tc.refuse == "") || !strings.Contains(d.Message, tc.refuse) {
				t.Fatalf("allow=%v %s %q, want refusal %q", d.Allow, d.Reason, d.Message, tc.refuse)
			}
			if tc.refuse != "" && (d.Reason != rules.ReasonOperatorPolicy || d.Code != rules.CodeForbidden) {
				t.Fatalf("refused with %s %s, want the operator's FORBIDDEN", d.Code, d.Reason)
			}
		})
	}

	// The approval request's action, and the bound on a payload a policy reads.
	set(friday(11, 0))
	for _, tc := range []struct {
		name   string
		req    *quorumv1.ApprovalRequestPayload
		code   rules.Code
		reason rules.Reason
	}{
		{"listed action", &quorumv1.ApprovalRequestPayload{RequestId: "r", Action: "deploy.staging", RequiredApprovals: 1}, "", ""},
		{"other action", &quorumv1.ApprovalRequestPayload{RequestId: "r", Action: "deploy.production", RequiredApprovals: 1}, rules.CodeForbidden, rules.ReasonOperatorPolicy},
		{"payload over the bound", &quorumv1.ApprovalRequestPayload{RequestId: "r", Action: "deploy.staging", RequiredApprovals: 1, Details: bytes.Repeat([]byte{'x'}, policies.MaxPayloadBytes)}, rules.CodePayloadTooLarge, rules.ReasonPayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, send := session(macp.ModeQuorum)
			d := send(planner, "ApprovalRequest", "ar", 0, pb(t, tc.req))
			if d.Allow != (tc.code == "") || d.Code != tc.code || !d.Allow && d.Reason != tc.reason {
				t.Fatalf("allow=%v %s %s %q, want %q %q", d.Allow, d.Code, d.Reason, d.Message, tc.code, tc.reason)
			}
		})
	}
}
