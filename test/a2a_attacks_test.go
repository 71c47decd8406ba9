package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"
)

// The A2A attack table (issue 15): what a second tenant (bob) can do to the
// first tenant's (alice's) tasks, contexts and push configs, what anyone can
// do with webhook URLs and the extended card, and what ids reveal. Each
// attack builds alice's state itself over the endpoint under attack, so the
// table runs unchanged against the a2a-go v2.3.1 server direct and against
// Warden in front of it: runA2AAttacks(t, rpcURL, wantOutcomes) over
// JSON-RPC, runA2AAttacksREST(t, restBase, wantOutcomes) over HTTP+JSON.

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

// a2aAttackEnv is the endpoint under attack.
type a2aAttackEnv struct {
	url  string // the JSON-RPC endpoint, or the REST base with rest
	rest bool   // the HTTP+JSON binding
	hook *hookRecorder
}

const (
	aliceToken = "tok-alice"
	bobToken   = "tok-bob"
	// aliceSecret is in alice's tasks and push credentials only.
	aliceSecret = "alice-private-7f3a"
)

// a2aAnswer is one answer: a JSON-RPC response, a REST body, or the first
// SSE event of a stream.
type a2aAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *a2aError       `json:"error"`
	raw    string
	named  []string // the ids the request named
}

// a2aError is a JSON-RPC error, or the google.rpc.Status error of the REST
// binding (its code is the HTTP status), or an HTTP status without either.
type a2aError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (a *a2aAnswer) String() string { return a.raw }

// sameAsMadeUp: both answered, or both failed with the same error code and
// message once the ids each request named are replaced by "<id>" (the error
// data of a2a-go carries a timestamp and is not compared).
func (a *a2aAnswer) sameAsMadeUp(m *a2aAnswer) bool {
	if a.Error == nil || m.Error == nil {
		return a.Error == nil && m.Error == nil
	}
	return a.Error.Code == m.Error.Code && a.errorMessage() == m.errorMessage()
}

func (a *a2aAnswer) errorMessage() string {
	msg := a.Error.Message
	for _, id := range a.named {
		if id != "" {
			msg = strings.ReplaceAll(msg, id, "<id>")
		}
	}
	return msg
}

// namedIDs are the task and context ids a request's params name.
func namedIDs(p map[string]any) []string {
	var ids []string
	for _, k := range []string{"id", "taskId", "contextId"} {
		if s, ok := p[k].(string); ok {
			ids = append(ids, s)
		}
	}
	if m, ok := p["message"].(map[string]any); ok {
		ids = append(ids, namedIDs(m)...)
		if refs, ok := m["referenceTaskIds"].([]string); ok {
			ids = append(ids, refs...)
		}
	}
	return ids
}

// call sends one A2A operation (its JSON-RPC method name and params) with
// token ("" for none) over the endpoint's binding and returns the answer:
// the body, or the first event of an SSE stream. Bounded to 10 s.
func (e *a2aAttackEnv) call(t testing.TB, token, method string, params map[string]any) *a2aAnswer {
	t.Helper()
	verb, url, payload := http.MethodPost, e.url, any(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if e.rest {
		verb, url, payload = restRoute(e.url, method, params)
	}
	var body io.Reader
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, verb, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
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
	} else if raw, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	a := &a2aAnswer{raw: fmt.Sprintf("HTTP %d %s", resp.StatusCode, raw), named: namedIDs(params)}
	switch {
	case e.rest && resp.StatusCode/100 == 2:
		// REST: the body is the result (empty for a delete).
		a.Result = json.RawMessage(raw)
	case len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, a) == nil && (a.Error != nil || a.Result != nil):
		// JSON-RPC, an SSE event, or a REST google.rpc.Status error.
	default:
		a.Result = nil
		a.Error = &a2aError{Code: resp.StatusCode, Message: string(raw)}
	}
	return a
}

