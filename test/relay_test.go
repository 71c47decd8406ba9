package test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// startRelay starts the frame relay of proxy/frames (bench/cmd/null -relay)
// in front of upstream.
func startRelay(t *testing.T, upstream string) string {
	t.Helper()
	addr := freeAddr(t)
	start(t, "relay", addr, nil, buildIn(t, "bench", "./cmd/null"), "-listen", addr, "-macp", upstream, "-relay")
	return addr
}

// TestRelayMACP runs the real MACP runtime through the frame relay with the
// real Python SDK: unary Send, StreamSession (bidi), subscriptions, listing
// and a refusal answer exactly as they do direct.
func TestRelayMACP(t *testing.T) {
	direct := startRuntime(t)
	relay := startRelay(t, direct)
	stream := step{"as": "worker", "op": "stream", "session": "S", "messages": []map[string]any{
		{"mode": taskMode, "type": "TaskUpdate", "payload_type": "task.TaskUpdate", "payload": map[string]any{"task_id": "t1", "progress": 0.5}},
		{"mode": taskMode, "type": "TaskComplete", "payload_type": "task.TaskComplete", "payload": map[string]any{"task_id": "t1", "assignee": "worker", "summary": "done"}},
	}}
	s := taskSession("S")
	steps := append(s[:3:3], stream, s[5],
		step{"as": "worker", "op": "subscribe", "session": "S"},
		step{"as": "planner", "op": "ListSessions"},
		sessionStart("planner", "S", taskMode, "planner", "worker")) // a second SessionStart: refused by the runtime
	steps = append(steps, handoffSession("H")...)
	d := drive(t, direct, nil, steps)
	r := drive(t, relay, nil, steps)
	for i := range steps {
		if fmt.Sprint(d[i].OK, d[i].Code, len(d[i].Results), d[i].Received, d[i].Sessions) != fmt.Sprint(r[i].OK, r[i].Code, len(r[i].Results), r[i].Received, r[i].Sessions) {
			t.Errorf("step %d (%v): direct %+v, through the relay %+v", i, steps[i]["type"], d[i], r[i])
		}
	}
	if !r[3].OK || len(r[3].Results) != 2 || !r[3].Results[0].OK || !r[3].Results[1].OK {
		t.Errorf("StreamSession through the relay: %+v, want both envelopes accepted", r[3])
	}
	if !r[5].OK || r[5].Received < 5 {
		t.Errorf("subscription through the relay: %+v, want the session's history", r[5])
	}
	if r[7].OK {
		t.Errorf("second SessionStart through the relay accepted, want the runtime's refusal")
	}
}

// subscriptions opens n StreamSession subscriptions to session on target
// as worker, 100 a client connection, waits for the first replayed envelope of each, then sends one
// envelope with Send while they stay open. It reports how many subscribed
// within the deadline and the Send's error.
func subscriptions(t *testing.T, target, session string, n int) (int, error) {
	t.Helper()
	// 100 on a client connection: a hop takes 128 calls a connection at most
	var rpcs []macpv1.MACPRuntimeServiceClient
	for range (n + 99) / 100 {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rpcs = append(rpcs, macpv1.NewMACPRuntimeServiceClient(conn))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer worker")
	var mu sync.Mutex
	live := 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := rpcs[i/100].StreamSession(wctx)
			if err != nil {
				return
			}
			if err := s.Send(&macpv1.StreamSessionRequest{SubscribeSessionId: session}); err != nil {
				return
			}
			if _, err := s.Recv(); err != nil {
				return
			}
			mu.Lock()
			live++
			mu.Unlock()
			<-ctx.Done() // hold the subscription open until the Send below is done
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		l := live
		mu.Unlock()
		if l == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	got := live
	mu.Unlock()
	sendErr := sendEnvelope(target, "planner", session, "TaskRequest", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "many", RequestedAssignee: "worker"})
	cancel()
	wg.Wait()
	return got, sendErr
}

// sendEnvelope sends one task-mode envelope as sender with Send, on a
// connection of its own, within 3 s; a refused Ack is an error.
func sendEnvelope(target, sender, session, typ string, payload proto.Message) error {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	b, err := proto.Marshal(payload)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+sender), 3*time.Second)
	defer cancel()
	resp, err := macpv1.NewMACPRuntimeServiceClient(conn).Send(ctx, &macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: taskMode,
		MessageType: typ, MessageId: typ + "-" + session[:8], SessionId: session, Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: b}})
	if err != nil {
		return err
	}
	if a := resp.GetAck(); !a.GetOk() {
		return fmt.Errorf("%s refused: %s %s", typ, a.GetError().GetCode(), a.GetError().GetMessage())
	}
	return nil
}

// uuid is a random session id.
func uuid(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// TestManySubscriptions holds 200 subscriptions open, more than the
// runtime's 128 concurrent streams on one connection, through the relay
// and through Warden, and sends one envelope beside them. (With one
// upstream connection Warden had 122 live, and the Send waited for a free
// stream.)
func TestManySubscriptions(t *testing.T) {
	const n = 200
	direct := startRuntime(t)
	hops := map[string]string{
		"relay":  startRelay(t, direct),
		"Warden": startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--max-streams-per-principal", "256"), // one principal holds them all
	}
	for _, name := range []string{"relay", "Warden"} {
		t.Run(name, func(t *testing.T) {
			session := uuid(t)
			if err := sendEnvelope(direct, "planner", session, "SessionStart", &macpv1.SessionStartPayload{Intent: "many", Participants: []string{"planner", "worker"},
				ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}); err != nil {
				t.Fatal(err)
			}
			live, err := subscriptions(t, hops[name], session, n)
			t.Logf("%s: %d of %d subscriptions live, Send beside them: %v", name, live, n, err)
			if live != n || err != nil {
				t.Errorf("through %s: %d of %d subscriptions live, Send: %v", name, live, n, err)
			}
		})
	}
}
