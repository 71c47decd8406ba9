package sessions

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// step is one message of a benchmark setup.
type step struct {
	sender, typ string
	payload     proto.Message
}

// scenario is a session brought into a state, then one message decided over
// and over (settled as refused upstream, so the state never moves).
type scenario struct {
	name    string
	mode    string
	parts   []string
	setup   []step
	msg     step
	allowed bool
}

var benchScenarios = []scenario{
	{
		name: "task/TaskUpdate/allow", mode: macp.ModeTask, parts: []string{planner, worker, other},
		setup: []step{{planner, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: worker}}, {worker, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: worker}}},
		msg:   step{worker, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t", Progress: 0.5, Message: "half way"}}, allowed: true,
	},
	{
		name: "task/TaskUpdate/deny-requester", mode: macp.ModeTask, parts: []string{planner, worker, other},
		setup: []step{{planner, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: worker}}, {worker, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: worker}}},
		msg:   step{planner, "TaskUpdate", &taskv1.TaskUpdatePayload{TaskId: "t", Progress: 0.5}},
	},
	{
		name: "task/TaskComplete/deny-forged", mode: macp.ModeTask, parts: []string{planner, worker, other},
		setup: []step{{planner, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: worker}}, {worker, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: worker}}},
		msg:   step{other, "TaskComplete", &taskv1.TaskCompletePayload{TaskId: "t", Assignee: worker, Output: []byte("forged")}},
	},
	{
		name: "task/Commitment/allow", mode: macp.ModeTask, parts: []string{planner, worker, other},
		setup: []step{{planner, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t", RequestedAssignee: worker}}, {worker, "TaskAccept", &taskv1.TaskAcceptPayload{TaskId: "t", Assignee: worker}}, {worker, "TaskComplete", &taskv1.TaskCompletePayload{TaskId: "t", Assignee: worker, Output: []byte("ok")}}},
		msg:   step{planner, "Commitment", &macpv1.CommitmentPayload{CommitmentId: "c", Action: "task.completed", AuthorityScope: "s", Reason: "r", ModeVersion: "1.0.0", ConfigurationVersion: "c", OutcomePositive: true}}, allowed: true,
	},
	{
		name: "handoff/HandoffOffer/allow", mode: macp.ModeHandoff, parts: []string{planner, worker, other},
		msg: step{planner, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h", TargetParticipant: worker, Scope: "refund", Reason: "r"}}, allowed: true,
	},
	{
		name: "handoff/HandoffAccept/allow", mode: macp.ModeHandoff, parts: []string{planner, worker, other},
		setup: []step{{planner, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h", TargetParticipant: worker}}},
		msg:   step{worker, "HandoffAccept", &handoffv1.HandoffAcceptPayload{HandoffId: "h", AcceptedBy: worker}}, allowed: true,
	},
	{
		name: "handoff/HandoffAccept/deny-hijack", mode: macp.ModeHandoff, parts: []string{planner, worker, other},
		setup: []step{{planner, "HandoffOffer", &handoffv1.HandoffOfferPayload{HandoffId: "h", TargetParticipant: worker}}},
		msg:   step{other, "HandoffAccept", &handoffv1.HandoffAcceptPayload{HandoffId: "h", AcceptedBy: other}},
	},
	{
		name: "decision/Vote/allow", mode: macp.ModeDecision, parts: []string{planner, worker, other},
		setup: []step{{planner, "Proposal", &decisionv1.ProposalPayload{ProposalId: "p", Option: "o"}}},
		msg:   step{worker, "Vote", &decisionv1.VotePayload{ProposalId: "p", Vote: "APPROVE"}}, allowed: true,
	},
	{
		name: "decision/Vote/deny-outsider", mode: macp.ModeDecision, parts: []string{planner, worker},
		setup: []step{{planner, "Proposal", &decisionv1.ProposalPayload{ProposalId: "p", Option: "o"}}},
		msg:   step{other, "Vote", &decisionv1.VotePayload{ProposalId: "p", Vote: "APPROVE"}},
	},
	{
		name: "proposal/Accept/allow", mode: macp.ModeProposal, parts: []string{planner, worker},
		setup: []step{{worker, "Proposal", &proposalv1.ProposalPayload{ProposalId: "p"}}},
		msg:   step{planner, "Accept", &proposalv1.AcceptPayload{ProposalId: "p"}}, allowed: true,
	},
	{
		name: "quorum/Approve/allow", mode: macp.ModeQuorum, parts: []string{worker, other},
		setup: []step{{planner, "ApprovalRequest", &quorumv1.ApprovalRequestPayload{RequestId: "r", RequiredApprovals: 1}}},
		msg:   step{worker, "Approve", &quorumv1.ApprovePayload{RequestId: "r"}}, allowed: true,
	},
	{
		name: "quorum/Approve/deny-coordinator", mode: macp.ModeQuorum, parts: []string{worker, other},
		setup: []step{{planner, "ApprovalRequest", &quorumv1.ApprovalRequestPayload{RequestId: "r", RequiredApprovals: 1}}},
		msg:   step{planner, "Approve", &quorumv1.ApprovePayload{RequestId: "r"}},
	},
	{
		name: "multi_round/Contribute/allow", mode: macp.ModeMultiRound, parts: []string{planner, worker, other},
		msg: step{worker, "Contribute", &multiroundv1.ContributePayload{Value: "a"}}, allowed: true,
	},
}

// prepare starts the scenario's session and returns the request to decide.
func (sc scenario) prepare(b testing.TB, e *Decider, n int) Request {
	sid := sessionID(n)
	mk := func(i int, s step) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: sc.mode, MessageType: s.typ, MessageId: fmt.Sprint("m", i), SessionId: sid, Sender: s.sender, Payload: mustMarshal(b, s.payload)}
	}
	start := step{planner, "SessionStart", &macpv1.SessionStartPayload{Participants: sc.parts, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: macp.MaxTTLMs}}
	for i, s := range append([]step{start}, sc.setup...) {
		d, err := e.Enforce(context.Background(), req(mk(i, s)))
		if err != nil || !d.Allow {
			b.Fatalf("%s setup %s: %v %+v", sc.name, s.typ, err, d)
		}
		d.Settle(true)
	}
	return req(mk(100, sc.msg))
}

// BenchmarkEnforce measures one decision (authentication, session lock,
// rules, policy) for representative messages of each mode.
func BenchmarkEnforce(b *testing.B) {
	for i, sc := range benchScenarios {
		b.Run(sc.name, func(b *testing.B) {
			e, _ := newEnforcer(b, proxy.Config{}, nil)
			r := sc.prepare(b, e, i)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				d, err := e.Enforce(ctx, r)
				if err != nil || d.Allow != sc.allowed {
					b.Fatalf("%v %+v", err, d)
				}
				d.Settle(false)
			}
		})
	}
}

// BenchmarkEnforceParallel decides TaskUpdates of many sessions from every
// core at once: different sessions never wait for each other.
func BenchmarkEnforceParallel(b *testing.B) {
	e, _ := newEnforcer(b, proxy.Config{}, nil)
	const sessions = 256
	reqs := make([]Request, sessions)
	for i := range reqs {
		reqs[i] = benchScenarios[0].prepare(b, e, i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			d, err := e.Enforce(context.Background(), reqs[i%sessions])
			if err != nil || !d.Allow {
				b.Errorf("%v %+v", err, d)
				return
			}
			d.Settle(false)
			i++
		}
	})
}

