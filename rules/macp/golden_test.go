package macp

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenScenarios are multi-message transcripts across the modes. Each is
// replayed through Start and Step; a message is committed when the rules
// allow it and the fake authority matrix (see authority) lets its sender send
// it, as the Enforcer would commit it. The transcript is compared with
// testdata/<name>.golden.
var goldenScenarios = []struct {
	name string
	su   setup
	msgs []msg
}{
	{"task_happy_path", setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob"}}, []msg{
		{from: "lead", typ: "TaskRequest", body: taskRequest("t1", "alice")},
		{from: "alice", typ: "TaskAccept", body: taskAccept("t1", "alice")},
		{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1")},
		{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "alice", "report.pdf")},
		{from: "alice", typ: "TaskComplete", id: "m-3", body: taskComplete("t1", "alice", "report.pdf")},
		{from: "lead", typ: TypeCommitment, body: commit("task.completed", true)},
	}},
	{"task_reassignment", *withPolicy(setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob", "carol"}},
		"policy.task.reassign", `{"assignment":{"allow_reassignment_on_reject":true}}`), []msg{
		{from: "lead", typ: "TaskRequest", body: taskRequest("t1", "")},
		{from: "carol", typ: "TaskReject", body: taskReject("t1", "")},
		{from: "alice", typ: "TaskAccept", body: taskAccept("t1", "")},
		{from: "bob", typ: "TaskAccept", body: taskAccept("t1", "")},
		{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1")},
		{from: "alice", typ: "TaskReject", body: taskReject("t1", "alice")},
		{from: "alice", typ: "TaskUpdate", body: taskUpdate("t1")},
		{from: "bob", typ: "TaskAccept", body: taskAccept("t1", "bob")},
		{from: "bob", typ: "TaskComplete", body: taskComplete("t1", "", "")},
		{from: "lead", typ: TypeCommitment, body: commit("task.completed", true)},
	}},
	{"task_forged_reports", setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob"}}, []msg{
		{from: "lead", typ: "TaskRequest", body: taskRequest("t1", "alice")},
		{from: "bob", typ: "TaskAccept", body: taskAccept("t1", "")},
		{from: "lead", typ: TypeCommitment, body: commit("task.completed", true)},
		{from: "alice", typ: "TaskAccept", body: taskAccept("t1", "")},
		{from: "bob", typ: "TaskComplete", body: taskComplete("t1", "alice", "forged")},
		{from: "bob", typ: "TaskComplete", body: taskComplete("t1", "bob", "forged")},
		{from: "alice", typ: "TaskFail", body: taskFail("t1", "alice")},
		{from: "alice", typ: "TaskComplete", body: taskComplete("t1", "alice", "late")},
		{from: "lead", typ: TypeCommitment, body: commit("task.failed", false)},
	}},
	{"handoff_decline_reoffer", setup{mode: ModeHandoff, initiator: "lead", participants: []string{"lead", "alice", "bob"}}, []msg{
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h1", "alice")},
		{from: "lead", typ: "HandoffContext", body: handoffContext("h1")},
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob")},
		{from: "alice", typ: "HandoffDecline", body: handoffDecline("h1", "alice")},
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "alice")},
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h2", "bob")},
		{from: "alice", typ: "HandoffAccept", body: handoffAccept("h2", "")},
		{from: "bob", typ: "HandoffAccept", body: handoffAccept("h2", "alice")},
		{from: "bob", typ: "HandoffAccept", body: handoffAccept("h2", "bob")},
		{from: "lead", typ: "HandoffContext", body: handoffContext("h2")},
		{from: "lead", typ: "HandoffOffer", body: handoffOffer("h3", "alice")},
		{from: "lead", typ: TypeCommitment, body: commit("handoff.accepted", true)},
	}},
	{"handoff_implicit_accept", *withPolicy(setup{mode: ModeHandoff, initiator: "lead", participants: []string{"lead", "alice"}},
		"policy.handoff.implicit", `{"acceptance":{"implicit_accept_timeout_ms":5000}}`), []msg{
		{from: "lead", typ: "HandoffOffer", at: 1_000, body: handoffOffer("h1", "alice")},
		{from: "alice", typ: "HandoffAccept", at: 2_000, body: &handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: "alice", Implicit: true}},
		{from: "lead", typ: TypeCommitment, at: 3_000, body: commit("handoff.accepted", true)},
		{from: "lead", typ: TypeCommitment, at: 6_000, body: commit("handoff.accepted", true)},
	}},
	{"decision_deliberation", setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice", "bob", "carol"}}, []msg{
		{from: "alice", typ: "Vote", body: decVote("p1", "APPROVE")},
		{from: "alice", typ: "Proposal", body: decProposal("p1", "deploy")},
		{from: "bob", typ: "Proposal", body: decProposal("p2", "wait")},
		{from: "carol", typ: "Proposal", body: decProposal("p1", "again")},
		{from: "bob", typ: "Evaluation", body: decEval("p1", "APPROVE", 0.8)},
		{from: "carol", typ: "Evaluation", body: decEval("p2", "BLOCK", 1.5)},
		{from: "carol", typ: "Objection", body: decObjection("p1", "high")},
		{from: "mallory", typ: "Objection", body: decObjection("p1", "critical")},
		{from: "alice", typ: "Vote", body: decVote("p1", "APPROVE")},
		{from: "bob", typ: "Vote", body: decVote("p1", "reject")},
		{from: "bob", typ: "Vote", body: decVote("p1", "APPROVE")},
		{from: "bob", typ: "Vote", body: decVote("p2", "ABSTAIN")},
		{from: "carol", typ: "Evaluation", body: decEval("p1", "APPROVE", 0.9)},
		{from: "carol", typ: "Proposal", body: decProposal("p3", "late")},
		{from: "carol", typ: "Vote", body: decVote("p1", "APPROVE")},
		{from: "alice", typ: TypeCommitment, body: commit("decision.selected", true)},
		{from: "lead", typ: TypeCommitment, body: commit("decision.selected", true)},
	}},
	{"proposal_negotiation", setup{mode: ModeProposal, initiator: "buyer", participants: []string{"buyer", "seller"}}, []msg{
		{from: "buyer", typ: "Proposal", body: propose("p1")},
		{from: "seller", typ: "CounterProposal", body: counter("p2", "p1")},
		{from: "buyer", typ: "CounterProposal", body: counter("p3", "p9")},
		{from: "buyer", typ: "Accept", body: propAccept("p1")},
		{from: "seller", typ: "Accept", body: propAccept("p2")},
		{from: "buyer", typ: TypeCommitment, body: commit("proposal.accepted", true)},
		{from: "buyer", typ: "Withdraw", body: withdraw("p2")},
		{from: "seller", typ: "Reject", body: propReject("p1", false)},
		{from: "buyer", typ: "Accept", body: propAccept("p2")},
		{from: "buyer", typ: TypeCommitment, body: commit("proposal.accepted", true)},
	}},
	{"proposal_terminal_reject_withdrawn", setup{mode: ModeProposal, initiator: "buyer", participants: []string{"buyer", "seller", "broker"}}, []msg{
		{from: "buyer", typ: "Proposal", body: propose("p1")},
		{from: "seller", typ: "Proposal", body: propose("p2")},
		{from: "broker", typ: "Accept", body: propAccept("p1")},
		{from: "seller", typ: "Reject", body: propReject("p1", true)},
		{from: "buyer", typ: "Withdraw", body: withdraw("p1")},
		{from: "broker", typ: "Accept", body: propAccept("p1")},
		{from: "buyer", typ: TypeCommitment, body: commit("proposal.rejected", false)},
		{from: "buyer", typ: "Accept", body: propAccept("p2")},
		{from: "seller", typ: "Accept", body: propAccept("p2")},
		{from: "broker", typ: "Accept", body: propAccept("p2")},
		{from: "buyer", typ: TypeCommitment, body: commit("proposal.accepted", true)},
	}},
	{"quorum_ballots", setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice", "bob", "carol"}}, []msg{
		castBallot("Approve", "alice", "r1", expect{}),
		{from: "alice", typ: "ApprovalRequest", body: approvalRequest("r1", 2)},
		{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r1", 4)},
		{from: "lead", typ: "ApprovalRequest", body: approvalRequest("r1", 2)},
		castBallot("Approve", "alice", "r1", expect{}),
		castBallot("Reject", "alice", "r1", expect{}),
		castBallot("Abstain", "bob", "r2", expect{}),
		castBallot("Abstain", "bob", "r1", expect{}),
		castBallot("Approve", "mallory", "r1", expect{}),
		castBallot("Approve", "lead", "r1", expect{}),
		castBallot("Reject", "carol", "r1", expect{}),
		{from: "lead", typ: TypeCommitment, body: commit("quorum.rejected", false)},
	}},
	{"multi_round_convergence", setup{mode: ModeMultiRound, initiator: "coord", participants: []string{"coord", "alice", "bob"}}, []msg{
		contribute("alice", "option_a", expect{}),
		contributeRaw("bob", `{"value":"option_b"}`, expect{}),
		contribute("alice", "option_a", expect{}),
		{from: "coord", typ: TypeCommitment, body: commit("multi_round.converged", true)},
		contributeRaw("bob", "", expect{}),
		contribute("mallory", "option_a", expect{}),
		contribute("coord", "option_a", expect{}),
		contributeRaw("bob", `{"value":"option_a"}`, expect{}),
		contribute("alice", "option_b", expect{}),
		{from: "alice", typ: TypeCommitment, body: commit("multi_round.converged", true)},
		{from: "coord", typ: TypeCommitment, body: commit("multi_round.converged", true)},
	}},
	{"lifecycle_duplicates", setup{mode: ModeDecision, initiator: "lead", participants: []string{"lead", "alice", "bob"}}, []msg{
		{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy")},
		{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy")},
		{from: "bob", typ: "Vote", id: "x-1", body: decVote("p1", "APPROVE")},
		{from: "bob", typ: "Vote", id: "x-2", mode: ModeQuorum, body: decVote("p1", "APPROVE")},
		{from: "bob", typ: "Vote", id: "x-2", body: decVote("p1", "MAYBE")},
		{from: "bob", typ: "Vote", id: "x-2", body: decVote("p1", "APPROVE")},
		{from: "lead", typ: TypeSessionStart, id: "m-start", body: startPayload("lead", "alice", "bob")},
		{from: "alice", typ: TypeSessionStart, id: "m-start", body: startPayload("lead", "alice", "bob")},
		{from: "lead", typ: TypeCommitment, id: "x-3", body: commit("decision.selected", true)},
		{from: "alice", typ: "Proposal", id: "x-1", body: decProposal("p1", "deploy")},
		{from: "lead", typ: TypeCommitment, id: "x-3", body: commit("decision.selected", true)},
		{from: "lead", typ: TypeCommitment, id: "x-4", body: commit("decision.selected", true)},
	}},
	{"lifecycle_ttl", setup{mode: ModeQuorum, initiator: "lead", participants: []string{"alice", "bob"}, ttl: 10_000}, []msg{
		{from: "lead", typ: "ApprovalRequest", at: 1, body: approvalRequest("r1", 1)},
		castBallot("Approve", "alice", "r1", expect{}),
		{from: "bob", typ: "Approve", at: 10_000, body: castBallot("Approve", "bob", "r1", expect{}).body},
		{from: "lead", typ: TypeCommitment, at: 10_001, body: commit("quorum.approved", true)},
		{from: "bob", typ: "Approve", at: 10_002, id: "m-2", body: castBallot("Approve", "bob", "r1", expect{}).body},
	}},
}

func TestGolden(t *testing.T) {
	for _, sc := range goldenScenarios {
		t.Run(sc.name, func(t *testing.T) {
			checkGolden(t, filepath.Join("testdata", sc.name+".golden"), transcript(t, sc.su, sc.msgs))
		})
	}
}

// checkGolden compares got with file, or rewrites file under -update.
func checkGolden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./rules -update)", err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\ngot  %s\nwant %s\n(run go test ./rules -update to accept)", file, i+1, g, w)
		}
	}
}

