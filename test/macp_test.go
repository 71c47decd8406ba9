package test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

const (
	taskMode    = "macp.mode.task.v1"
	handoffMode = "macp.mode.handoff.v1"
)

var shortMode = map[string]string{taskMode: "task", handoffMode: "handoff"}

func sessionStart(as, session, mode string, participants ...string) step {
	return step{"as": as, "session": session, "mode": mode, "type": "SessionStart", "payload_type": "SessionStart",
		"payload": map[string]any{"intent": "test", "participants": participants, "mode_version": "1.0.0", "configuration_version": "cfg-1", "ttl_ms": 60000}}
}

func msg(as, session, mode, typ string, payload map[string]any) step {
	return step{"as": as, "session": session, "mode": mode, "type": typ, "payload_type": shortMode[mode] + "." + typ, "payload": payload}
}

func commitment(as, session, mode, action string, positive bool) step {
	return step{"as": as, "session": session, "mode": mode, "type": "Commitment", "payload_type": "Commitment",
		"payload": map[string]any{"commitment_id": "c1", "action": action, "authority_scope": "test", "reason": "done",
			"mode_version": "1.0.0", "configuration_version": "cfg-1", "outcome_positive": positive}}
}

// The sessions of the seeds: a task delegated and completed, and a handoff
// declined by one target and accepted by another.
func taskSession(s string) []step {
	return []step{
		sessionStart("planner", s, taskMode, "planner", "worker", "reviewer"),
		msg("planner", s, taskMode, "TaskRequest", map[string]any{"task_id": "t1", "title": "Q4", "instructions": "analyze", "requested_assignee": "worker"}),
		msg("worker", s, taskMode, "TaskAccept", map[string]any{"task_id": "t1", "assignee": "worker"}),
		msg("worker", s, taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "status": "running", "progress": 0.5}),
		msg("worker", s, taskMode, "TaskComplete", map[string]any{"task_id": "t1", "assignee": "worker", "summary": "done"}),
		commitment("planner", s, taskMode, "task.completed", true),
	}
}

func handoffSession(s string) []step {
	return []step{
		sessionStart("triage", s, handoffMode, "triage", "billing", "payments"),
		msg("triage", s, handoffMode, "HandoffOffer", map[string]any{"handoff_id": "h1", "target_participant": "billing", "scope": "refund"}),
		msg("triage", s, handoffMode, "HandoffContext", map[string]any{"handoff_id": "h1", "content_type": "text/plain"}),
		msg("billing", s, handoffMode, "HandoffDecline", map[string]any{"handoff_id": "h1", "declined_by": "billing", "reason": "busy"}),
		msg("triage", s, handoffMode, "HandoffOffer", map[string]any{"handoff_id": "h2", "target_participant": "payments", "scope": "refund"}),
		msg("payments", s, handoffMode, "HandoffAccept", map[string]any{"handoff_id": "h2", "accepted_by": "payments"}),
		commitment("triage", s, handoffMode, "handoff.accepted", true),
	}
}

// attack is a session brought into a state, then one forbidden message.
type attack struct {
	name  string
	setup []step
	bad   step
	code  string // what Warden answers, the code the runtime uses for such refusals
}

func attacks() []attack {
	s := "S"
	task := taskSession(s)
	accepted := task[:3]
	failed := append(slices.Clone(accepted), msg("worker", s, taskMode, "TaskFail", map[string]any{"task_id": "t1", "assignee": "worker", "error_code": "E", "reason": "broke"}))
	offered := handoffSession(s)[:2]
	declined := handoffSession(s)[:4]
	return []attack{
		{"TaskComplete from a participant who is not the assignee", accepted,
			msg("reviewer", s, taskMode, "TaskComplete", map[string]any{"task_id": "t1", "summary": "forged"}), "FORBIDDEN"},
		{"TaskFail from a participant who is not the assignee", accepted,
			msg("reviewer", s, taskMode, "TaskFail", map[string]any{"task_id": "t1", "error_code": "E", "reason": "forged"}), "FORBIDDEN"},
		{"TaskUpdate from the requester", accepted,
			msg("planner", s, taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 0.9}), "FORBIDDEN"},
		{"HandoffAccept from a participant who is not the target", offered,
			msg("payments", s, handoffMode, "HandoffAccept", map[string]any{"handoff_id": "h1", "accepted_by": "payments"}), "FORBIDDEN"},
		{"envelope sender differs from the token", accepted,
			func() step {
				st := msg("reviewer", s, taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 0.9})
				st["sender"] = "worker"
				return st
			}(), "UNAUTHENTICATED"},
		{"positive commitment after TaskFail", failed,
			commitment("planner", s, taskMode, "task.completed", true), "POLICY_DENIED"},
		{"re-offer to the target that declined", declined,
			msg("triage", s, handoffMode, "HandoffOffer", map[string]any{"handoff_id": "h3", "target_participant": "billing", "scope": "refund"}), "INVALID_ENVELOPE"},
		{"duplicate message_id from another sender",
			append(slices.Clone(accepted), func() step {
				st := msg("worker", s, taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 0.2})
				st["message_id"] = "fixed-id-1"
				return st
			}()),
			func() step {
				st := msg("reviewer", s, taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 0.3})
				st["message_id"] = "fixed-id-1"
				return st
			}(), "DUPLICATE_MESSAGE"},
	}
}