// restRoute maps an operation onto the HTTP+JSON binding (spec §11).
func restRoute(base, method string, p map[string]any) (verb, url string, body any) {
	id := func(k string) string { s, _ := p[k].(string); return neturl.PathEscape(s) }
	switch method {
	case "SendMessage":
		return http.MethodPost, base + "/message:send", p
	case "SendStreamingMessage":
		return http.MethodPost, base + "/message:stream", p
	case "GetTask":
		return http.MethodGet, base + "/tasks/" + id("id"), nil
	case "ListTasks":
		return http.MethodGet, base + "/tasks", nil
	case "CancelTask":
		return http.MethodPost, base + "/tasks/" + id("id") + ":cancel", map[string]any{}
	case "SubscribeToTask":
		return http.MethodPost, base + "/tasks/" + id("id") + ":subscribe", nil
	case "CreateTaskPushNotificationConfig":
		return http.MethodPost, base + "/tasks/" + id("taskId") + "/pushNotificationConfigs", p
	case "GetTaskPushNotificationConfig":
		return http.MethodGet, base + "/tasks/" + id("taskId") + "/pushNotificationConfigs/" + id("id"), nil
	case "ListTaskPushNotificationConfigs":
		return http.MethodGet, base + "/tasks/" + id("taskId") + "/pushNotificationConfigs", nil
	case "DeleteTaskPushNotificationConfig":
		return http.MethodDelete, base + "/tasks/" + id("taskId") + "/pushNotificationConfigs/" + id("id"), nil
	case "GetExtendedAgentCard":
		return http.MethodGet, base + "/extendedAgentCard", nil
	}
	panic("restRoute: no route for " + method)
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

// madeUpContext is a made-up context handle: the shape of the one an
// attack names (through Warden, a contextId that is no handle is a context
// the client chooses, which A2A allows and which is the chooser's own).
func madeUpContext() string {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return "wt2." + base64.RawURLEncoding.EncodeToString(b)
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
		_, m := e.send(t, bobToken, "hello", map[string]any{"contextId": madeUpContext()}, false)
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
		return a.Error == nil && e.pushedTo(marker, v.ID), a, e.call(t, bobToken, "CreateTaskPushNotificationConfig", params(madeUpID()))
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
	{"agent-cites-task", "the agent cites alice's task in its answer to bob (referenceTaskIds of a status message) and bob reads it with the id he was given", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		e.victim(t, "input "+aliceSecret)
		_, a := e.send(t, bobToken, "related", nil, false)
		var r struct {
			Task struct {
				Status struct {
					Message struct {
						Refs []string `json:"referenceTaskIds"`
					} `json:"message"`
				} `json:"status"`
			} `json:"task"`
		}
		if a.Error != nil || json.Unmarshal(a.Result, &r) != nil || len(r.Task.Status.Message.Refs) == 0 {
			return false, a, nil // nothing handed over
		}
		g := e.call(t, bobToken, "GetTask", map[string]any{"id": r.Task.Status.Message.Refs[0]})
		return contains(g, aliceSecret), g, e.call(t, bobToken, "GetTask", map[string]any{"id": madeUpID()})
	}},
	{"agent-shares-context", "the agent answers bob with a message in alice's context (the a2a-go peer's agent 'join') and bob files a task into it with the id he was given", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		e.victim(t, "hello "+aliceSecret)
		a := e.call(t, bobToken, "SendMessage", map[string]any{"message": a2aMessage("join", nil)})
		var r struct {
			Message struct {
				ContextID string `json:"contextId"`
			} `json:"message"`
		}
		if a.Error != nil || json.Unmarshal(a.Result, &r) != nil || r.Message.ContextID == "" {
			_, m := e.send(t, bobToken, "hello", map[string]any{"contextId": madeUpContext()}, false)
			return false, a, m // nothing handed over
		}
		task, in := e.send(t, bobToken, "hello", map[string]any{"contextId": r.Message.ContextID}, false)
		_, m := e.send(t, bobToken, "hello", map[string]any{"contextId": madeUpContext()}, false)
		return task.ID != "" && task.ContextID == r.Message.ContextID, in, m
	}},
	{"agent-shares-context-in-flight", "while alice's blocking SendMessage naming no context is in flight (the a2a-go peer's agent 'wait 3'), the agent answers bob with a message in her context ('join'): bob files a task into it, or alice's own answer fails", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		done := make(chan *a2aAnswer, 1)
		go func() {
			var a *a2aAnswer
			defer func() { done <- a }() // also when call gives up
			a = e.call(t, aliceToken, "SendMessage", map[string]any{"message": a2aMessage("wait 3", nil)})
		}()
		time.Sleep(time.Second) // her task started: the agent's latest context is hers
		a := e.call(t, bobToken, "SendMessage", map[string]any{"message": a2aMessage("join", nil)})
		var r struct {
			Message struct {
				ContextID string `json:"contextId"`
			} `json:"message"`
		}
		filed, in := false, a
		if a.Error == nil && json.Unmarshal(a.Result, &r) == nil && r.Message.ContextID != "" {
			var task a2aTask
			task, in = e.send(t, bobToken, "hello", map[string]any{"contextId": r.Message.ContextID}, false)
			filed = task.ID != "" && task.ContextID == r.Message.ContextID
		}
		_, m := e.send(t, bobToken, "hello", map[string]any{"contextId": madeUpContext()}, false)
		var own struct {
			Task a2aTask `json:"task"`
		}
		alice := <-done
		lost := alice == nil || alice.Error != nil || json.Unmarshal(alice.Result, &own) != nil || own.Task.ID == ""
		if lost {
			t.Logf("alice's own answer: %v", alice)
		}
		return filed || lost, in, m
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
		return a.Error == nil && e.pushedTo(marker, own.ID), a, nil
	}},
	{"webhook-inline", "bob's SendMessage carries a webhook on 127.0.0.1 in its configuration and it is called", func(t testing.TB, e *a2aAttackEnv) (bool, *a2aAnswer, *a2aAnswer) {
		marker := "inline-" + madeUpID()
		a := e.call(t, bobToken, "SendMessage", map[string]any{
			"message":       a2aMessage("hello", nil),
			"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": e.hook.url, "token": marker}},
		})
		var r struct {
			Task a2aTask `json:"task"`
		}
		if a.Error != nil || json.Unmarshal(a.Result, &r) != nil || r.Task.ID == "" {
			return false, a, nil
		}
		return e.pushedTo(marker, r.Task.ID), a, nil
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
	"get-task":                       a2aSucceeds,
	"cancel-task":                    a2aSucceeds,
	"continue-task":                  a2aSucceeds,
	"continue-context":               a2aSucceeds,
	"subscribe":                      a2aSucceeds,
	"push-create":                    a2aSucceeds,
	"push-get":                       a2aSucceeds,
	"push-list":                      a2aSucceeds,
	"push-delete":                    a2aSucceeds,
	"reference-task":                 a2aSucceeds,
	"agent-cites-task":               a2aSucceeds,
	"agent-shares-context":           a2aSucceeds,
	"agent-shares-context-in-flight": a2aSucceeds,
	"list-tasks":                     a2aRefused,
	"webhook-loopback":               a2aSucceeds,
	"webhook-inline":                 a2aSucceeds,
	"webhook-private":                a2aSucceeds,
	"webhook-link-local":             a2aSucceeds,
	"extended-card-anonymous":        a2aSucceeds,
	"message-terminal-task":          a2aRefusedLeaky,
	"probe-cancel-terminal":          a2aRefusedLeaky,
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
	return runA2AAttacksOn(t, &a2aAttackEnv{url: rpc, hook: newHookRecorder(t)}, want)
}

