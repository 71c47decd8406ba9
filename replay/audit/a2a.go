package audit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The A2A attack set: a second tenant (the attacker, Principals[1], "bob")
// against the first (the victim, Principals[0], "alice") over A2A 1.0's
// JSON-RPC binding, and anyone against the server. Every attack builds the
// victim's state itself (a task or a push config of its own, named by a
// fresh marker), so it touches nothing it did not create. The victim's
// messages follow the conventions of the project's a2a-go peer agent
// (test/peers/a2a-go): "input X" leaves a task input-required, "wait N"
// working for N seconds, anything else completes it with an echo; "related"
// and "join" ask the agent to cite the latest task or to answer in the latest
// context. Against an agent that does not follow them, an attack whose setup
// does not come about is skipped with the reason.

// a2aAttacks is the A2A attack set, in the order of the docs' table.
func a2aAttacks() []Attack {
	return []Attack{
		a2aAttack("a2a-get-task", "bob reads alice's task (`GetTask`)", a2aGetTask),
		a2aAttack("a2a-cancel-task", "bob cancels alice's working task (`CancelTask`)", a2aCancelTask),
		a2aAttack("a2a-continue-task", "bob answers alice's input-required task (`SendMessage` with her `taskId`)", a2aContinueTask),
		a2aAttack("a2a-continue-context", "bob adds a task to alice's context (`SendMessage` with her `contextId`)", a2aContinueContext),
		a2aAttack("a2a-subscribe", "bob follows alice's working task (`SubscribeToTask`)", a2aSubscribe),
		a2aAttack("a2a-push-create", "bob registers his webhook on alice's task", a2aPushCreate),
		a2aAttack("a2a-push-get", "bob reads alice's push config and its credentials", a2aPushGet),
		a2aAttack("a2a-push-list", "bob lists alice's push configs with credentials", a2aPushList),
		a2aAttack("a2a-push-delete", "bob deletes alice's push config", a2aPushDelete),
		a2aAttack("a2a-reference-task", "bob names alice's task in `referenceTaskIds` and the agent reads it to him", a2aReferenceTask),
		a2aAttack("a2a-agent-cites-task", "the agent cites alice's task in its answer to bob and bob reads it with the id he got", a2aAgentCitesTask),
		a2aAttack("a2a-agent-shares-context", "the agent answers bob in alice's context and bob files a task into it with the id he got", a2aAgentSharesContext),
		a2aAttack("a2a-agent-shares-context-in-flight", "the same while alice's blocking `SendMessage` (naming no context) is still in flight, before her answer told anyone whose the context is", a2aAgentSharesContextInFlight),
		a2aAttack("a2a-list-tasks", "bob lists tasks and sees alice's (`ListTasks`)", a2aListTasks),
		a2aWebhook("a2a-webhook-loopback", "127.0.0.1", "http://127.0.0.1:9/hook"),
		a2aWebhook("a2a-webhook-private", "10.0.0.1, a private address", "http://10.0.0.1:8080/hook"),
		a2aWebhook("a2a-webhook-link-local", "169.254.169.254, the cloud metadata address", "http://169.254.169.254/latest/meta-data/"),
		a2aAttack("a2a-webhook-inline", "a webhook on 127.0.0.1 inside `SendMessage`'s `configuration` (SSRF)", a2aWebhookInline),
		a2aAttack("a2a-extended-card-anonymous", "the extended agent card without credentials", a2aExtendedCard),
		a2aAttack("a2a-message-terminal-task", "bob sends a message to alice's completed task", a2aMessageTerminal),
		a2aAttack("a2a-probe-cancel-terminal", "bob probes ids: `CancelTask` on alice's completed task", a2aProbeCancelTerminal),
	}
}

