package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The A2A attack table (issue 15): what a second tenant (bob) can do to the
// first tenant's (alice's) tasks, contexts and push configs, what anyone can
// do with webhook URLs and the extended card, and what ids reveal. Each
// attack builds alice's state itself over the same JSON-RPC endpoint, so the
// table runs unchanged against the a2a-go v2.3.1 server direct and against
// Warden in front of it: runA2AAttacks(t, rpcURL, wantOutcomes).

// a2aOutcome is how an attack ended.
type a2aOutcome string

const (
	// a2aSucceeds: the attacker read, changed or used what was not theirs.
	a2aSucceeds a2aOutcome = "succeeds"
	// a2aRefused: refused, and (where the attack names an id) with exactly
	// the answer a made-up id gets.
	a2aRefused a2aOutcome = "refused"
	// a2aRefusedLeaky: refused, but the answer differs from a made-up id's,
	// so it tells the attacker the id exists.
	a2aRefusedLeaky a2aOutcome = "refused, unlike a made-up id"
)

// a2aAttack is one row of the table. run returns whether the attack
// achieved its aim, the answer it got and, for an attack that names an id,
// the answer to the same request with a made-up id instead.
type a2aAttack struct {
	name, what string
	run        func(t testing.TB, e *a2aAttackEnv) (ok bool, answer, madeUp *a2aAnswer)
}

// a2aAttackEnv is the endpoint under attack and its two tenants.
type a2aAttackEnv struct {
	rpc  string // the JSON-RPC endpoint
	hook *hookRecorder
}

const (
	aliceToken = "tok-alice"
	bobToken   = "tok-bob"
	// aliceSecret is in alice's tasks and push credentials only.
	aliceSecret = "alice-private-7f3a"
)

// a2aAnswer is one JSON-RPC answer (the first SSE event for a stream).
type a2aAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

func (a *a2aAnswer) String() string { return a.raw }

// sameAsMadeUp: the same error code and message (the error data of a2a-go
// carries a timestamp and is not compared).
func (a *a2aAnswer) sameAsMadeUp(m *a2aAnswer) bool {
	if a.Error == nil || m.Error == nil {
		return a.Error == nil && m.Error == nil && string(a.Result) == string(m.Result)
	}
	return *a.Error == *m.Error
}

// call sends one JSON-RPC request with token ("" for none) and returns the
// answer: the body, or the first event of an SSE stream. Bounded to 10 s.
func (e *a2aAttackEnv) call(t testing.TB, token, method string, params any) *a2aAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.rpc, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var raw []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				raw = []byte(strings.TrimSpace(d))
				break
			}
		}
	} else {
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		raw = b.Bytes()
	}
	a := &a2aAnswer{raw: string(raw)}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, a); err != nil {
			t.Fatalf("%s: HTTP %d, not JSON-RPC: %q", method, resp.StatusCode, raw)
		}
	} else if resp.StatusCode != http.StatusOK {
		a.raw = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return a
}

// a2aTask is the part of a task the attacks use.
type a2aTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

