package test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPStreamEchoOtherSession: the sidecar commits an envelope allowed on
// a StreamSession when the runtime echoes it back, and matched the echo by
// message id alone. Message ids are the client's and unique only within a
// session, so a participant of two sessions subscribes on one stream to
// session A, whose history holds a message with id X (its own TaskUpdate
// here, after about 400 KB of history), and sends on the same stream a
// TaskAccept on session B with id X. The runtime replays A's history, X
// last, then refuses the TaskAccept (a stream carries one session) and ends
// the stream: B never had an assignee. Before, the replayed X settled the
// TaskAccept as accepted, so Warden's B named the worker its active assignee
// and refused the helper's own TaskAccept, which the runtime accepts (the
// task wedged for its TTL through Warden). An echo now settles only the
// envelope it is: the same session and message id.
func TestMACPStreamEchoOtherSession(t *testing.T) { eachTransport(t, testMACPStreamEchoOtherSession) }

func testMACPStreamEchoOtherSession(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth")
	c := dialMACP(t, warden)

	a := longTask(c, 4) // the echo of X comes well after Warden decided the TaskAccept
	x := "echo-" + newSession()
	c.mustAccept(envelope("worker", a, "TaskUpdate", x, &taskv1.TaskUpdatePayload{TaskId: "t1", Status: "working"}))

	b := newSession()
	c.mustAccept(envelope("planner", b, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker", "helper"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
	c.mustAccept(envelope("planner", b, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t2"})) // any participant may accept

	stream, cancel := c.subscribed(t, "worker", a)
	defer cancel()
	if err := stream.Send(&macpv1.StreamSessionRequest{Envelope: envelope("worker", b, "TaskAccept", x, &taskv1.TaskAcceptPayload{TaskId: "t2", Assignee: "worker"})}); err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Logf("the stream ended after %d messages: %v", replayed, err)
			break
		}
		if e := resp.GetError(); e != nil {
			t.Logf("inline error: %s %s", e.GetCode(), e.GetMessage())
		}
		replayed++
	}

	// B has no assignee at the runtime: the helper may take the task.
	if ack := c.send(envelope("helper", b, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t2", Assignee: "helper"})); !ack.GetOk() {
		t.Fatalf("the helper's TaskAccept on B after the worker's refused one: %s %s (Warden committed the worker's TaskAccept on another session's echo)",
			ack.GetError().GetCode(), ack.GetError().GetMessage())
	}
}

// subscribed opens a StreamSession as who on c and subscribes it to
// session sid; cancel ends it.
func (c macpClient) subscribed(t *testing.T, who, sid string) (macpv1.MACPRuntimeService_StreamSessionClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+who), 20*time.Second)
	stream, err := macpv1.NewMACPRuntimeServiceClient(c.conn).StreamSession(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := stream.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: sid}); err != nil {
		cancel()
		t.Fatal(err)
	}
	return stream, cancel
}