// a2aAttack wraps an attack body: the body reports through the run, which
// turns a spent budget, a transport failure or a setup that did not come
// about into Skipped with the reason.
func a2aAttack(id, title string, body func(r *a2aRun) Outcome) Attack {
	return Attack{ID: id, Protocol: "a2a", Title: title, Run: func(ctx context.Context, e Endpoint) Outcome {
		if len(e.Principals) < 2 {
			return Skip("needs two principals (a victim and an attacker)")
		}
		r := &a2aRun{ctx: ctx, e: e, client: &http.Client{Timeout: 10 * time.Second}, marker: "audit-" + randomHex(6)}
		out := body(r)
		if r.err != nil {
			return Failed(r.err)
		}
		return out
	}}
}

// a2aRun is one attack's run: the endpoint, and the first error that ends
// it (after which every call is a no-op answering nothing).
type a2aRun struct {
	ctx    context.Context
	e      Endpoint
	client *http.Client
	marker string // in the victim's texts and credentials only
	err    error
}

func (r *a2aRun) victim() string   { return r.e.Victim().Token }
func (r *a2aRun) attacker() string { return r.e.Attacker().Token }

// skip ends the run with a reason (the first one wins).
func (r *a2aRun) skip(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// a2aAnswer is a JSON-RPC answer (or the first event of an event stream),
// or an HTTP status without either (then Error holds the status as its
// code and http is set).
type a2aAnswer struct {
	Result json.RawMessage
	Error  *rpcError
	http   bool     // the error is an HTTP status
	code   int      // the HTTP status
	named  []string // the ids the request named, blanked in the message
	raw    string   // for the reasons of a skip
}

func (a *a2aAnswer) ok() bool { return a.Error == nil && len(a.Result) > 0 }

// has: answered, and the result holds s.
func (a *a2aAnswer) has(s string) bool {
	return a.ok() && s != "" && strings.Contains(string(a.Result), s)
}

// refusal is the error as a table cell: the code and the message with the
// ids the request named blanked ("" for an answer that is no error).
func (a *a2aAnswer) refusal() string {
	switch {
	case a.Error == nil:
		return ""
	case a.http:
		return fmt.Sprintf("HTTP `%d`", a.Error.Code)
	}
	msg := a.Error.Message
	for _, id := range a.named {
		if id != "" {
			msg = strings.ReplaceAll(msg, id, "<id>")
		}
	}
	if a.code != http.StatusOK {
		return fmt.Sprintf("HTTP `%d`, `%d` %s", a.code, a.Error.Code, msg)
	}
	return fmt.Sprintf("`%d` %s", a.Error.Code, msg)
}

// errorCode is the error's code as a table cell.
func (a *a2aAnswer) errorCode() string {
	if a.Error == nil {
		return "an answer"
	}
	return fmt.Sprintf("`%d`", a.Error.Code)
}

// call sends one JSON-RPC request as token ("" for none) through postRPC
// (the budget, the bounded read) and returns its answer; a spent budget or
// a failed exchange ends the run.
func (r *a2aRun) call(token, method string, params map[string]any) *a2aAnswer {
	a := &a2aAnswer{named: namedIDs(params)}
	if r.err != nil {
		return a
	}
	hdr := map[string]string{"A2A-Version": "1.0"}
	if token == "" {
		hdr["Authorization"] = ""
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	rep, _, err := postRPC(ctx, r.client, r.e, token, method, params, 1, hdr)
	if err != nil {
		r.skip("%s: %v", method, err)
		return a
	}
	a.code, a.Error = rep.HTTP, rep.Err
	if rep.Result != nil {
		if a.Result, err = json.Marshal(rep.Result); err != nil {
			r.skip("%s: %v", method, err)
			return a
		}
	}
	a.raw = fmt.Sprintf("HTTP %d %s", rep.HTTP, clip(string(a.Result)+fmt.Sprint(rep.Err), 300))
	if a.Error == nil && a.Result == nil {
		a.http, a.Error = true, &rpcError{Code: rep.HTTP, Message: http.StatusText(rep.HTTP)}
	}
	return a
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

// a2aTask is the part of a task the attacks read.
type a2aTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

func a2aMessage(text string, fields map[string]any) map[string]any {
	m := map[string]any{"messageId": randomUUID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// send sends a message as token and returns the task it made or continued.
func (r *a2aRun) send(token, text string, fields map[string]any, immediately bool) (a2aTask, *a2aAnswer) {
	params := map[string]any{"message": a2aMessage(text, fields)}
	if immediately {
		params["configuration"] = map[string]any{"returnImmediately": true}
	}
	a := r.call(token, "SendMessage", params)
	var res struct {
		Task a2aTask `json:"task"`
	}
	if a.ok() {
		_ = json.Unmarshal(a.Result, &res)
	}
	return res.Task, a
}

// victimTask makes one task of the victim's ("input ...": input-required;
// "wait ...": working; anything else: completed) whose text holds the
// marker, and checks it reached the state the attack needs ("" for any).
func (r *a2aRun) victimTask(text, state string) a2aTask {
	task, a := r.send(r.victim(), text, nil, strings.HasPrefix(text, "wait"))
	switch {
	case r.err != nil:
	case task.ID == "":
		r.skip("the victim's task was not created: %s", a.raw)
	case state != "" && task.Status.State != state && !(state == "TASK_STATE_WORKING" && task.Status.State == "TASK_STATE_SUBMITTED"):
		r.skip("the victim's task is %s, the attack needs %s (the agent does not follow the audit's conventions)", task.Status.State, state)
	}
	return task
}

// victimPush gives the victim's task a push config with credentials
// holding the marker (its URL on localhost, which a Warden in front must
// allow with --a2a-webhook-allow for the setup to come about).
func (r *a2aRun) victimPush(taskID string) string {
	a := r.call(r.victim(), "CreateTaskPushNotificationConfig", map[string]any{
		"taskId": taskID, "url": "http://localhost:9/hook", "token": r.marker + "-token",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": r.marker},
	})
	var cfg struct {
		ID string `json:"id"`
	}
	if r.err == nil && (!a.ok() || json.Unmarshal(a.Result, &cfg) != nil || cfg.ID == "") {
		r.skip("the victim's push config was not created: %s", a.raw)
	}
	return cfg.ID
}

// verdict judges an attack: it succeeded when worked holds (what says
// how); otherwise it is blocked, unless its refusal differs from the
// made-up id's (madeUp nil: nothing to compare with), which tells the
// attacker the id exists. The evidence holds no id, so the same target
// gives the same text.
func verdict(worked bool, what string, a, madeUp *a2aAnswer) Outcome {
	switch {
	case worked:
		return Succeed(what)
	case a.Error == nil:
		return Block("answered without it")
	case madeUp == nil:
		return Block("refused " + a.refusal())
	case madeUp.Error != nil && a.refusal() == madeUp.refusal():
		return Block(a.refusal() + ", like a made-up id")
	}
	if madeUp.Error == nil || a.Error.Code != madeUp.Error.Code {
		return Succeed("refused " + a.errorCode() + ", unlike a made-up id (" + madeUp.errorCode() + "): the id exists")
	}
	return Succeed("refused " + a.refusal() + ", unlike a made-up id (" + madeUp.refusal() + "): the id exists")
}

func a2aGetTask(r *a2aRun) Outcome {
	v := r.victimTask("input "+r.marker, "TASK_STATE_INPUT_REQUIRED")
	a := r.call(r.attacker(), "GetTask", map[string]any{"id": v.ID})
	m := r.call(r.attacker(), "GetTask", map[string]any{"id": randomUUID()})
	return verdict(a.has(r.marker), "the victim's task, her text included", a, m)
}

func a2aCancelTask(r *a2aRun) Outcome {
	v := r.victimTask("wait 20", "TASK_STATE_WORKING")
	a := r.call(r.attacker(), "CancelTask", map[string]any{"id": v.ID})
	after := r.call(r.victim(), "GetTask", map[string]any{"id": v.ID})
	m := r.call(r.attacker(), "CancelTask", map[string]any{"id": randomUUID()})
	if !after.has("TASK_STATE_CANCELED") {
		r.call(r.victim(), "CancelTask", map[string]any{"id": v.ID}) // leave nothing working
	}
	return verdict(after.has("TASK_STATE_CANCELED"), "the victim's task is canceled", a, m)
}

func a2aContinueTask(r *a2aRun) Outcome {
	v := r.victimTask("input name", "TASK_STATE_INPUT_REQUIRED")
	_, a := r.send(r.attacker(), r.marker, map[string]any{"taskId": v.ID}, false)
	after := r.call(r.victim(), "GetTask", map[string]any{"id": v.ID})
	_, m := r.send(r.attacker(), r.marker, map[string]any{"taskId": randomUUID()}, false)
	return verdict(after.has(r.marker), "the attacker's answer is in the victim's task", a, m)
}

func a2aContinueContext(r *a2aRun) Outcome {
	v := r.victimTask("hello "+r.marker, "")
	task, a := r.send(r.attacker(), "hello", map[string]any{"contextId": v.ContextID}, false)
	_, m := r.send(r.attacker(), "hello", map[string]any{"contextId": madeUpContext()}, false)
	return verdict(task.ID != "" && task.ContextID == v.ContextID, "a task of the attacker's in the victim's context", a, m)
}

func a2aSubscribe(r *a2aRun) Outcome {
	v := r.victimTask("wait 20", "TASK_STATE_WORKING")
	a := r.call(r.attacker(), "SubscribeToTask", map[string]any{"id": v.ID})
	m := r.call(r.attacker(), "SubscribeToTask", map[string]any{"id": randomUUID()})
	r.call(r.victim(), "CancelTask", map[string]any{"id": v.ID}) // leave nothing working
	return verdict(a.has(v.ID), "the victim's task's events", a, m)
}

func a2aPushCreate(r *a2aRun) Outcome {
	v := r.victimTask("input name", "TASK_STATE_INPUT_REQUIRED")
	params := func(id string) map[string]any {
		return map[string]any{"taskId": id, "url": "http://localhost:9/bob", "token": r.marker}
	}
	a := r.call(r.attacker(), "CreateTaskPushNotificationConfig", params(v.ID))
	m := r.call(r.attacker(), "CreateTaskPushNotificationConfig", params(randomUUID()))
	return verdict(a.has(r.marker), "the attacker's webhook is on the victim's task", a, m)
}

func a2aPushGet(r *a2aRun) Outcome {
	v := r.victimTask("input name", "TASK_STATE_INPUT_REQUIRED")
	id := r.victimPush(v.ID)
	a := r.call(r.attacker(), "GetTaskPushNotificationConfig", map[string]any{"taskId": v.ID, "id": id})
	m := r.call(r.attacker(), "GetTaskPushNotificationConfig", map[string]any{"taskId": randomUUID(), "id": id})
	return verdict(a.has(r.marker), "the victim's push credentials", a, m)
}

func a2aPushList(r *a2aRun) Outcome {
	v := r.victimTask("input name", "TASK_STATE_INPUT_REQUIRED")
	r.victimPush(v.ID)
	a := r.call(r.attacker(), "ListTaskPushNotificationConfigs", map[string]any{"taskId": v.ID})
	m := r.call(r.attacker(), "ListTaskPushNotificationConfigs", map[string]any{"taskId": randomUUID()})
	return verdict(a.has(r.marker), "the victim's push credentials", a, m)
}

func a2aPushDelete(r *a2aRun) Outcome {
	v := r.victimTask("input name", "TASK_STATE_INPUT_REQUIRED")
	id := r.victimPush(v.ID)
	a := r.call(r.attacker(), "DeleteTaskPushNotificationConfig", map[string]any{"taskId": v.ID, "id": id})
	left := r.call(r.victim(), "ListTaskPushNotificationConfigs", map[string]any{"taskId": v.ID})
	m := r.call(r.attacker(), "DeleteTaskPushNotificationConfig", map[string]any{"taskId": randomUUID(), "id": id})
	return verdict(left.ok() && !left.has(id), "the victim's push config is gone", a, m)
}

func a2aReferenceTask(r *a2aRun) Outcome {
	v := r.victimTask("hello "+r.marker, "")
	_, a := r.send(r.attacker(), "summarise", map[string]any{"referenceTaskIds": []string{v.ID}}, false)
	_, m := r.send(r.attacker(), "summarise", map[string]any{"referenceTaskIds": []string{randomUUID()}}, false)
	return verdict(a.has(r.marker), "the agent read the victim's task to the attacker", a, m)
}

func a2aAgentCitesTask(r *a2aRun) Outcome {
	v := r.victimTask("input "+r.marker, "TASK_STATE_INPUT_REQUIRED")
	_, a := r.send(r.attacker(), "related", nil, false)
	var res struct {
		Task struct {
			Status struct {
				Message struct {
					Refs []string `json:"referenceTaskIds"`
				} `json:"message"`
			} `json:"status"`
		} `json:"task"`
	}
	if !a.ok() || json.Unmarshal(a.Result, &res) != nil || len(res.Task.Status.Message.Refs) == 0 {
		return Block("the answer cites no task")
	}
	if !ours(res.Task.Status.Message.Refs[0], v.ID) {
		return Skip("the agent cited a task the audit did not create: left alone")
	}
	g := r.call(r.attacker(), "GetTask", map[string]any{"id": res.Task.Status.Message.Refs[0]})
	m := r.call(r.attacker(), "GetTask", map[string]any{"id": randomUUID()})
	return verdict(g.has(r.marker), "the victim's task, through the id the agent gave", g, m)
}

func a2aAgentSharesContext(r *a2aRun) Outcome {
	v := r.victimTask("hello "+r.marker, "")
	a := r.call(r.attacker(), "SendMessage", map[string]any{"message": a2aMessage("join", nil)})
	var res struct {
		Message struct {
			ContextID string `json:"contextId"`
		} `json:"message"`
	}
	if !a.ok() || json.Unmarshal(a.Result, &res) != nil || res.Message.ContextID == "" {
		return Block("the answer names no context")
	}
	if !ours(res.Message.ContextID, v.ContextID) {
		return Skip("the agent named a context the audit did not create: left alone")
	}
	task, in := r.send(r.attacker(), "hello", map[string]any{"contextId": res.Message.ContextID}, false)
	_, m := r.send(r.attacker(), "hello", map[string]any{"contextId": madeUpContext()}, false)
	return verdict(task.ID != "" && task.ContextID == res.Message.ContextID, "a task of the attacker's in the victim's context", in, m)
}

// ours reports whether an id an agent handed the attacker is one the audit
// may use: the victim's own, or a handle of Warden's (bound to the
// attacker: it opens nothing of another's, or Warden is what the audit
// finds wanting). Anything else may be another client's, and is left alone.
func ours(id, victims string) bool { return id == victims || strings.HasPrefix(id, "wt2.") }

// a2aAgentSharesContextInFlight: while the victim's blocking SendMessage
// naming no context is in flight ("wait 3"), the agent answers the
// attacker in the context of the latest task ("join"): the attacker files
// a task into it, or the victim's own answer fails. A Warden handle is
// used at once (the window this attack is about); a server's raw id could
// be another client's, so the attacker files into it only once the
// victim's answer shows it is hers (a server that checks nothing refuses
// nothing later either).
func a2aAgentSharesContextInFlight(r *a2aRun) Outcome {
	victim := *r // its own run state: the call runs beside the attacker's
	done := make(chan *a2aAnswer, 1)
	go func() {
		done <- victim.call(r.victim(), "SendMessage", map[string]any{"message": a2aMessage("wait 3", nil)})
	}()
	select { // her task started: the agent's latest context is hers
	case <-time.After(time.Second):
	case <-r.ctx.Done():
	}
	a := r.call(r.attacker(), "SendMessage", map[string]any{"message": a2aMessage("join", nil)})
	var res struct {
		Message struct {
			ContextID string `json:"contextId"`
		} `json:"message"`
	}
	named := ""
	if a.ok() && json.Unmarshal(a.Result, &res) == nil {
		named = res.Message.ContextID
	}
	filed, in := false, a
	file := func() {
		var task a2aTask
		task, in = r.send(r.attacker(), "hello", map[string]any{"contextId": named}, false)
		filed = task.ID != "" && task.ContextID == named
	}
	if named != "" && ours(named, "") {
		file()
	}
	own := <-done
	if victim.err != nil {
		r.skip("the victim's message: %v", victim.err)
	}
	var got struct {
		Task a2aTask `json:"task"`
	}
	lost := !own.ok() || json.Unmarshal(own.Result, &got) != nil || got.Task.ID == ""
	if named != "" && !ours(named, "") && !lost {
		if named != got.Task.ContextID {
			return Skip("the agent named a context the audit did not create: left alone")
		}
		file()
	}
	_, m := r.send(r.attacker(), "hello", map[string]any{"contextId": madeUpContext()}, false)
	switch {
	case filed:
		return Succeed("a task of the attacker's in the victim's context")
	case lost:
		return Succeed("the victim's own answer failed")
	case named == "":
		return Block("the answer names no context")
	}
	return verdict(false, "", in, m)
}

func a2aListTasks(r *a2aRun) Outcome {
	v := r.victimTask("hello "+r.marker, "")
	a := r.call(r.attacker(), "ListTasks", map[string]any{})
	if a.ok() && !a.has(v.ID) {
		return Block("only the attacker's own tasks")
	}
	return verdict(a.has(v.ID), "the victim's task in the attacker's list", a, nil)
}

// a2aWebhook: the attacker registers a webhook at url on a completed task
// of his own (no more events, so nothing calls it): accepted is the SSRF.
func a2aWebhook(id, where, url string) Attack {
	return a2aAttack(id, "a webhook on "+where+" (SSRF)", func(r *a2aRun) Outcome {
		own, a := r.send(r.attacker(), "hello", nil, false)
		if r.err == nil && own.ID == "" {
			r.skip("the attacker's own task was not created: %s", a.raw)
		}
		c := r.call(r.attacker(), "CreateTaskPushNotificationConfig", map[string]any{"taskId": own.ID, "url": url})
		return verdict(c.ok(), "accepted", c, nil)
	})
}

func a2aWebhookInline(r *a2aRun) Outcome {
	a := r.call(r.attacker(), "SendMessage", map[string]any{
		"message":       a2aMessage("hello", nil),
		"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": "http://127.0.0.1:9/hook", "token": r.marker}},
	})
	return verdict(a.ok(), "accepted", a, nil)
}

func a2aExtendedCard(r *a2aRun) Outcome {
	a := r.call("", "GetExtendedAgentCard", map[string]any{})
	return verdict(a.ok(), "served", a, nil)
}

func a2aMessageTerminal(r *a2aRun) Outcome {
	v := r.victimTask("hello "+r.marker, "TASK_STATE_COMPLETED")
	_, a := r.send(r.attacker(), "more", map[string]any{"taskId": v.ID}, false)
	_, m := r.send(r.attacker(), "more", map[string]any{"taskId": randomUUID()}, false)
	return verdict(a.ok(), "the attacker's message is in the victim's task", a, m)
}

func a2aProbeCancelTerminal(r *a2aRun) Outcome {
	v := r.victimTask("hello "+r.marker, "TASK_STATE_COMPLETED")
	a := r.call(r.attacker(), "CancelTask", map[string]any{"id": v.ID})
	m := r.call(r.attacker(), "CancelTask", map[string]any{"id": randomUUID()})
	return verdict(a.has(v.ID), "the victim's task", a, m)
}

// randomUUID is a made-up id of the UUIDv7 shape a2a-go's ids have.
func randomUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// madeUpContext is a made-up context in the shape of a Warden handle
// (through Warden, a contextId that is no handle is a context the client
// chooses, which A2A allows and which is the chooser's own).
func madeUpContext() string {
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	return "wt2." + base64.RawURLEncoding.EncodeToString(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
