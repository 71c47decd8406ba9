package test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPStreamClientNotReading: a participant subscribes to a session with
// a long history over a StreamSession whose HTTP/2 window it never opens,
// then sends a state-changing envelope on it. The real runtime echoes it;
// Warden must settle it whatever the stalled client, so that the other
// participant's Send is answered (before: it waited until its deadline, and
// the session was held for everyone).
func TestMACPStreamClientNotReading(t *testing.T) { eachTransport(t, testMACPStreamClientNotReading) }

func testMACPStreamClientNotReading(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth")
	c := dialMACP(t, warden)
	sid := longTask(c, 4) // about 400 KB of history, beyond the client's 64 KB window

	slow, err := grpc.NewClient(warden, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	sctx, scancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer worker"))
	defer scancel()
	stream, err := macpv1.NewMACPRuntimeServiceClient(slow).StreamSession(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the history fills the window
	complete := envelope("worker", sid, "TaskComplete", "", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker", Summary: "done"})
	if err := stream.Send(&macpv1.StreamSessionRequest{Envelope: complete}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)

	began := time.Now()
	ack, err := c.sendOn(macpService+"Send", envelope("planner", sid, "Commitment", "", &macpv1.CommitmentPayload{CommitmentId: "c1", Action: "task.completed",
		AuthorityScope: "test", Reason: "done", OutcomePositive: true, ModeVersion: "1.0.0", ConfigurationVersion: "c"}))
	if err != nil || time.Since(began) > 5*time.Second {
		t.Fatalf("the planner's Commitment after %v: %v %v (the session is held by a stream that does not read)", time.Since(began), err, ack)
	}
	if !ack.GetOk() {
		t.Errorf("the planner's Commitment after the streamed TaskComplete: %s %s", ack.GetError().GetCode(), ack.GetError().GetMessage())
	}
}

// TestMACPStreamClientTrickle: a participant subscribes to a session with
// about 2.4 MB of history and reads it a message a second (about 100 KB/s)
// through a 64 KB window. Every write to it completes within 2 s, as grpc-go
// returns once a message fits the window, so before, Warden queued the whole
// history for it (up to 16 MiB a stream); its stream must now end
// RESOURCE_EXHAUSTED, as it drains its queue slower than 256 KiB/s.
func TestMACPStreamClientTrickle(t *testing.T) { eachTransport(t, testMACPStreamClientTrickle) }

func testMACPStreamClientTrickle(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth")
	c := dialMACP(t, warden)
	sid := longTask(c, 24)
	slow, err := grpc.NewClient(warden, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	sctx, scancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer worker"), 30*time.Second)
	defer scancel()
	stream, err := macpv1.NewMACPRuntimeServiceClient(slow).StreamSession(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for read := 0; read < 20; read++ { // the whole history, at most ~20 s
		if _, err := stream.Recv(); err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("after %d messages, %v: %v, want RESOURCE_EXHAUSTED", read, time.Since(began), err)
			}
			t.Logf("ended after %d messages, %v: %v", read, time.Since(began).Round(time.Millisecond), err)
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("a client reading 100 KB/s held its stream for %v", time.Since(began))
}

// longTask starts a task session of planner and worker through c, the task
// accepted by the worker, who then sends updates TaskUpdates of 100 KB
// each; it returns the session id.
func longTask(c macpClient, updates int) string {
	c.t.Helper()
	sid := newSession()
	c.mustAccept(envelope("planner", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
	c.mustAccept(envelope("planner", sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}))
	c.mustAccept(envelope("worker", sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
	for range updates {
		c.mustAccept(envelope("worker", sid, "TaskUpdate", "", &taskv1.TaskUpdatePayload{TaskId: "t1", Status: "working", PartialOutput: make([]byte, 100<<10)}))
	}
	return sid
}