// runA2AAttacksREST runs the table over the HTTP+JSON binding whose base
// URL is base (the a2a-go server's /rest, or Warden's REST listener).
func runA2AAttacksREST(t *testing.T, base string, want map[string]a2aOutcome) map[string]a2aSeen {
	t.Helper()
	return runA2AAttacksOn(t, &a2aAttackEnv{url: base, rest: true, hook: newHookRecorder(t)}, want)
}

func runA2AAttacksOn(t *testing.T, e *a2aAttackEnv, want map[string]a2aOutcome) map[string]a2aSeen {
	t.Helper()
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
// mentioning taskID reached the webhook within 10 s (the Python server
// pushes in the background; a refused config is not waited for).
func (e *a2aAttackEnv) pushedTo(token, taskID string) bool {
	_, ok := e.hook.waitFor(10*time.Second, func(c hookCall) bool {
		got := c.header.Get("A2A-Notification-Token") + c.header.Get("X-A2A-Notification-Token") // a2a-go, a2a-sdk
		return got == token && strings.Contains(c.body, taskID)
	})
	return ok
}

// TestA2AAttacksDirect runs the attack table against the a2a-go v2.3.1 server
// with nothing in front, over both bindings: most attacks succeed (a2a-go
// checks the owner on ListTasks and on task creation only).
func TestA2AAttacksDirect(t *testing.T) {
	base := startA2AGo(t)
	t.Run("JSONRPC", func(t *testing.T) {
		logA2AAttacks(t, runA2AAttacks(t, base+"/jsonrpc", a2aDirectOutcomes))
	})
	t.Run("HTTP+JSON", func(t *testing.T) {
		logA2AAttacks(t, runA2AAttacksREST(t, base+"/rest", a2aDirectOutcomes))
	})
}

// TestA2AAttacksPythonServer runs the same table against the Python a2a-sdk
// 1.3.0 server, whose task and push-config stores are scoped by owner: the
// control that shows the table tells refusals from successes.
func TestA2AAttacksPythonServer(t *testing.T) {
	base := startA2APy(t)
	t.Run("JSONRPC", func(t *testing.T) {
		logA2AAttacks(t, runA2AAttacks(t, base+"/jsonrpc", a2aPythonOutcomes))
	})
	t.Run("HTTP+JSON", func(t *testing.T) {
		logA2AAttacks(t, runA2AAttacksREST(t, base+"/rest", a2aPythonOutcomes))
	})
}

// logA2AAttacks logs the table as README rows, with the answers of the
// refusals that differ from a made-up id's.
func logA2AAttacks(t *testing.T, seen map[string]a2aSeen) {
	t.Helper()
	for _, at := range a2aAttacks {
		t.Logf("| %s | %s | %s |", at.name, at.what, seen[at.name].outcome)
		if seen[at.name].outcome == a2aRefusedLeaky {
			t.Logf("    answer %s\n    made-up %s", seen[at.name].answer, seen[at.name].madeUp)
		}
	}
}

// a2aPythonOutcomes: the a2a-sdk 1.3.0 server refuses every task and
// push-config operation on a foreign id like a made-up one, but lets a
// second tenant add tasks to a foreign context, accepts any webhook URL
// (its push-URL validator is off unless configured) and serves the extended
// card to anyone. Its referenced tasks are read through the owner-scoped
// store, so a foreign one is simply not handed to the agent.
var a2aPythonOutcomes = map[string]a2aOutcome{
	"get-task":                       a2aRefused,
	"cancel-task":                    a2aRefused,
	"continue-task":                  a2aRefused,
	"continue-context":               a2aSucceeds,
	"subscribe":                      a2aRefused,
	"push-create":                    a2aRefused,
	"push-get":                       a2aRefused,
	"push-list":                      a2aRefused,
	"push-delete":                    a2aRefused,
	"reference-task":                 a2aRefused,
	"agent-cites-task":               a2aRefused, // its agent cites nothing
	"agent-shares-context":           a2aRefused, // its agent answers with a task of bob's own
	"agent-shares-context-in-flight": a2aRefused, // the same
	"list-tasks":                     a2aRefused,
	"webhook-loopback":               a2aSucceeds,
	"webhook-inline":                 a2aSucceeds,
	"webhook-private":                a2aSucceeds,
	"webhook-link-local":             a2aSucceeds,
	"extended-card-anonymous":        a2aSucceeds,
	"message-terminal-task":          a2aRefused,
	"probe-cancel-terminal":          a2aRefused,
}
