package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/replay"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

const macpService = "/macp.v1.MACPRuntimeService/"

// checkClient calls a Warden ext_authz replica as Envoy's ext_authz filter
// does (with_request_body, pack_as_bytes).
type checkClient struct {
	t    *testing.T
	name string
	c    authv3.AuthorizationClient
}

// startExtAuthz starts `warden serve --extauthz-listen` with the runtime as
// the place sessions and policies are fetched from.
func startExtAuthz(t *testing.T, name, runtime string, args ...string) (checkClient, *process) {
	t.Helper()
	addr := freeAddr(t)
	base := []string{"serve", "--extauthz-listen", addr, "--macp-upstream", runtime, "--upstream-plaintext", "--auth", "dev", "--insecure-dev-auth", "--log-level", "warn"}
	p := start(t, name, addr, nil, wardenBinary(t), append(base, args...)...)
	return dialCheck(t, name, addr), p
}

// dialCheck is an ext_authz client of the Warden at addr.
func dialCheck(t *testing.T, name, addr string) checkClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return checkClient{t, name, authv3.NewAuthorizationClient(conn)}
}

// verdict is what Envoy would do with a Check answer: "allow", or the
// refusal's MACP code (the gRPC status when there is none).
func (c checkClient) call(path, bearer string, msg proto.Message) string {
	c.t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.callRaw(path, bearer, b)
}

// callRaw is call with the message's bytes as given.
func (c checkClient) callRaw(path, bearer string, b []byte) string {
	c.t.Helper()
	resp := c.check(path, bearer, b)
	if resp.GetStatus().GetCode() == 0 {
		return "allow"
	}
	for _, h := range resp.GetDeniedResponse().GetHeaders() {
		if h.GetHeader().GetKey() == "macp-error-code" {
			return h.GetHeader().GetValue()
		}
	}
	return fmt.Sprintf("grpc %d", resp.GetStatus().GetCode())
}

// check asks the replica about one gRPC call of message bytes b, sent as
// Envoy describes it.
func (c checkClient) check(path, bearer string, b []byte) *authv3.CheckResponse {
	c.t.Helper()
	body := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(b)))
	copy(body[5:], b)
	headers := map[string]string{":authority": "runtime", ":method": "POST", ":path": path, "content-type": "application/grpc", "te": "trailers", "authorization": "Bearer " + bearer}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.c.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: "POST", Path: path, Host: "runtime", Protocol: "HTTP/2", Headers: headers, RawBody: body,
	}}}})
	if err != nil {
		c.t.Fatalf("%s: Check: %v", c.name, err)
	}
	return resp
}

// step checks one transcript step on session sid, stamped now.
func (c checkClient) step(st replay.Step, sid string) string {
	r := st.Request
	if r.Op != "" {
		return c.call(macpService+r.Op, r.Credentials.Bearer, &macpv1.CancelSessionRequest{SessionId: sid, Reason: "transcript"})
	}
	env := proto.Clone(r.Envelope).(*macpv1.Envelope)
	env.SessionId, env.TimestampUnixMs = sid, time.Now().UnixMilli()
	return c.call(macpService+"Send", r.Credentials.Bearer, &macpv1.SendRequest{Envelope: env})
}

func (c checkClient) send(env *macpv1.Envelope) string {
	return c.call(macpService+"Send", env.GetSender(), &macpv1.SendRequest{Envelope: env})
}

