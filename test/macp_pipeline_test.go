package test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// runningTask starts a task session the worker accepted, through c.
func runningTask(c macpClient, s string) {
	c.mustAccept(envelope("planner", s, "SessionStart", s+"-start", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker", "reviewer"},
		ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}))
	c.mustAccept(envelope("planner", s, "TaskRequest", s+"-req", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "x", RequestedAssignee: "worker"}))
	c.mustAccept(envelope("worker", s, "TaskAccept", s+"-acc", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
}

// sendAll sends envs concurrently through c and returns each Ack (nil with
// the error text when the call failed).
func sendAll(c macpClient, envs []*macpv1.Envelope) ([]*macpv1.Ack, []error) {
	acks, errs := make([]*macpv1.Ack, len(envs)), make([]error, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acks[i], errs[i] = c.sendOn("/macp.v1.MACPRuntimeService/Send", env)
		}()
	}
	wg.Wait()
	return acks, errs
}

func workerCount(t *testing.T, c macpClient, s string) uint32 {
	t.Helper()
	meta, err := c.session("planner", s)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range meta.GetParticipantActivity() {
		if a.GetParticipantId() == "worker" {
			return a.GetMessageCount()
		}
	}
	return 0
}

// TestMACPPipelinedSession drives one session with many messages in flight
// through bin/warden (pipeline depth 16, the default) in front of the real
// runtime: 16 concurrent TaskUpdates are all accepted and their ids all
// committed (each reused with other content is refused, as a fresh Warden
// that rebuilt the session from the runtime refuses it); a TaskComplete
// racing 16 TaskUpdates is decided safely: every update Warden let through
// the runtime accepted, none after the completion, and Warden's state
// afterwards is the runtime's.
func TestMACPPipelinedSession(t *testing.T) { eachTransport(t, testMACPPipelinedSession) }

func testMACPPipelinedSession(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	warden := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	update := func(s, id string, p float64) *macpv1.Envelope {
		return envelope("worker", s, "TaskUpdate", id, &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: p, Message: "working"})
	}

	s := newSession()
	runningTask(warden, s)
	var updates []*macpv1.Envelope
	for i := range 16 {
		updates = append(updates, update(s, fmt.Sprint(s, "-u", i), 0.5))
	}
	acks, errs := sendAll(warden, updates)
	for i := range updates {
		if errs[i] != nil || !acks[i].GetOk() || acks[i].GetDuplicate() {
			t.Fatalf("TaskUpdate %d of 16 in flight: %v %+v", i, errs[i], acks[i])
		}
	}
	if got := workerCount(t, direct, s); got != 1+16 {
		t.Fatalf("the runtime counts %d messages from the worker, want 17", got)
	}
	fresh := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	for i := range updates {
		reused := update(s, updates[i].GetMessageId(), 0.9)
		for name, c := range map[string]macpClient{"the pipelined Warden": warden, "a fresh Warden": fresh} {
			if ack := c.send(reused); ack.GetOk() || ack.GetError().GetCode() != "DUPLICATE_MESSAGE" {
				t.Errorf("update id %d reused with other content through %s: %+v, want DUPLICATE_MESSAGE", i, name, ack)
			}
		}
	}

	// A TaskComplete racing TaskUpdates on another session.
	s = newSession()
	runningTask(warden, s)
	race := []*macpv1.Envelope{envelope("worker", s, "TaskComplete", s+"-done", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker", Summary: "done"})}
	for i := range 16 {
		race = append(race, update(s, fmt.Sprint(s, "-u", i), float64(i)/16))
	}
	acks, errs = sendAll(warden, race)
	if errs[0] != nil || !acks[0].GetOk() {
		t.Fatalf("the racing TaskComplete: %v %+v", errs[0], acks[0])
	}
	accepted := 0
	for i, ack := range acks[1:] {
		switch {
		case errs[i+1] != nil:
			t.Errorf("racing TaskUpdate %d: %v", i, errs[i+1])
		case ack.GetOk():
			accepted++
		case ack.GetError().GetCode() != "FORBIDDEN":
			t.Errorf("racing TaskUpdate %d refused with %s (%s), want FORBIDDEN after the completion", i, ack.GetError().GetCode(), ack.GetError().GetMessage())
		}
	}
	t.Logf("TaskComplete racing 16 TaskUpdates: %d updates landed before it, %d refused after it", accepted, 16-accepted)
	if got, want := workerCount(t, direct, s), uint32(1+accepted+1); got != want {
		t.Errorf("the runtime counts %d messages from the worker, want %d (accept, %d updates, completion)", got, want, accepted)
	}
	fresh = dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	for i, env := range race[1:] {
		reused := update(s, env.GetMessageId(), 2)
		a, b := warden.send(reused), fresh.send(reused)
		if a.GetOk() || a.GetError().GetCode() != b.GetError().GetCode() {
			t.Errorf("racing update id %d reused: the pipelined Warden %+v, a fresh one %+v", i, a, b)
		}
	}
	warden.mustAccept(envelope("planner", s, "Commitment", s+"-c", &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed",
		AuthorityScope: "task", Reason: "done", ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", OutcomePositive: true}))
}

// TestMACPPipelinedStream sends 16 TaskUpdates and then a TaskComplete on one
// StreamSession through bin/warden: the updates fly until the runtime echoes
// them, the completion waits for them (its wait is answered by the stream's
// own echoes) and is echoed in turn, and the planner's Commitment, which
// needs the completion committed, is accepted.
func TestMACPPipelinedStream(t *testing.T) { eachTransport(t, testMACPPipelinedStream) }

func testMACPPipelinedStream(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	warden := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	s := newSession()
	runningTask(warden, s)
	ctx, cancel := as("worker")
	defer cancel()
	st, err := macpv1.NewMACPRuntimeServiceClient(warden.conn).StreamSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		env := envelope("worker", s, "TaskUpdate", fmt.Sprint(s, "-su", i), &taskv1.TaskUpdatePayload{TaskId: "t1", Progress: float64(i) / 16})
		if err := st.Send(&macpv1.StreamSessionRequest{Envelope: env}); err != nil {
			t.Fatal(err)
		}
	}
	done := envelope("worker", s, "TaskComplete", s+"-sdone", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker", Summary: "done"})
	if err := st.Send(&macpv1.StreamSessionRequest{Envelope: done}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for echoed := 0; echoed < 17; {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("after %d echoes: %v", echoed, err)
		}
		if e := resp.GetError(); e != nil {
			t.Fatalf("refused on the stream: %s %s (%s)", e.GetMessageId(), e.GetCode(), e.GetMessage())
		}
		if resp.GetEnvelope().GetSessionId() == s {
			echoed++
		}
	}
	t.Logf("16 streamed TaskUpdates and a TaskComplete echoed in %v", time.Since(began).Round(time.Millisecond))
	_ = st.CloseSend()
	if got := workerCount(t, direct, s); got != 1+16+1 {
		t.Errorf("the runtime counts %d messages from the worker, want 18", got)
	}
	warden.mustAccept(envelope("planner", s, "Commitment", s+"-c", &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed",
		AuthorityScope: "task", Reason: "done", ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", OutcomePositive: true}))
}
