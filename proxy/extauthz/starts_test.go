package extauthz

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestUnconfirmedStarts: ext_authz commits a SessionStart on allow, unseen
// by the runtime's answer, so one principal may hold only so many sessions
// it started that no later message used: one more start is refused with
// RESOURCE_EXHAUSTED, a message on one of them makes room, and other
// principals are not affected. A flood of starts cannot fill the table.
func TestUnconfirmedStarts(t *testing.T) {
	srv := newServer(t, Config{Listen: "unused", MaxUnconfirmedStarts: 2})
	for _, tc := range []struct {
		name string
		env  *macpv1.Envelope
		want rules.Code
	}{
		{"first start", startOf("agent://flood", 1), rules.CodeOK},
		{"second start", startOf("agent://flood", 2), rules.CodeOK},
		{"third start, none used", startOf("agent://flood", 3), rules.CodeResourceExhausted},
		{"another principal", startOf("agent://other", 4), rules.CodeOK},
		{"a message on the first", requestOf("agent://flood", 1), rules.CodeOK},
		{"third start, one used", startOf("agent://flood", 5), rules.CodeOK},
		{"fourth start", startOf("agent://flood", 6), rules.CodeResourceExhausted},
	} {
		if got := checkSend(t, srv, tc.env); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUnconfirmedStartsShared: replicas sharing the sessions in a store do
// not count starts (a session's later messages go to other replicas; the
// table is the store's cache).
func TestUnconfirmedStartsShared(t *testing.T) {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	enf, err := replay.NewReplica(engine, &replay.Transcript{Name: "x"}, time.Now, &sharedSessions{data: map[string][]byte{}, versions: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "unused", MaxUnconfirmedStarts: 1}, enf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		if got := checkSend(t, srv, startOf("agent://flood", n)); got != rules.CodeOK {
			t.Errorf("start %d: %q, want allowed", n, got)
		}
	}
}

func sessionN(n int) string { return "00000000-0000-4000-8000-00000000009" + string(rune('0'+n)) }

func startOf(who string, n int) *macpv1.Envelope {
	b, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{who, "agent://worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	return &macpv1.Envelope{MessageType: rules.TypeSessionStart, MessageId: "start", SessionId: sessionN(n), Sender: who, Payload: b}
}

func requestOf(who string, n int) *macpv1.Envelope {
	b, _ := proto.Marshal(&taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "agent://worker"})
	return &macpv1.Envelope{MessageType: "TaskRequest", MessageId: "req", SessionId: sessionN(n), Sender: who, Payload: b}
}

// checkSend checks a Send of env, stamped now, as its sender and returns the
// answer's code ("" for allowed).
func checkSend(t *testing.T, srv *Server, env *macpv1.Envelope) rules.Code {
	t.Helper()
	env.MacpVersion, env.Mode, env.TimestampUnixMs = "1.0", rules.ModeTask, time.Now().UnixMilli()
	b, err := proto.Marshal(&macpv1.SendRequest{Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Check(context.Background(), checkRequest(service+"Send", env.GetSender(), frame(b)))
	if err != nil {
		t.Fatal(err)
	}
	return decision(resp).Code
}

// TestStartsDeadline: an unconfirmed start stops counting at its deadline.
func TestStartsDeadline(t *testing.T) {
	s := newStarts(1)
	s.started("p", "a", deadline(1_000, 5_000))
	for _, tc := range []struct {
		now  int64
		full bool
	}{{1_000, true}, {6_000, true}, {6_001, false}} {
		if got := s.full("p", tc.now); got != tc.full {
			t.Errorf("full at %d = %v, want %v", tc.now, got, tc.full)
		}
	}
}
