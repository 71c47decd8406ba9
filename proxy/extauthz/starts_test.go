package extauthz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestUnconfirmedStarts: ext_authz commits a SessionStart on allow, unseen
// by the runtime's answer, so one principal may hold only so many sessions
// it started that have not ended: one more start is refused with
// RESOURCE_EXHAUSTED, and other principals are not affected. Nothing the
// initiator sends on its session confirms the start (the runtime may have
// refused both): a SuspendSession, which pauses the TTL, used to, so that
// start-then-suspend, repeated, parked uncounted sessions in the table for
// good. Nor does another participant's message. An ended session (cancelled
// here) makes room.
func TestUnconfirmedStarts(t *testing.T) {
	srv := newServer(t, Config{Listen: "unused", MaxUnconfirmedStarts: 2})
	for _, tc := range []struct {
		name string
		code func() rules.Code
		want rules.Code
	}{
		{"first start", sendOf(t, srv, startOf("agent://flood", 1)), rules.CodeOK},
		{"first suspended", controlOf(t, srv, "SuspendSession", "agent://flood", 1), rules.CodeOK},
		{"second start", sendOf(t, srv, startOf("agent://flood", 2)), rules.CodeOK},
		{"a message on the second", sendOf(t, srv, requestOf("agent://flood", 2)), rules.CodeOK},
		{"the worker's answer on the second", sendOf(t, srv, acceptOf("agent://worker", 2)), rules.CodeOK},
		{"third start, none ended", sendOf(t, srv, startOf("agent://flood", 3)), rules.CodeResourceExhausted},
		{"another principal", sendOf(t, srv, startOf("agent://other", 4)), rules.CodeOK},
		{"first cancelled", controlOf(t, srv, "CancelSession", "agent://flood", 1), rules.CodeOK},
		{"third start, one ended", sendOf(t, srv, startOf("agent://flood", 5)), rules.CodeOK},
		{"fifth suspended", controlOf(t, srv, "SuspendSession", "agent://flood", 5), rules.CodeOK},
		{"fifth resumed", controlOf(t, srv, "ResumeSession", "agent://flood", 5), rules.CodeOK},
		{"fourth start", sendOf(t, srv, startOf("agent://flood", 6)), rules.CodeResourceExhausted},
	} {
		if got := tc.code(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// sendOf checks a Send of env when called (see checkSend).
func sendOf(t *testing.T, srv *Server, env *macpv1.Envelope) func() rules.Code {
	return func() rules.Code { return checkSend(t, srv, env) }
}

// controlOf checks the control call op on session n by who when called and
// returns the answer's code ("" for allowed).
func controlOf(t *testing.T, srv *Server, op, who string, n int) func() rules.Code {
	return func() rules.Code {
		b, err := proto.Marshal(&macpv1.CancelSessionRequest{SessionId: sessionN(n)}) // the three share {session_id, reason}
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Check(context.Background(), checkRequest(service+op, who, frame(b)))
		if err != nil {
			t.Fatal(err)
		}
		return decision(resp).Code
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
	return &macpv1.Envelope{MessageType: macp.TypeSessionStart, MessageId: "start", SessionId: sessionN(n), Sender: who, Payload: b}
}

func requestOf(who string, n int) *macpv1.Envelope {
	b, _ := proto.Marshal(&taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "agent://worker"})
	return &macpv1.Envelope{MessageType: "TaskRequest", MessageId: "req", SessionId: sessionN(n), Sender: who, Payload: b}
}

func acceptOf(who string, n int) *macpv1.Envelope {
	b, _ := proto.Marshal(&taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: who})
	return &macpv1.Envelope{MessageType: "TaskAccept", MessageId: "acc", SessionId: sessionN(n), Sender: who, Payload: b}
}

// checkSend checks a Send of env, stamped now, as its sender and returns the
// answer's code ("" for allowed).
func checkSend(t *testing.T, srv *Server, env *macpv1.Envelope) rules.Code {
	t.Helper()
	env.MacpVersion, env.Mode, env.TimestampUnixMs = "1.0", macp.ModeTask, time.Now().UnixMilli()
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

// BenchmarkStartAtCap: a SessionStart from a principal holding as many live
// sessions as it may: each one refused asks the table about every one.
func BenchmarkStartAtCap(b *testing.B) {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		b.Fatal(err)
	}
	auth, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		b.Fatal(err)
	}
	enf, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: auth, Policies: engine})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Listen: "unused"}, macpOn(b, enf), nil)
	if err != nil {
		b.Fatal(err)
	}
	check := func(n int) rules.Code {
		env := startOf("agent://flood", 0)
		env.SessionId = fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		env.MacpVersion, env.Mode, env.TimestampUnixMs = "1.0", macp.ModeTask, time.Now().UnixMilli()
		body, _ := proto.Marshal(&macpv1.SendRequest{Envelope: env})
		resp, err := srv.Check(context.Background(), checkRequest(service+"Send", env.GetSender(), frame(body)))
		if err != nil {
			b.Fatal(err)
		}
		return decision(resp).Code
	}
	for n := range DefaultMaxUnconfirmedStarts {
		if got := check(n); got != rules.CodeOK {
			b.Fatalf("start %d: %s", n, got)
		}
	}
	for b.Loop() {
		if got := check(DefaultMaxUnconfirmedStarts); got != rules.CodeResourceExhausted {
			b.Fatalf("start past the cap: %q", got)
		}
	}
}