func a2aMessage(text string, fields map[string]any) map[string]any {
	m := map[string]any{"messageId": madeUpID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// send sends a message as token and returns the task it made or continued.
func (e *a2aAttackEnv) send(t testing.TB, token, text string, fields map[string]any, immediately bool) (a2aTask, *a2aAnswer) {
	t.Helper()
	params := map[string]any{"message": a2aMessage(text, fields)}
	if immediately {
		params["configuration"] = map[string]any{"returnImmediately": true}
	}
	a := e.call(t, token, "SendMessage", params)
	var r struct {
		Task a2aTask `json:"task"`
	}
	if a.Error == nil {
		_ = json.Unmarshal(a.Result, &r)
	}
	return r.Task, a
}

// victim makes one task of alice's ("input ...": input-required; "wait":
// working until cancelled; anything else: completed) holding aliceSecret.
func (e *a2aAttackEnv) victim(t testing.TB, text string) a2aTask {
	t.Helper()
	task, a := e.send(t, aliceToken, text, nil, text == "wait")
	if task.ID == "" {
		t.Fatalf("alice's %q task was not created: %s", text, a)
	}
	return task
}

// alicePush gives alice's task a push config with credentials.
func (e *a2aAttackEnv) alicePush(t testing.TB, taskID string) string {
	t.Helper()
	a := e.call(t, aliceToken, "CreateTaskPushNotificationConfig", map[string]any{
		"taskId": taskID, "url": e.aliceHook(), "token": aliceSecret + "-token",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": aliceSecret},
	})
	var cfg struct {
		ID string `json:"id"`
	}
	if a.Error != nil || json.Unmarshal(a.Result, &cfg) != nil || cfg.ID == "" {
		t.Fatalf("alice's push config was not created: %s", a)
	}
	return cfg.ID
}

// aliceHook is alice's webhook: the recorder named "localhost", the way an
// operator names an internal receiver it allows (Warden's
// --a2a-webhook-allow localhost), while bob's attacks spell it 127.0.0.1.
func (e *a2aAttackEnv) aliceHook() string {
	return strings.Replace(e.hook.url, "//127.0.0.1:", "//localhost:", 1)
}

func madeUpID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x70 // the UUIDv7 shape a2a-go's ids have
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func contains(a *a2aAnswer, s string) bool {
	return a.Error == nil && strings.Contains(string(a.Result), s)
}

// a2aAttacks is the table. Alice's tasks carry aliceSecret in their text.
var a2aAttacks = []a2aAttack{
	{"get-task", "bob reads alice's task (GetTask)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "input "+aliceSecret)
		a := e.call(t, bobToken, "GetTask", map[string]any{"id": v.ID})
		return contains(a, aliceSecret), a, e.call(t, bobToken, "GetTask", map[string]any{"id": madeUpID()})
	}},
	{"cancel-task", "bob cancels alice's working task (CancelTask)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "wait")
		a := e.call(t, bobToken, "CancelTask", map[string]any{"id": v.ID})
		after := e.call(t, aliceToken, "GetTask", map[string]any{"id": v.ID})
		return contains(after, "TASK_STATE_CANCELED"), a, e.call(t, bobToken, "CancelTask", map[string]any{"id": madeUpID()})
	}},
	{"continue-task", "bob answers alice's input-required task (SendMessage with her taskId)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "input name")
		_, a := e.send(t, bobToken, "mallory", map[string]any{"taskId": v.ID}, false)
		_, m := e.send(t, bobToken, "mallory", map[string]any{"taskId": madeUpID()}, false)
		return contains(a, "answer: mallory"), a, m
	}},
	{"continue-context", "bob adds a task to alice's context (SendMessage with her contextId)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "hello "+aliceSecret)
		task, a := e.send(t, bobToken, "hello", map[string]any{"contextId": v.ContextID}, false)
		_, m := e.send(t, bobToken, "hello", map[string]any{"contextId": madeUpID()}, false)
		return task.ContextID == v.ContextID, a, m
	}},
	{"subscribe", "bob follows alice's working task (SubscribeToTask)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "wait")
		a := e.call(t, bobToken, "SubscribeToTask", map[string]any{"id": v.ID})
		return contains(a, v.ID), a, e.call(t, bobToken, "SubscribeToTask", map[string]any{"id": madeUpID()})
	}},
	{"push-create", "bob registers his webhook on alice's task and receives her updates", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "input name")
		marker := "bob-hook-" + madeUpID()
		params := func(id string) map[string]any {
			return map[string]any{"taskId": id, "url": e.hook.url + "?" + marker, "token": marker}
		}
		a := e.call(t, bobToken, "CreateTaskPushNotificationConfig", params(v.ID))
		e.send(t, aliceToken, aliceSecret, map[string]any{"taskId": v.ID}, false)
		return e.pushedTo(marker, v.ID), a, e.call(t, bobToken, "CreateTaskPushNotificationConfig", params(madeUpID()))
	}},
	{"push-get", "bob reads alice's push config and its credentials (GetTaskPushNotificationConfig)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "input name")
		id := e.alicePush(t, v.ID)
		a := e.call(t, bobToken, "GetTaskPushNotificationConfig", map[string]any{"taskId": v.ID, "id": id})
		return contains(a, aliceSecret), a, e.call(t, bobToken, "GetTaskPushNotificationConfig", map[string]any{"taskId": madeUpID(), "id": id})
	}},
	{"push-list", "bob lists alice's push configs with credentials (ListTaskPushNotificationConfigs)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "input name")
		e.alicePush(t, v.ID)
		a := e.call(t, bobToken, "ListTaskPushNotificationConfigs", map[string]any{"taskId": v.ID})
		return contains(a, aliceSecret), a, e.call(t, bobToken, "ListTaskPushNotificationConfigs", map[string]any{"taskId": madeUpID()})
	}},
	{"push-delete", "bob deletes alice's push config (DeleteTaskPushNotificationConfig)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "input name")
		id := e.alicePush(t, v.ID)
		a := e.call(t, bobToken, "DeleteTaskPushNotificationConfig", map[string]any{"taskId": v.ID, "id": id})
		left := e.call(t, aliceToken, "ListTaskPushNotificationConfigs", map[string]any{"taskId": v.ID})
		return !contains(left, id), a, e.call(t, bobToken, "DeleteTaskPushNotificationConfig", map[string]any{"taskId": madeUpID(), "id": id})
	}},
	{"reference-task", "bob names alice's task in referenceTaskIds and the agent reads it to him", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "hello "+aliceSecret)
		_, a := e.send(t, bobToken, "summarise", map[string]any{"referenceTaskIds": []string{v.ID}}, false)
		_, m := e.send(t, bobToken, "summarise", map[string]any{"referenceTaskIds": []string{madeUpID()}}, false)
		return contains(a, aliceSecret), a, m
	}},
	{"list-tasks", "bob lists tasks and sees alice's (ListTasks)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "hello "+aliceSecret)
		a := e.call(t, bobToken, "ListTasks", map[string]any{})
		return contains(a, v.ID), a, nil
	}},
	{"webhook-loopback", "bob's webhook on 127.0.0.1 is accepted and called (SSRF)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		own, _ := e.send(t, bobToken, "input name", nil, false)
		marker := "loopback-" + madeUpID()
		a := e.call(t, bobToken, "CreateTaskPushNotificationConfig", map[string]any{"taskId": own.ID, "url": e.hook.url, "token": marker})
		e.send(t, bobToken, "done", map[string]any{"taskId": own.ID}, false)
		return e.pushedTo(marker, own.ID), a, nil
	}},
	// The private and link-local configs go on bob's completed task: no
	// more events, so the server never calls them during the test.
	{"webhook-private", "bob's webhook on 10.0.0.1 (private range) is accepted", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		own, _ := e.send(t, bobToken, "hello", nil, false)
		a := e.call(t, bobToken, "CreateTaskPushNotificationConfig", map[string]any{"taskId": own.ID, "url": "http://10.0.0.1:8080/hook"})
		return contains(a, "10.0.0.1"), a, nil
	}},
	{"webhook-link-local", "bob's webhook on 169.254.169.254 (cloud metadata) is accepted", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		own, _ := e.send(t, bobToken, "hello", nil, false)
		a := e.call(t, bobToken, "CreateTaskPushNotificationConfig", map[string]any{"taskId": own.ID, "url": "http://169.254.169.254/latest/meta-data/"})
		return contains(a, "169.254.169.254"), a, nil
	}},
	{"extended-card-anonymous", "an unauthenticated caller reads the extended agent card (GetExtendedAgentCard)", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		a := e.call(t, "", "GetExtendedAgentCard", map[string]any{})
		return contains(a, "internal-admin"), a, nil
	}},
	{"message-terminal-task", "bob sends a message to alice's completed task", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "hello "+aliceSecret)
		_, a := e.send(t, bobToken, "more", map[string]any{"taskId": v.ID}, false)
		_, m := e.send(t, bobToken, "more", map[string]any{"taskId": madeUpID()}, false)
		return a.Error == nil, a, m
	}},
	{"probe-cancel-terminal", "bob probes ids: CancelTask on alice's completed task", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		v := e.victim(t, "hello "+aliceSecret)
		a := e.call(t, bobToken, "CancelTask", map[string]any{"id": v.ID})
		return contains(a, v.ID), a, e.call(t, bobToken, "CancelTask", map[string]any{"id": madeUpID()})
	}},
}

