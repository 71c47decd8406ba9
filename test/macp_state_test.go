package test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPListSessionsPaging: ListSessions through Warden against the real
// runtime. Before, Warden filtered other principals' sessions out of each
// page but passed the runtime's next_page_token (base64url of "v1:<session
// id>"): mallory, who takes part in nothing, paged with page_size 1 and read
// every session id from the tokens. Now she gets one empty last page, and
// alice gets exactly her own sessions, a full page at a time, with tokens
// that name nothing.
func TestMACPListSessionsPaging(t *testing.T) { eachTransport(t, testMACPListSessionsPaging) }

func testMACPListSessionsPaging(t *testing.T) {
	direct := startRuntime(t)
	c := dialMACP(t, startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth"))
	start := func(who string, participants ...string) string {
		sid := newSession()
		c.mustAccept(envelope(who, sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: participants,
			ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
		return sid
	}
	var all, alices []string
	for i := range 6 {
		all = append(all, start("bob", "bob", "carol"))
		if i%3 == 0 {
			sid := start("alice", "alice", "bob")
			all, alices = append(all, sid), append(alices, sid)
		}
	}
	client := macpv1.NewMACPRuntimeServiceClient(c.conn)
	walk := func(who string) (ids []string, tokens []string) {
		t.Helper()
		token := ""
		for pages := 0; pages < 50; pages++ {
			ctx, cancel := as(who)
			resp, err := client.ListSessions(ctx, &macpv1.ListSessionsRequest{PageSize: 1, PageToken: token})
			cancel()
			if err != nil {
				t.Fatalf("%s, page %d: %v", who, pages, err)
			}
			for _, m := range resp.GetSessions() {
				ids = append(ids, m.GetSessionId())
			}
			if token = resp.GetNextPageToken(); token == "" {
				return ids, tokens
			}
			tokens = append(tokens, token)
		}
		t.Fatalf("%s: no last page", who)
		return nil, nil
	}
	leaks := func(who string, tokens []string) {
		t.Helper()
		for _, tok := range tokens {
			raw, _ := base64.RawURLEncoding.DecodeString(tok)
			for _, sid := range all {
				if strings.Contains(tok, sid) || strings.Contains(string(raw), sid) {
					t.Errorf("%s's page token %q names session %s", who, tok, sid)
				}
			}
		}
	}
	ids, tokens := walk("mallory")
	leaks("mallory", tokens)
	if len(ids) != 0 || len(tokens) != 0 {
		t.Errorf("mallory, in no session: %d sessions over %d pages with a token; want one empty last page", len(ids), len(tokens))
	}
	ids, tokens = walk("alice")
	leaks("alice", tokens)
	if len(ids) != len(alices) || len(tokens) != len(alices)-1 {
		t.Errorf("alice: %q over %d pages with a token, want her %d sessions, one a page", ids, len(tokens), len(alices))
	}
	for _, sid := range ids {
		if !strings.Contains(strings.Join(alices, " "), sid) {
			t.Errorf("alice was shown session %s, not hers", sid)
		}
	}
}

// TestMACPRebuildBindsTheSessionsPolicy: a session bound to a registered
// governance policy, evicted from Warden's table (--sessions 1), is rebuilt
// from the real runtime with the definition it bound, as the runtime keeps
// it. Before, the rebuild fetched the policy as registered now: once it was
// unregistered every message of the session got UNAVAILABLE, and once an
// outsider registered other rules under the same id, the initiator's valid
// Commitment was refused. After a restart Warden holds no record of the
// binding: it says so (UNKNOWN_POLICY_VERSION, "bound governance policy"),
// where it used to decide on the outsider's rules.
func TestMACPRebuildBindsTheSessionsPolicy(t *testing.T) {
	direct := startRuntime(t)
	addr, proc := startWardenProcess(t, direct, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1")
	c := dialMACP(t, addr)
	client := func(c macpClient) macpv1.MACPRuntimeServiceClient { return macpv1.NewMACPRuntimeServiceClient(c.conn) }
	register := func(c macpClient, who, id, rules string) {
		t.Helper()
		ctx, cancel := as(who)
		defer cancel()
		resp, err := client(c).RegisterPolicy(ctx, &macpv1.RegisterPolicyRequest{PolicyDescriptor: &macpv1.PolicyDescriptor{
			PolicyId: id, Mode: taskMode, Description: "test", Rules: rules, SchemaVersion: 1}})
		if err != nil || !resp.GetOk() {
			t.Fatalf("register %s as %s: %v %s", id, who, err, resp.GetError())
		}
	}
	unregister := func(c macpClient, who, id string) {
		t.Helper()
		ctx, cancel := as(who)
		defer cancel()
		resp, err := client(c).UnregisterPolicy(ctx, &macpv1.UnregisterPolicyRequest{PolicyId: id})
		if err != nil || !resp.GetOk() {
			t.Fatalf("unregister %s as %s: %v %s", id, who, err, resp.GetError())
		}
	}
	accepted := func(c macpClient, policy string) string {
		t.Helper()
		sid := newSession()
		c.mustAccept(envelope("planner", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
			ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, PolicyVersion: policy}))
		c.mustAccept(envelope("planner", sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}))
		c.mustAccept(envelope("worker", sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
		return sid
	}
	complete := func(c macpClient, sid string) {
		t.Helper()
		c.mustAccept(envelope("worker", sid, "TaskComplete", "", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker", Summary: "done"}))
	}
	evict := func(c macpClient) { // a session of someone else takes the one slot
		c.mustAccept(envelope("other", newSession(), "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"other", "x"},
			ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000}))
	}
	commit := func(c macpClient, sid string) (*macpv1.Ack, error) {
		return c.sendOn(macpService+"Send", envelope("planner", sid, "Commitment", "", &macpv1.CommitmentPayload{CommitmentId: "c1",
			Action: "task.completed", AuthorityScope: "test", Reason: "done", OutcomePositive: true, ModeVersion: "1.0.0", ConfigurationVersion: "c"}))
	}
	const initiatorOnly, mallorysOnly = `{"commitment":{"authority":"initiator_only"}}`, `{"commitment":{"authority":"designated_role","designated_roles":["mallory"]}}`

	register(c, "planner", "policy.gone", initiatorOnly)
	gone := accepted(c, "policy.gone")
	complete(c, gone)
	unregister(c, "planner", "policy.gone")
	evict(c)
	if ack, err := commit(c, gone); err != nil || !ack.GetOk() {
		t.Errorf("the initiator's Commitment, its policy unregistered since the start: %v %s %s; the runtime accepts it", err, ack.GetError().GetCode(), ack.GetError().GetMessage())
	}

	register(c, "planner", "policy.taken", initiatorOnly)
	taken := accepted(c, "policy.taken")
	complete(c, taken)
	unregister(c, "mallory", "policy.taken")
	register(c, "mallory", "policy.taken", mallorysOnly)
	evict(c)
	if ack, err := commit(c, taken); err != nil || !ack.GetOk() {
		t.Errorf("the initiator's Commitment, its policy id re-registered by mallory: %v %s %s; the runtime accepts it", err, ack.GetError().GetCode(), ack.GetError().GetMessage())
	}

	register(c, "planner", "policy.restart", initiatorOnly)
	restarted := accepted(c, "policy.restart")
	unregister(c, "mallory", "policy.restart")
	register(c, "mallory", "policy.restart", mallorysOnly)
	proc.stop()
	c = dialMACP(t, startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth"))
	complete(c, restarted) // what does not read the policy is decided as before
	ack, err := commit(c, restarted)
	if err != nil || ack.GetError().GetCode() != "UNKNOWN_POLICY_VERSION" || !strings.Contains(ack.GetError().GetMessage(), "bound governance policy") {
		t.Errorf("after a restart, the Commitment of a session whose policy id was re-registered: %v ok=%v %s %s; want UNKNOWN_POLICY_VERSION saying the bound definition is not known",
			err, ack.GetOk(), ack.GetError().GetCode(), ack.GetError().GetMessage())
	}
}

// TestMACPResumeAfterRestart: a session suspended with max_suspend_ms, then
// rebuilt by a restarted Warden, is resumed as the runtime resumes it. The
// runtime shows no suspension time (its history leaves SessionSuspend out,
// GetSession has no such field); Warden took the session as suspended since
// its last message and refused, as past max_suspend_ms, a Resume the runtime
// accepted.
func TestMACPResumeAfterRestart(t *testing.T) {
	direct := startRuntime(t)
	first, proc := startWardenProcess(t, direct, "--auth", "dev", "--insecure-dev-auth")
	c := dialMACP(t, first)
	sid := newSession()
	const maxSuspend = 4 * time.Second
	c.mustAccept(envelope("planner", sid, "SessionStart", "", &macpv1.SessionStartPayload{Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, MaxSuspendMs: maxSuspend.Milliseconds()}))
	c.mustAccept(envelope("planner", sid, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "worker"}))
	last := time.Now()
	time.Sleep(3 * time.Second)
	control := func(c macpClient, op string) error {
		ctx, cancel := as("planner")
		defer cancel()
		var resp macpv1.SuspendSessionResponse
		return c.conn.Invoke(ctx, macpService+op, &macpv1.SuspendSessionRequest{SessionId: sid, Reason: "test"}, &resp)
	}
	if err := control(c, "SuspendSession"); err != nil {
		t.Fatal(err)
	}
	suspended := time.Now()
	proc.stop()
	c = dialMACP(t, startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth"))
	time.Sleep(time.Until(last.Add(maxSuspend + 500*time.Millisecond))) // past the cap counted from the last message
	if since := time.Since(suspended); since > maxSuspend-time.Second {
		t.Skipf("the restart took too long: %v suspended already", since)
	}
	if err := control(c, "ResumeSession"); err != nil {
		t.Errorf("Resume %v after the suspension (max_suspend_ms %v), through a restarted Warden: %v; the runtime accepts it",
			time.Since(suspended).Round(time.Millisecond), maxSuspend, err)
	}
	c.mustAccept(envelope("worker", sid, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
	if status.Code(control(c, "ResumeSession")) != codes.FailedPrecondition {
		t.Error("a second Resume of an open session was not refused")
	}
}
