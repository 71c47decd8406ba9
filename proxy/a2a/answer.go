package a2a

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// fromUpstream checks one answer (a body or an SSE event's data) and
// rewrites it for the caller: it must be one JSON-RPC answer to this
// exchange's request, an error or a result and not both; upstream ids
// become the caller's handles only where they are the caller's (see
// ownership), ListTasks keeps the caller's tasks only, push configs lose
// their credentials. keep is false for an answer that cannot be matched to
// the request. An answer about a task that is not the caller's becomes
// TaskNotFoundError, and in a stream ends what passes of it.
//
// The answer is read for splicing (jsonrpc.Object), not decoded: the ids
// Warden reads are found where they are, their handles spliced in, what is
// left out cut, and everything else passes as the bytes it came as. Every
// object Warden reads is a protocol object (the envelope, the result, a
// task, message, event, status, ListTasks page, push config, card or
// interface), held to the spelling of the names read from it (and of the
// names its kind is read by, Hold): one given twice, or a member folding to
// one without being it ("Token", "TaskId"), refuses the answer (Err): a
// client matching names without case would read the one Warden did not
// rewrite.
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	if x.failed {
		return nil, false // a stream that named another's task: nothing more passes
	}
	env, err := jsonrpc.ReadObject(data)
	if err != nil {
		return nil, false
	}
	if env.Hold(answerNames...); env.Err() != nil {
		return nil, false
	}
	if raw, _ := env.Raw("id"); !sameID(raw, x.call.ID) {
		return nil, false
	}
	if e, isErr := env.Raw("error"); isErr {
		if e[0] != '{' || env.Has("result") {
			// Both, or an error that is not one: a client reading the
			// result would read what Warden did not check.
			return nil, false
		}
		return data, true // the upstream's refusal of the caller's own request
	}
	res, ok := env.Obj("result")
	if raw, has := env.Raw("result"); !has || string(raw) == "null" || ok && res.Len() == 0 {
		return data, true // nothing to rewrite (a deleted push config)
	}
	if !ok {
		return nil, false
	}
	switch m := x.call.Method; {
	case a2a.Sends(m) || m == a2a.MethodSubscribe:
		var known bool
		if ok, known = x.streamResponse(res); !known {
			// No member Warden reads: whatever a client would read of it
			// was not checked.
			return nil, false
		}
	case m == a2a.MethodGetTask || m == a2a.MethodCancelTask:
		ok = x.task(res)
	case m == a2a.MethodListTasks:
		if err := x.list(res); err != nil {
			// Whose tasks these are cannot be told: nothing of the page
			// passes.
			x.s.log.Warn("could not filter an A2A task list; replacing it with an error", "principal", x.principal, "err", err)
			msg := unavailable
			if c, ok := gate.Cause(err); ok {
				msg = c // the budget's refusal, or why Warden's page read was unusable
			}
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, msg), true
		}
	case m == a2a.MethodCreatePush || m == a2a.MethodGetPush:
		var err error
		if ok, err = x.pushConfig(res); err != nil {
			return nil, false // a name Warden reads in another case
		}
	case m == a2a.MethodListPush:
		if err := x.pushConfigs(res); err != nil {
			return nil, false
		}
	case m == a2a.MethodExtendedCard:
		if err := rewriteCard(res, x.s.public); errors.Is(err, errNoPublicURL) {
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, err.Error()), true
		} else if err != nil {
			return nil, false
		}
	}
	if env.Err() != nil {
		return nil, false // a name twice, or folding like another, in an object Warden read
	}
	if !ok {
		// The answer is about a task or context that is not the caller's:
		// what a made-up id gets, and nothing of it (or, when whose it is
		// could not be read, Warden's retryable error).
		x.failed = true
		if x.unreadable {
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, unavailable), true
		}
		x.s.log.Warn("the A2A server answered about a task that is not the caller's; answering Task not found", "method", x.call.Method, "principal", x.principal)
		return jsonrpc.ErrorBody(x.call.ID, a2a.ErrTaskNotFound, a2a.TaskNotFound), true
	}
	x.out = env.AppendTo(x.out[:0])
	return x.out, true
}

// sameID reports whether an answer's raw id is the request's.
func sameID(raw, id json.RawMessage) bool { return jsonrpc.IsID(raw, id) }