// runAttacks replays every attack direct and through Warden: Warden must
// refuse each with its code, and accept the honest setup.
func runAttacks(t *testing.T, direct, warden string, tokens map[string]string) {
	var table strings.Builder
	table.WriteString("| attack | runtime alone | with Warden |\n|---|---|---|\n")
	for _, a := range attacks() {
		steps := append(slices.Clone(a.setup), a.bad)
		d := drive(t, direct, tokens, steps)
		w := drive(t, warden, tokens, steps)
		for i := range a.setup {
			if !w[i].OK {
				t.Errorf("%s: honest step %d refused through Warden: %s %s", a.name, i, w[i].Code, w[i].Message)
			}
		}
		got := w[len(steps)-1]
		if got.OK || got.Code != a.code {
			t.Errorf("%s: through Warden ok=%v code=%s (%s), want refused with %s", a.name, got.OK, got.Code, got.Message, a.code)
		}
		alone := d[len(steps)-1]
		direct := "accepted"
		if !alone.OK {
			direct = "refused " + alone.Code
		} else if alone.Duplicate {
			direct = "accepted (as a duplicate)"
		}
		table.WriteString("| " + a.name + " | " + direct + " | refused " + got.Code + " |\n")
	}
	t.Logf("attacks:\n%s", table.String())
}

func checkAllOK(t *testing.T, name string, res []result) {
	t.Helper()
	for _, r := range res {
		if !r.OK {
			t.Errorf("%s: step %d refused: %s %s", name, r.I, r.Code, r.Message)
		}
	}
}

// TestMACPDevAuth runs the seeds' sessions and the attacks against the real
// runtime in its dev-auth mode (MACP_ALLOW_INSECURE=1), direct and through
// Warden.
func TestMACPDevAuth(t *testing.T) { eachTransport(t, testMACPDevAuth) }