// BenchmarkSessionMemory reports the heap each tracked session costs: a task
// session after SessionStart, TaskRequest, TaskAccept and three TaskUpdates.
func BenchmarkSessionMemory(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(sessionHeap(b, 10_000, liveTask), "B/session")
	}
}

// BenchmarkSessionMemoryStart reports the heap each tracked session costs
// after its SessionStart alone, as make bench's memory scenario starts them.
func BenchmarkSessionMemoryStart(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(sessionHeap(b, 10_000, startedTask), "B/session")
	}
}

// startedTask starts task session sid (SessionStart only).
func startedTask(t testing.TB, e *Decider, sid string) {
	d, err := e.Enforce(context.Background(), req(env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
		Participants: []string{planner, worker, other}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: macp.MaxTTLMs,
	}))))
	if err != nil || !d.Allow {
		t.Fatalf("SessionStart: %v %+v", err, d)
	}
	d.Settle(true)
}

// liveTask brings task session sid through SessionStart, TaskRequest,
// TaskAccept and three TaskUpdates.
func liveTask(t testing.TB, e *Decider, sid string) {
	startTask(t, e, sid, true)
	update := mustMarshal(t, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: 0.5})
	for j := range 3 {
		d, err := e.Enforce(context.Background(), req(env(sid, worker, "TaskUpdate", fmt.Sprint("u", j), update)))
		if err != nil || !d.Allow {
			t.Fatalf("TaskUpdate: %v %+v", err, d)
		}
		d.Settle(true)
	}
}

// sessionHeap returns the Go heap after a collection per session of a
// table holding n sessions, each brought into its state by grow.
func sessionHeap(t testing.TB, n int, grow func(testing.TB, *Decider, string)) float64 {
	e, _ := newEnforcer(t, proxy.Config{Sessions: n}, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		grow(t, e, sessionID(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