// errNoPublicURL answers for an extended card Warden cannot rewrite.
var errNoPublicURL = errors.New("the extended agent card cannot be served: Warden has no public URL to write into it (set a2a.public_url)")

// answerNames are the members of a JSON-RPC answer.
var answerNames = []string{"jsonrpc", "id", "result", "error"}

// The names each kind of protocol object is read by, held on every path
// (jsonrpc.Object.Hold) whether or not that path reads them.
var (
	resultNames  = []string{"task", "message", "statusUpdate", "artifactUpdate", "id", "taskId", "messageId", "contextId"}
	taskNames    = []string{"id", "contextId", "status", "history"}
	updateNames  = []string{"taskId", "contextId", "status"}
	statusNames  = []string{"state", "message"}
	messageNames = []string{"taskId", "contextId", "referenceTaskIds", "messageId", "role"}
	listNames    = []string{"tasks", "nextPageToken", "totalSize"}
)

// subject reports whether the task an answer is about, and its context, are
// the caller's, adopting the task when the request is a message that named
// no task; it seals both. A new task must be in the message's context (the
// one it named or Warden gave it, the caller's already); the context of a
// task the caller owned already is the caller's when Warden does not know it
// otherwise: Warden let the task be made only in a context of the caller's.
func (x *exchange) subject(obj *jsonrpc.Object, idName, state string) bool {
	id, _ := x.idOf(obj, idName)
	if id == "" {
		return false
	}
	if x.taskID != "" && id != x.taskID && !x.dryRun("another task than the one asked for", id) {
		return false // a result or event about another task than the one asked for (or continued)
	}
	c, _ := x.idOf(obj, "contextId")
	// A message that named no task creates one at most: the first its
	// answer is about; another id after it is no creation of this answer.
	if a2a.Sends(x.call.Method) && x.taskID == "" && (x.created == "" || x.created == id) {
		if c != x.contextID && !x.dryRun("a task in another context than the message's", c) || !x.adopt(a2a.KindTask, id, state, create) {
			return false
		}
		x.created = id
	} else if !x.adopt(a2a.KindTask, id, state, noCreate) || c != "" && !x.adopt(a2a.KindContext, c, "", ofOwnTask) {
		return false
	}
	obj.SetStr(idName, x.seal(a2a.KindTask, id))
	if c != "" {
		obj.SetStr("contextId", x.seal(a2a.KindContext, c))
	}
	return true
}

// streamResponse rewrites a SendMessage result or one StreamResponse: a
// task, a message, a status or an artifact update, or 0.3's object itself
// (a task, a message or an event, told by its members). ok is false when
// what it is about is not the caller's; known is false when it holds none of
// these (nothing of it was checked).
func (x *exchange) streamResponse(res *jsonrpc.Object) (ok, known bool) {
	res.Hold(resultNames...)
	if t, isObj := res.Obj("task"); isObj {
		if known = true; !x.task(t) {
			return false, true
		}
	}
	if m, isObj := res.Obj("message"); isObj {
		if known = true; !x.reply(m) {
			return false, true
		}
	}
	for _, k := range []string{"statusUpdate", "artifactUpdate"} {
		if u, isObj := res.Obj(k); isObj {
			if known = true; !x.update(u) {
				return false, true
			}
		}
	}
	// A 0.3-style result, which is the object itself ("kind" names it):
	// a task (id), an event (taskId), a message (messageId, or a bare
	// contextId). Read whatever else the result holds, as a client of
	// 0.3 would.
	switch {
	case isString(res, "id"):
		return x.task(res), true
	case isString(res, "taskId"):
		return x.update(res), true
	case isString(res, "messageId") || isString(res, "contextId"):
		return x.reply(res), true
	}
	return true, known
}

// update rewrites a status or an artifact update; false when its task is
// not the caller's.
func (x *exchange) update(u *jsonrpc.Object) bool {
	u.Hold(updateNames...)
	var state string
	st, hasStatus := u.Obj("status")
	if hasStatus {
		st.Hold(statusNames...)
		state = a2a.StateOf(st)
	}
	if !x.subject(u, "taskId", state) {
		return false
	}
	if hasStatus {
		if m, ok := st.Obj("message"); ok {
			x.message(m)
		}
	}
	return true
}