func testMACPDevAuth(t *testing.T) {
	direct := startRuntime(t)
	adminAddr := freeAddr(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--admin-listen", adminAddr)
	for name, steps := range map[string][]step{"task": taskSession("T"), "handoff": handoffSession("H")} {
		checkAllOK(t, name+" direct", drive(t, direct, nil, steps))
		checkAllOK(t, name+" through Warden", drive(t, warden, nil, steps))
	}
	runAttacks(t, direct, warden, nil)

	// Listing: an agent sees only the sessions it takes part in.
	list := []step{
		sessionStart("planner", "A", taskMode, "planner", "worker"),
		sessionStart("other", "B", taskMode, "other", "third"),
		{"as": "planner", "op": "ListSessions"},
		{"as": "stranger", "op": "ListSessions"},
	}
	d := drive(t, direct, nil, list)
	w := drive(t, warden, nil, list)
	t.Logf("ListSessions by planner: runtime alone %v, with Warden %v; by a stranger: runtime alone %v, with Warden %v",
		d[2].Sessions, w[2].Sessions, d[3].Sessions, w[3].Sessions)
	if !slices.Equal(w[2].Sessions, []string{"A"}) || len(w[3].Sessions) != 0 {
		t.Errorf("through Warden: planner lists %v (want [A]), stranger lists %v (want none)", w[2].Sessions, w[3].Sessions)
	}

	// Subscribing to a session's history: participants only.
	sub := []step{
		sessionStart("planner", "W", taskMode, "planner", "worker"),
		msg("planner", "W", taskMode, "TaskRequest", map[string]any{"task_id": "t1", "title": "secret", "requested_assignee": "worker"}),
		{"as": "worker", "op": "subscribe", "session": "W"},
		{"as": "stranger", "op": "subscribe", "session": "W"},
	}
	d = drive(t, direct, nil, sub)
	w = drive(t, warden, nil, sub)
	t.Logf("subscribe by a stranger: runtime alone ok=%v received %d envelopes %s; with Warden ok=%v received %d %s",
		d[3].OK, d[3].Received, d[3].Code, w[3].OK, w[3].Received, w[3].Code)
	if !w[2].OK || w[2].Received < 2 {
		t.Errorf("participant's subscription through Warden: ok=%v received %d, want the 2 accepted envelopes", w[2].OK, w[2].Received)
	}
	if w[3].OK || w[3].Received != 0 || w[3].Code != "FORBIDDEN" {
		t.Errorf("stranger's subscription through Warden: ok=%v received %d %s, want FORBIDDEN and nothing", w[3].OK, w[3].Received, w[3].Code)
	}

	// A policy registered with the runtime before (or without) Warden: Warden
	// fetches it when a session binds it, and its governance applies.
	reg := []step{{"as": "planner", "op": "RegisterPolicy", "policy_id": "policy.test.require-output", "policy_mode": taskMode,
		"rules": map[string]any{"completion": map[string]any{"require_output": true}}}}
	checkAllOK(t, "register the policy with the runtime", drive(t, direct, nil, reg))
	bound := sessionStart("planner", "P", taskMode, "planner", "worker")
	bound["payload"].(map[string]any)["policy_version"] = "policy.test.require-output"
	noOutput := []step{bound,
		msg("planner", "P", taskMode, "TaskRequest", map[string]any{"task_id": "t1", "requested_assignee": "worker"}),
		msg("worker", "P", taskMode, "TaskAccept", map[string]any{"task_id": "t1", "assignee": "worker"}),
		msg("worker", "P", taskMode, "TaskComplete", map[string]any{"task_id": "t1", "assignee": "worker", "summary": "no output"}),
		commitment("planner", "P", taskMode, "task.completed", true),
	}
	d = drive(t, direct, nil, noOutput)
	w = drive(t, warden, nil, noOutput)
	t.Logf("commitment without output under require_output: runtime alone ok=%v %s, with Warden ok=%v %s", d[4].OK, d[4].Code, w[4].OK, w[4].Code)
	checkAllOK(t, "session bound to a runtime-registered policy, through Warden", w[:4])
	if w[4].OK || w[4].Code != "POLICY_DENIED" {
		t.Errorf("through Warden: commitment without output ok=%v %s, want POLICY_DENIED", w[4].OK, w[4].Code)
	}

	// Control RPCs follow the commitment authority (the initiator by default).
	control := []step{
		sessionStart("planner", "C", taskMode, "planner", "worker"),
		{"as": "worker", "op": "CancelSession", "session": "C"},
		{"as": "planner", "op": "CancelSession", "session": "C"},
	}
	d = drive(t, direct, nil, control)
	w = drive(t, warden, nil, control)
	t.Logf("CancelSession by a participant: runtime alone ok=%v %s, with Warden ok=%v %s", d[1].OK, d[1].Code, w[1].OK, w[1].Code)
	if w[1].OK || w[1].Code != d[1].Code || !w[2].OK {
		t.Errorf("through Warden: cancel by the worker ok=%v %s (want %s, as the runtime answers), by the planner ok=%v %s", w[1].OK, w[1].Code, d[1].Code, w[2].OK, w[2].Code)
	}

	// Discovery needs credentials through Warden (the runtime answers anyone).
	for name, target := range map[string]string{"direct": direct, "warden": warden} {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = macpv1.NewMACPRuntimeServiceClient(conn).ListModes(context.Background(), &macpv1.ListModesRequest{})
		conn.Close()
		t.Logf("ListModes without credentials, %s: %v", name, status.Code(err))
		if name == "warden" && status.Code(err) != codes.Unauthenticated {
			t.Errorf("ListModes without credentials through Warden: %v, want Unauthenticated", err)
		}
	}

	// The admin port.
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/readyz":  "ready",
		"/metrics": `warden_decisions_total{auth_reason="",decision="deny",message_type="TaskComplete",mode="macp.mode.task.v1",protocol="macp",reason="sender_not_authorized"}`,
	} {
		body, code := httpGet(t, "http://"+adminAddr+path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, body lacks %q:\n%.2000s", path, code, want, body)
		}
	}
}

func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// TestMACPStaticTokens runs the runtime and Warden on the same static token
// file.
func TestMACPStaticTokens(t *testing.T) { eachTransport(t, testMACPStaticTokens) }