// TestExtAuthzReplicasOnRedis sends every transcript (the spec's conformance
// fixtures, Warden's own and the attacks) through one ext_authz Warden and,
// step after step on a different replica, through three replicas sharing
// Redis: every decision must be the one replica's. The same round robin over
// three replicas without Redis must differ somewhere, or the comparison
// could not see a replica deciding on a partial history. It logs the memory
// Redis spends per session.
func TestExtAuthzReplicasOnRedis(t *testing.T) {
	runtime := startRuntime(t)
	rd := startRedis(t)
	one, _ := startExtAuthz(t, "warden-one", runtime)
	var shared, alone []checkClient
	for i := range 3 {
		c, _ := startExtAuthz(t, fmt.Sprintf("warden-redis-%d", i), runtime, "--state", rd.url())
		shared = append(shared, c)
		c, _ = startExtAuthz(t, fmt.Sprintf("warden-alone-%d", i), runtime)
		alone = append(alone, c)
	}
	direct := dialMACP(t, runtime)
	files := transcriptFiles(t)
	var sessions []string
	diverged := 0
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			tr, rt := prepare(t, file)
			if pol := tr.Fixture.Policy; pol != nil {
				registerPolicy(t, direct, tr.Fixture.Initiator, pol)
			}
			s1, s3, sa := newSession(), newSession(), newSession()
			differs := false
			for i, st := range tr.Steps {
				time.Sleep(rt.wait[st.Index])
				want := one.step(st, s1)
				if got := shared[i%3].step(st, s3); got != want {
					t.Errorf("step %s %s as %s: one replica %s, three on Redis %s", st.Index, st.Type, st.Sender, want, got)
				}
				differs = differs || alone[i%3].step(st, sa) != want
			}
			if differs {
				diverged++
			}
			sessions = append(sessions, s3)
		})
	}
	if diverged == 0 {
		t.Error("three replicas without shared state decided every transcript as one: the comparison cannot see stale state")
	}
	t.Logf("%d of %d transcripts decided differently by three replicas without shared state", diverged, len(files))

	cl := redis.NewClient(&redis.Options{Addr: rd.addr})
	defer cl.Close()
	var sizes []int64
	for _, sid := range sessions {
		if n, err := cl.MemoryUsage(context.Background(), "warden:macp:session:"+sid).Result(); err == nil {
			sizes = append(sizes, n)
		}
	}
	if len(sizes) == 0 {
		t.Fatal("no session reached Redis")
	}
	slices.Sort(sizes)
	t.Logf("Redis MEMORY USAGE per shared session over %d transcripts: min %d, median %d, max %d bytes", len(sizes), sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1])
}

// taskMessages is a task session's messages: start, request, accept,
// update, a forged completion and the assignee's.
func taskMessages(sid string) []*macpv1.Envelope {
	mk := func(sender, typ, id string, p proto.Message) *macpv1.Envelope {
		b, _ := proto.Marshal(p)
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: typ, MessageId: id + "-" + sid[:8], SessionId: sid, Sender: sender, TimestampUnixMs: time.Now().UnixMilli(), Payload: b}
	}
	return []*macpv1.Envelope{
		mk("planner", "SessionStart", "start", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker", "other"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}),
		mk("planner", "TaskRequest", "req", &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}),
		mk("worker", "TaskAccept", "acc", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}),
		mk("worker", "TaskUpdate", "up", &taskv1.TaskUpdatePayload{TaskId: "t1", Status: "working", Progress: 0.5}),
		mk("other", "TaskComplete", "forged", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker"}),
		mk("worker", "TaskComplete", "done", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker"}),
	}
}

// envoy forwards what a replica allows to the runtime, as Envoy would, and
// returns the replica's answer.
func envoy(t *testing.T, c checkClient, runtime macpClient, env *macpv1.Envelope) string {
	t.Helper()
	got := c.send(env)
	if got == "allow" {
		ctx, cancel := as(env.GetSender())
		defer cancel()
		resp, err := macpv1.NewMACPRuntimeServiceClient(runtime.conn).Send(ctx, &macpv1.SendRequest{Envelope: env})
		if err != nil || !resp.GetAck().GetOk() {
			t.Fatalf("the runtime refused what Warden allowed: %v %v", err, resp.GetAck().GetError())
		}
	}
	return got
}