// isString reports whether obj's member name is a string.
func isString(obj *jsonrpc.Object, name string) bool {
	_, ok := obj.Str(name)
	return ok
}

// reply rewrites a message a message request was answered with: its task
// and context, when it names them, are what the answer is about.
func (x *exchange) reply(m *jsonrpc.Object) bool {
	m.Hold(messageNames...)
	if t, _ := x.idOf(m, "taskId"); t != "" {
		if !x.subject(m, "taskId", "") {
			return false
		}
	} else if c, _ := x.idOf(m, "contextId"); c != "" {
		// The message's own context (named, or Warden's fresh one) or
		// another of the caller's; a context nobody owns is not adopted.
		if !x.adopt(a2a.KindContext, c, "", noCreate) {
			return false
		}
		m.SetStr("contextId", x.seal(a2a.KindContext, c))
	}
	x.references(m)
	return true
}

// task rewrites a Task the answer is about; false when it is not the
// caller's.
func (x *exchange) task(t *jsonrpc.Object) bool {
	t.Hold(taskNames...)
	if !x.subject(t, "id", taskState(t)) {
		return false
	}
	x.taskMessages(t)
	return true
}

// taskState is a Task's status.state, "" when it has none.
func taskState(t *jsonrpc.Object) string {
	st, ok := t.Obj("status")
	if !ok {
		return ""
	}
	st.Hold(statusNames...)
	return a2a.StateOf(st)
}

// taskMessages rewrites the messages of a Task whose ids are sealed.
func (x *exchange) taskMessages(t *jsonrpc.Object) {
	if st, ok := t.Obj("status"); ok {
		if m, ok := st.Obj("message"); ok {
			x.message(m)
		}
	}
	if h, ok := t.Arr("history"); ok {
		for i := range h.Len() {
			if m, ok := h.Obj(i); ok {
				x.message(m)
			}
		}
	}
}

// message rewrites a Message inside a task or an event: its task and
// context become handles where they are the caller's and are left out
// otherwise; so are its referenced tasks.
func (x *exchange) message(m *jsonrpc.Object) {
	m.Hold(messageNames...)
	if x.fresh && x.ownMessage(m) {
		// The client's message as it sent it: without the context Warden
		// gave it before forwarding.
		m.Del("contextId")
	}
	for _, p := range []struct {
		name string
		kind a2a.Kind
	}{{"taskId", a2a.KindTask}, {"contextId", a2a.KindContext}} {
		v, isStr := x.idOf(m, p.name)
		switch {
		case !isStr || v == "":
		case x.owns(p.kind, v):
			m.SetStr(p.name, x.seal(p.kind, v))
		default:
			m.Del(p.name)
		}
	}
	x.references(m)
}

// ownMessage reports whether m is the message the request sent: the
// user's, with its messageId.
func (x *exchange) ownMessage(m *jsonrpc.Object) bool {
	id := x.call.MessageID
	role, _ := m.StrOf("role", roles)
	got, isStr := m.StrOf("messageId", []string{id})
	return id != "" && isStr && got == id && (role == "ROLE_USER" || role == "user")
}

// roles are the spellings of a message's role (1.0's and 0.3's).
var roles = []string{"ROLE_USER", "ROLE_AGENT", "user", "agent"}

// idOf reads a task or context id of an answer as Str reads it, without a
// copy when it is one this exchange knows already (jsonrpc.Object.StrOf):
// the task the request named, the context of a message, the ids sealed so
// far. An answer names its task and context again in each of its messages.
func (x *exchange) idOf(obj *jsonrpc.Object, name string) (string, bool) {
	var buf [3 + len(x.sealed.few)]string
	known := append(buf[:0], x.taskID, x.contextID, x.created)
	for _, e := range x.sealed.few[:x.sealed.n] {
		known = append(known, e.k.id)
	}
	return obj.StrOf(name, known)
}

// references keeps the referenced tasks of a message that are the caller's,
// as handles.
func (x *exchange) references(m *jsonrpc.Object) {
	refs, ok := m.Arr("referenceTaskIds")
	if !ok {
		return
	}
	for i := range refs.Len() {
		if r, ok := refs.Str(i); ok && r != "" && x.owns(a2a.KindTask, r) {
			refs.SetStr(i, x.seal(a2a.KindTask, r))
		} else {
			refs.Drop(i)
		}
	}
}