func testMACPStaticTokens(t *testing.T) {
	agents := []string{"planner", "worker", "reviewer", "triage", "billing", "payments"}
	tokens := map[string]string{}
	var file []map[string]any
	for _, a := range agents {
		tokens[a] = "tok-" + a + "-3f9a"
		file = append(file, map[string]any{"token": tokens[a], "sender": a, "can_start_sessions": true})
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	direct := startRuntime(t, "MACP_AUTH_TOKENS_FILE="+path)
	warden := startWarden(t, direct, "--auth", "static", "--static-tokens", path)
	checkAllOK(t, "task direct", drive(t, direct, tokens, taskSession("T")))
	checkAllOK(t, "task through Warden", drive(t, warden, tokens, taskSession("T")))
	runAttacks(t, direct, warden, tokens)
}

// TestMACPRebuild checks that state Warden does not hold is rebuilt from the
// runtime, never guessed at: with a one-entry session table two interleaved
// sessions get the same decisions as direct, and a restarted Warden still
// refuses a forged completion in a session it never saw.
func TestMACPRebuild(t *testing.T) { eachTransport(t, testMACPRebuild) }

func testMACPRebuild(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth", "--sessions", "1")
	a, b := taskSession("A"), taskSession("B")
	var interleaved []step
	for i := range a {
		interleaved = append(interleaved, a[i], b[i])
		if i == 3 { // both sessions running: forgeries in each, after the other evicted it
			interleaved = append(interleaved,
				msg("reviewer", "A", taskMode, "TaskComplete", map[string]any{"task_id": "t1", "summary": "forged"}),
				msg("planner", "B", taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 1}))
		}
	}
	d := drive(t, direct, nil, interleaved)
	w := drive(t, warden, nil, interleaved)
	for i := range interleaved {
		if d[i].OK != w[i].OK || d[i].Code != w[i].Code {
			t.Errorf("step %d (%s %s): direct ok=%v %s, through Warden ok=%v %s (%s)", i, interleaved[i]["as"], interleaved[i]["type"], d[i].OK, d[i].Code, w[i].OK, w[i].Code, w[i].Message)
		}
	}

	// Restart: the first half through one Warden, the rest through a new one.
	first, proc := startWardenProcess(t, direct, "--auth", "dev", "--insecure-dev-auth")
	id := "6b1f0c9e-2d4a-4f6b-9c1e-3a5d7e9f1b2c"
	r := taskSession(id)
	checkAllOK(t, "before the restart", drive(t, first, nil, r[:3]))
	proc.stop()
	second := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth")
	after := drive(t, second, nil, []step{
		msg("reviewer", id, taskMode, "TaskComplete", map[string]any{"task_id": "t1", "summary": "forged"}),
		r[4], r[5],
	})
	if after[0].OK || after[0].Code != "FORBIDDEN" {
		t.Errorf("forged completion after a restart: ok=%v %s (%s), want FORBIDDEN", after[0].OK, after[0].Code, after[0].Message)
	}
	checkAllOK(t, "honest completion after the restart", after[1:])
}

// TestMACPStreamSession sends on StreamSession with the SDK's MacpStream:
// refusals come back inline and the stream stays open; accepted envelopes
// the runtime echoes commit Warden's state.
func TestMACPStreamSession(t *testing.T) { eachTransport(t, testMACPStreamSession) }

func testMACPStreamSession(t *testing.T) {
	direct := startRuntime(t)
	warden := startWarden(t, direct, "--auth", "dev", "--insecure-dev-auth")
	streamed := func(as string, msgs ...step) step {
		var ms []map[string]any
		for _, m := range msgs {
			ms = append(ms, map[string]any{"mode": m["mode"], "type": m["type"], "payload_type": m["payload_type"], "payload": m["payload"]})
		}
		return step{"as": as, "op": "stream", "session": "S", "messages": ms}
	}
	s := taskSession("S")
	steps := []step{s[0], s[1], s[2],
		streamed("reviewer", msg("reviewer", "S", taskMode, "TaskComplete", map[string]any{"task_id": "t1", "summary": "forged"})),
		streamed("worker",
			msg("worker", "S", taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 0.5}),
			msg("planner", "S", taskMode, "TaskUpdate", map[string]any{"task_id": "t1", "progress": 0.6}), // sender is the stream's identity: accepted
			msg("worker", "S", taskMode, "TaskComplete", map[string]any{"task_id": "t1", "assignee": "worker", "summary": "done"})),
		s[5], // the planner's commitment, via Send: needs the streamed completion committed
	}
	for name, target := range map[string]string{"direct": direct, "through Warden": warden} {
		res := drive(t, target, nil, steps)
		t.Logf("%s: reviewer stream %+v; worker stream %+v; commitment ok=%v %s", name, res[3].Results, res[4].Results, res[5].OK, res[5].Code)
		if name == "direct" {
			continue
		}
		if r := res[3].Results; len(r) != 1 || r[0].OK || r[0].Code != "FORBIDDEN" {
			t.Errorf("forged TaskComplete on a stream through Warden: %+v, want an inline FORBIDDEN", r)
		}
		for _, r := range res[4].Results {
			if !r.OK {
				t.Errorf("worker's %s on a stream through Warden refused: %s", r.Type, r.Code)
			}
		}
		if !res[5].OK {
			t.Errorf("commitment after a streamed completion: %s %s", res[5].Code, res[5].Message)
		}
	}
}