// a2aDirectOutcomes is what each attack does to the a2a-go v2.3.1 server
// with no Warden in front (README "A2A peers").
var a2aDirectOutcomes = map[string]a2aOutcome{
	"get-task":                a2aSucceeds,
	"cancel-task":             a2aSucceeds,
	"continue-task":           a2aSucceeds,
	"continue-context":        a2aSucceeds,
	"subscribe":               a2aSucceeds,
	"push-create":             a2aSucceeds,
	"push-get":                a2aSucceeds,
	"push-list":               a2aSucceeds,
	"push-delete":             a2aSucceeds,
	"reference-task":          a2aSucceeds,
	"list-tasks":              a2aRefused,
	"webhook-loopback":        a2aSucceeds,
	"webhook-private":         a2aSucceeds,
	"webhook-link-local":      a2aSucceeds,
	"extended-card-anonymous": a2aSucceeds,
	"message-terminal-task":   a2aRefusedLeaky,
	"probe-cancel-terminal":   a2aRefusedLeaky,
}

// a2aSeen is one attack's outcome with the answers it was judged on.
type a2aSeen struct {
	outcome        a2aOutcome
	answer, madeUp *a2aAnswer
}

// runA2AAttacks runs the whole table against the JSON-RPC endpoint rpc (the
// a2a-go server's /jsonrpc, or Warden's listener in front of it; both must
// know the tokens tok-alice and tok-bob) and checks each outcome against
// want; it returns what each attack saw.
func runA2AAttacks(t *testing.T, rpc string, want map[string]a2aOutcome) map[string]a2aSeen {
	t.Helper()
	e := &a2aAttackEnv{rpc: rpc, hook: newHookRecorder(t)}
	seen := map[string]a2aSeen{}
	for _, at := range a2aAttacks {
		t.Run(at.name, func(t *testing.T) {
			ok, answer, madeUp := at.run(t, e)
			got := a2aRefused
			switch {
			case ok:
				got = a2aSucceeds
			case madeUp != nil && !answer.sameAsMadeUp(madeUp):
				got = a2aRefusedLeaky
			}
			seen[at.name] = a2aSeen{got, answer, madeUp}
			w, listed := want[at.name]
			if !listed {
				t.Fatalf("no expected outcome for %s", at.name)
			}
			if got != w {
				t.Errorf("%s (%s): %s, want %s\n answer  %s\n made-up %v", at.name, at.what, got, w, answer, madeUp)
			}
		})
	}
	return seen
}

// pushedTo reports whether a push carrying the notification token token and
// mentioning taskID reached the webhook within 3 s.
func (e *a2aAttackEnv) pushedTo(token, taskID string) bool {
	_, ok := e.hook.waitFor(3*time.Second, func(c hookCall) bool {
		return c.header.Get("A2A-Notification-Token") == token && strings.Contains(c.body, taskID)
	})
	return ok
}

// TestA2AAttacksDirect runs the attack table against the a2a-go v2.3.1 server
// with nothing in front: most attacks succeed (a2a-go checks the owner on
// ListTasks and on task creation only).
func TestA2AAttacksDirect(t *testing.T) {
	base := startA2AGo(t)
	seen := runA2AAttacks(t, base+"/jsonrpc", a2aDirectOutcomes)
	for _, at := range a2aAttacks {
		t.Logf("| %s | %s | %s |", at.name, at.what, seen[at.name].outcome)
		if seen[at.name].outcome == a2aRefusedLeaky {
			t.Logf("    answer %s\n    made-up %s", seen[at.name].answer, seen[at.name].madeUp)
		}
	}
}