// TestExtAuthzRedisFaults: three replicas on one Redis in front of a
// runtime that receives what they allow. Redis killed: a message is refused
// UNAVAILABLE (never allowed) within the state timeout, /readyz answers 503;
// Redis restarted empty: the session is rebuilt from the runtime and its
// history still holds (the forged completion refused, the assignee's
// allowed); a session the runtime never had is SESSION_NOT_FOUND.
func TestExtAuthzRedisFaults(t *testing.T) {
	runtimeAddr := startRuntime(t)
	runtime := dialMACP(t, runtimeAddr)
	rd := startRedis(t)
	admin := freeAddr(t)
	var reps []checkClient
	for i := range 3 {
		args := []string{"--state", rd.url()}
		if i == 0 {
			args = append(args, "--admin-listen", admin)
		}
		c, _ := startExtAuthz(t, fmt.Sprintf("warden-%d", i), runtimeAddr, args...)
		reps = append(reps, c)
	}
	waitReady(t, "http://"+admin+"/readyz")
	sid := newSession()
	msgs := taskMessages(sid)
	for i, m := range msgs[:3] {
		if got := envoy(t, reps[i%3], runtime, m); got != "allow" {
			t.Fatalf("%s: %s", m.GetMessageType(), got)
		}
	}

	rd.kill()
	began := time.Now()
	if got := reps[0].send(msgs[3]); got != string(rules.CodeInternal) {
		t.Fatalf("Redis down: %s, want %s (gRPC UNAVAILABLE)", got, rules.CodeInternal)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("refusing with Redis down took %v", took)
	}
	// Traffic on every replica while Redis is down: all of it refused, none
	// allowed, whatever the message.
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for i := range 30 {
		wg.Go(func() {
			got := reps[i%3].send(msgs[3+i%3])
			mu.Lock()
			answers[got]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("30 messages refused in %v with Redis down", time.Since(began))
	if answers[string(rules.CodeInternal)] != 30 {
		t.Errorf("30 messages with Redis down answered %v, want all %s", answers, rules.CodeInternal)
	}
	if body, code := httpGet(t, "http://"+admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "state "+rd.url()) {
		t.Errorf("/readyz with Redis down: %d %q", code, body)
	}

	rd.start() // empty: no persistence
	waitReady(t, "http://"+admin+"/readyz")
	for i, want := range []string{"allow", string(rules.CodeForbidden), "allow"} {
		if got := envoy(t, reps[(i+1)%3], runtime, msgs[3+i]); got != want {
			t.Errorf("after Redis restarted empty, %s from %s: %s, want %s", msgs[3+i].GetMessageType(), msgs[3+i].GetSender(), got, want)
		}
	}
	lost := taskMessages(newSession())[1]
	if got := reps[2].send(lost); got != string(rules.CodeSessionNotFound) {
		t.Errorf("a session neither Redis nor the runtime knows: %s", got)
	}
}

// TestExtAuthzReplicasRace: two replicas receive conflicting messages of one
// session at the same moment (two TaskAccepts for a task with no requested
// assignee, then one message id with two contents): exactly one of each
// pair is allowed, over many sessions.
func TestExtAuthzReplicasRace(t *testing.T) {
	runtime := startRuntime(t)
	rd := startRedis(t)
	a, _ := startExtAuthz(t, "warden-a", runtime, "--state", rd.url())
	b, _ := startExtAuthz(t, "warden-b", runtime, "--state", rd.url())
	race := func(x, y *macpv1.Envelope) []string {
		var wg sync.WaitGroup
		out := make([]string, 2)
		wg.Go(func() { out[0] = a.send(x) })
		wg.Go(func() { out[1] = b.send(y) })
		wg.Wait()
		return out
	}
	const sessions = 20
	for n := range sessions {
		sid := newSession()
		msgs := taskMessages(sid)
		open := proto.Clone(msgs[1]).(*macpv1.Envelope)
		p, _ := proto.Marshal(&taskv1.TaskRequestPayload{TaskId: "t1"})
		open.Payload = p
		for _, m := range []*macpv1.Envelope{msgs[0], open} {
			if got := a.send(m); got != "allow" {
				t.Fatalf("%s: %s", m.GetMessageType(), got)
			}
		}
		accept := func(who string) *macpv1.Envelope {
			e := proto.Clone(msgs[2]).(*macpv1.Envelope)
			e.Sender, e.MessageId = who, "acc-"+who
			e.Payload, _ = proto.Marshal(&taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: who})
			return e
		}
		got := race(accept("worker"), accept("other"))
		if (got[0] == "allow") == (got[1] == "allow") {
			t.Fatalf("session %d, TaskAccepts: replica A %s, replica B %s: want exactly one allowed", n, got[0], got[1])
		}
		assignee := "worker"
		if got[1] == "allow" {
			assignee = "other"
		}
		// One message id, two contents: one is accepted, the other is a
		// reused id.
		update := func(progress float64) *macpv1.Envelope {
			e := proto.Clone(msgs[3]).(*macpv1.Envelope)
			e.Sender, e.MessageId = assignee, "same-id"
			e.Payload, _ = proto.Marshal(&taskv1.TaskUpdatePayload{TaskId: "t1", Status: "working", Progress: progress})
			return e
		}
		if got := race(update(0.3), update(0.6)); (got[0] == "allow") == (got[1] == "allow") {
			t.Fatalf("session %d, one id with two contents: replica A %s, replica B %s: want exactly one allowed", n, got[0], got[1])
		}
	}
}
