package test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPStreamBindOutsider (tried by the fourteenth pass, docs/security.md):
// macp-runtime 0.13.0 binds a StreamSession to an envelope's session before
// it decides the envelope (bind_live precedes runtime.process), so an
// outsider's envelope naming a session he is not in, which the runtime
// refuses inline (FORBIDDEN, the stream left open), still subscribes his
// stream to that session's live envelopes: the runtime alone hands bob the
// planner's next TaskRequest. (A SessionStart naming it ends the stream,
// SESSION_ALREADY_EXISTS being terminal there.) Through Warden bob's
// envelope is decided on no session and refused before the runtime sees it,
// whether Warden's table holds the session or another start evicted it
// (--sessions 1: rebuilt from the runtime), and bob's stream carries
// nothing of the session.
func TestMACPStreamBindOutsider(t *testing.T) { eachTransport(t, testMACPStreamBindOutsider) }

func testMACPStreamBindOutsider(t *testing.T) {
	direct := startRuntime(t)
	for _, tc := range []struct {
		name    string
		addr    string
		through bool
		evict   bool
	}{
		{"runtime alone", direct, false, false},
		{"through warden", startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth"), true, false},
		{"through warden, the session evicted", startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1"), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialMACP(t, tc.addr)
			s := newSession()
			start := func(sender, session string) *macpv1.Envelope {
				return envelope(sender, session, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{sender, "worker"},
					ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
			}
			c.mustAccept(start("planner", s))
			if tc.evict {
				c.mustAccept(start("other", newSession())) // the table holds one session: the planner's leaves it
			}

			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer bob"), 20*time.Second)
			defer cancel()
			stream, err := macpv1.NewMACPRuntimeServiceClient(c.conn).StreamSession(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&macpv1.StreamSessionRequest{Envelope: envelope("bob", s, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "tb"})}); err != nil {
				t.Fatal(err)
			}
			resp, err := stream.Recv()
			if err != nil || resp.GetError() == nil {
				t.Fatalf("bob's TaskRequest on the planner's session: %v %v, want an inline refusal", resp, err)
			}
			t.Logf("bob's TaskRequest refused: %s %s", resp.GetError().GetCode(), resp.GetError().GetMessage())

			got := make(chan *macpv1.Envelope, 1)
			go func() {
				defer close(got)
				for {
					r, err := stream.Recv()
					if err != nil {
						return
					}
					if e := r.GetEnvelope(); e != nil {
						got <- e
						return
					}
				}
			}()
			c.mustAccept(envelope("planner", s, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "for the worker"}))
			var leaked *macpv1.Envelope
			select {
			case leaked = <-got:
			case <-time.After(2 * time.Second):
			}
			switch {
			case tc.through && leaked != nil:
				t.Fatalf("bob's stream carried the planner's %s on a session he is not in", leaked.GetMessageType())
			case !tc.through && leaked == nil:
				t.Fatal("the runtime alone did not hand bob the planner's TaskRequest: the premise of this test no longer holds")
			case leaked != nil:
				t.Logf("the runtime alone handed bob the planner's %s (sender %s)", leaked.GetMessageType(), leaked.GetSender())
			}
		})
	}
}