// pushNames are the members of a push config Warden reads (seals,
// restores or withholds).
var pushNames = []string{"taskId", "url", "token", "authentication", "credentials", "pushNotificationConfig"}

// pushConfigs keeps the configs of a ListTaskPushNotificationConfigs page
// that are the caller's (pushConfig); an error refuses the page.
func (x *exchange) pushConfigs(res *jsonrpc.Object) error {
	res.Hold("configs", "nextPageToken")
	cs, ok := res.Arr("configs")
	if !ok {
		return nil
	}
	for i := range cs.Len() {
		c, isObj := cs.Obj(i)
		if !isObj {
			cs.Drop(i)
			continue
		}
		mine, err := x.pushConfig(c)
		if err != nil {
			return err
		}
		if !mine {
			cs.Drop(i)
		}
	}
	return nil
}

// pushConfig seals a push config's task and withholds its credentials: the
// notification token and the authentication credentials stay between the
// client that set them and the server (A2A §13.2). A config of another task
// than the one the request named is not the caller's: false. An error (a
// url in another case) refuses the answer.
func (x *exchange) pushConfig(c *jsonrpc.Object) (bool, error) {
	c.Hold(pushNames...)
	t, isStr := c.Str("taskId")
	if c.Has("taskId") && (!isStr || t != x.taskID) && !x.dryRun("a push config of another task", x.taskID) {
		return false, nil
	}
	mine, err := x.s.relay.Restore(c, x.principal)
	if err != nil {
		return false, err
	}
	if !mine && !x.dryRun("a push config of another's", x.taskID) {
		return false, nil // the server holds another principal's relay URL for it
	}
	if isStr && t != "" {
		c.SetStr("taskId", x.seal(a2a.KindTask, t))
	}
	withhold(c)
	// A 0.3-style nesting.
	if p, ok := c.Obj("pushNotificationConfig"); ok {
		p.Hold(pushNames...)
		withhold(p)
	}
	return true, nil
}

// withhold leaves a push config's token and authentication credentials out.
func withhold(c *jsonrpc.Object) {
	c.Del("token")
	if a, ok := c.Obj("authentication"); ok {
		a.Hold("schemes")
		a.Del("credentials")
	}
}

// stateOf reads a task's state from the answer to Warden's own GetTask
// (readState) for splicing, by name as fromUpstream reads: a name it reads
// (the answer's, the task's id and status, the state) given twice, in two
// cases or alone in another case is an error, as is an answer about
// another task; "" when the upstream does not know the task (no result).
func stateOf(b []byte, taskID string) (string, error) {
	env, err := jsonrpc.ReadObject(b)
	if err == nil {
		env.Hold(answerNames...)
		err = env.Err()
	}
	if err != nil {
		return "", fmt.Errorf("GetTask answer: %w", err)
	}
	raw, has := env.Raw("result")
	if !has || string(raw) == "null" {
		return "", nil // the upstream decides about a task it does not know
	}
	if env.Has("error") {
		return "", errors.New("GetTask answer: both a result and an error")
	}
	res, isObj := env.Obj("result")
	if !isObj {
		return "", errors.New("GetTask answer: the result is not a task")
	}
	res.Hold(taskNames...)
	if id, _ := res.Str("id"); id != taskID {
		return "", fmt.Errorf("GetTask answered about another task than %s", taskID)
	}
	var state string
	if st, ok := res.Obj("status"); ok {
		st.Hold(statusNames...)
		var isStr bool
		if state, isStr = st.Str("state"); !isStr && !absent(st, "state") {
			return "", errors.New("GetTask answer: the state is not a string")
		}
	} else if !absent(res, "status") {
		return "", errors.New("GetTask answer: the status is not an object")
	}
	if err := env.Err(); err != nil {
		return "", fmt.Errorf("GetTask answer: %w", err)
	}
	return state, nil
}

// absent reports whether o has no member name, or a null one.
func absent(o *jsonrpc.Object, name string) bool {
	raw, has := o.Raw(name)
	return !has || string(raw) == "null"
}