// transcript replays a scenario and renders, per message, the index, sender,
// type, code, reason, rank and roles (plus whether the fake authority refuses
// it, its facts and its time when set), then the final state.
func transcript(t *testing.T, su setup, msgs []msg) string {
	t.Helper()
	var b strings.Builder
	policy := DefaultPolicyID
	if su.policy != nil {
		policy = su.policy.PolicyID + " " + string(mustJSON(t, su.policy.Rules))
	}
	life := su.ttl
	if life == 0 {
		life = ttl
	}
	fmt.Fprintf(&b, "# mode %s initiator %s participants %s ttl %d policy %s\n",
		su.mode, su.initiator, strings.Join(su.participants, ","), life, policy)
	b.WriteString("# index sender type code reason rank roles [id=, unless m-<index-1>] [at=+ms] [policy=deny: the sender lacks the authority] [facts=]\n")
	s, out := su.start()
	line := func(i int, from, typ string, out Outcome, extra string) {
		code := string(out.Verdict.Code)
		if code == "" {
			code = "OK"
		}
		roles := strings.Join(out.Roles, ",")
		if roles == "" {
			roles = "-"
		}
		fmt.Fprintf(&b, "%d %s %s %s %s %d %s%s", i, from, typ, code, out.Verdict.Reason, out.Verdict.Rank, roles, extra)
		if out.Facts != nil {
			fmt.Fprintf(&b, " facts=%s", mustJSON(t, out.Facts))
		}
		b.WriteByte('\n')
	}
	line(0, su.initiator, TypeSessionStart, out, "")
	if s == nil {
		t.Fatalf("start: %+v", out.Verdict)
	}
	at := int64(0)
	for i, m := range msgs {
		extra := ""
		if m.id != "" {
			extra = " id=" + m.id
		}
		if m.at != 0 {
			at = m.at
			extra += fmt.Sprintf(" at=+%d", at)
		} else {
			at++
		}
		env := m.envelope(s, i)
		if m.typ == TypeSessionStart {
			env.TimestampUnixMs = t0
		}
		before := dump(s)
		out := Step(s, env, m.from, t0+at)
		if dump(s) != before {
			t.Fatalf("message %d: Step mutated its input", i+1)
		}
		commit := out.Verdict.OK() && out.Next != nil
		if commit && !authority(s.Mode, m.typ, out.Roles) {
			extra += " policy=deny"
			commit = false
		}
		line(i+1, m.from, m.typ, out, extra)
		if commit {
			s = out.Next
		}
	}
	fmt.Fprintf(&b, "state %s\n", s.State)
	if s.Resolution() != nil {
		fmt.Fprintf(&b, "resolution %s\n", mustJSON(t, s.Resolution()))
	}
	ms, err := json.MarshalIndent(s.ModeState(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(ms)
	b.WriteByte('\n')
	return b.String()
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
