package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/agentwarden/warden/proxy/owners"
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
// left out cut, and everything else passes as the bytes it came as. An
// object Warden reads with a member named twice, or two names that fold
// alike, is refused: a client would read either of them, and Warden
// rewrote one. Push configs and the extended card, small, are decoded.
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	if x.failed {
		return nil, false // a stream that named another's task: nothing more passes
	}
	env, err := jsonrpc.ReadObject(data)
	// A member spelled in another case ("Result") is read by clients that
	// match names without case, and would pass unread here.
	if err != nil || env.Spelled(answerNames) != nil {
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
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, unavailable), true
		}
	case m == a2a.MethodCreatePush || m == a2a.MethodGetPush || m == a2a.MethodListPush || m == a2a.MethodExtendedCard:
		raw, _ := env.Raw("result")
		var r map[string]any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		_ = d.Decode(&r) // an object of a valid message: it decodes
		if ok, err = x.decoded(r); err != nil {
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, err.Error()), true
		}
		b, err := jsonrpc.Encode(r)
		if err != nil {
			return nil, false
		}
		env.SetRaw("result", b)
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
func sameID(raw, id json.RawMessage) bool {
	v, ok := jsonrpc.IDValue(raw)
	return ok && jsonrpc.SameID(v, id)
}

// decoded rewrites the decoded result of a push-config method or of the
// extended card: ok is false when it is about another's task; an error is
// the caller's answer in its place.
func (x *exchange) decoded(res map[string]any) (ok bool, err error) {
	switch x.call.Method {
	case a2a.MethodCreatePush, a2a.MethodGetPush:
		return x.pushConfig(res), nil
	case a2a.MethodListPush:
		if cs, isList := res["configs"].([]any); isList {
			kept := cs[:0]
			for _, c := range cs {
				if c, isObj := c.(map[string]any); isObj && x.pushConfig(c) {
					kept = append(kept, c)
				}
			}
			res["configs"] = kept
		}
	case a2a.MethodExtendedCard:
		if !x.s.rewriteCard(res, x.s.public) {
			return true, errNoPublicURL
		}
	}
	return true, nil
}

// errNoPublicURL answers for an extended card Warden cannot rewrite.
var errNoPublicURL = errors.New("the extended agent card cannot be served: Warden has no public URL to write into it (set a2a.public_url)")

// answerNames are the members of a JSON-RPC answer.
var answerNames = []string{"jsonrpc", "id", "result", "error"}

// subject reports whether the task an answer is about, and its context, are
// the caller's, adopting the task when the request is a message that named
// no task; it seals both. A new task must be in the message's context (the
// one it named or Warden gave it, the caller's already); the context of a
// task the caller owned already is the caller's when Warden does not know it
// otherwise: Warden let the task be made only in a context of the caller's.
func (x *exchange) subject(obj *jsonrpc.Object, idName, state string) bool {
	id, _ := obj.Str(idName)
	if id == "" {
		return false
	}
	if x.taskID != "" && id != x.taskID && !x.dryRun("another task than the one asked for", id) {
		return false // a result or event about another task than the one asked for (or continued)
	}
	c, _ := obj.Str("contextId")
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
	var state string
	st, hasStatus := u.Obj("status")
	if hasStatus {
		state, _ = st.Str("state")
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
	if t, _ := m.Str("taskId"); t != "" {
		if !x.subject(m, "taskId", "") {
			return false
		}
	} else if c, _ := m.Str("contextId"); c != "" {
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
	s, _ := st.Str("state")
	return s
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
	if x.fresh && x.ownMessage(m) {
		// The client's message as it sent it: without the context Warden
		// gave it before forwarding.
		m.Del("contextId")
	}
	for _, p := range []struct {
		name string
		kind a2a.Kind
	}{{"taskId", a2a.KindTask}, {"contextId", a2a.KindContext}} {
		v, isStr := m.Str(p.name)
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
	role, _ := m.Str("role")
	got, isStr := m.Str("messageId")
	return id != "" && isStr && got == id && (role == "ROLE_USER" || role == "user")
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

// list keeps the tasks of a ListTasks page that Warden knows to be the
// caller's (this replica, else the shared store; an unknown owner is
// nobody's), and seals the page token. An error means the owners could not
// be read (the shared store is unreachable): nothing of the page may pass.
func (x *exchange) list(res *jsonrpc.Object) error {
	ts, listed := res.Arr("tasks")
	n := 0
	if listed {
		n = ts.Len()
	}
	ids := make([]string, n)
	keys := make([]owners.Key, n)
	for i := range n {
		if t, ok := ts.Obj(i); ok {
			ids[i], _ = t.Str("id")
		}
		keys[i] = ownerKey(a2a.KindTask, ids[i])
	}
	whose, err := x.s.enforcer.Owners(x.ctx(), keys...)
	if err != nil {
		return err
	}
	kept := 0
	var states []owners.Fact
	for i := range n {
		t, ok := ts.Obj(i)
		if !ok || whose[i] == "" || whose[i] != x.principal {
			ts.Drop(i)
			continue
		}
		x.prove(a2a.KindTask, ids[i])
		t.SetStr("id", x.seal(a2a.KindTask, ids[i]))
		if c, _ := t.Str("contextId"); c != "" {
			if !x.adopt(a2a.KindContext, c, "", ofOwnTask) {
				ts.Drop(i) // the caller's task in another's context: not listed
				continue
			}
			t.SetStr("contextId", x.seal(a2a.KindContext, c))
		}
		states = append(states, owners.Fact{Key: keys[i], Status: taskState(t)})
		x.taskMessages(t)
		kept++
	}
	if _, err := x.apply(states...); err != nil { // one write to the shared store for the page
		return err
	}
	if res.Has("totalSize") {
		// The server's total counts every tenant's tasks (also when none
		// of this page was left out, or the page is empty): never passed.
		// The caller's own total is known when this page is the whole
		// list (no page asked for, none to come); otherwise it is not,
		// and the page's count would be a wrong total: left out.
		next, _ := res.Str("nextPageToken")
		if asked := x.call.PageToken; asked == "" && next == "" {
			res.SetRaw("totalSize", strconv.AppendInt(nil, int64(kept), 10))
		} else {
			res.Del("totalSize")
		}
	}
	if v, ok := res.Str("nextPageToken"); ok && v != "" {
		res.SetStr("nextPageToken", x.seal(a2a.KindCursor, v))
	}
	return nil
}

// pushConfig seals a push config's task and withholds its credentials: the
// notification token and the authentication credentials stay between the
// client that set them and the server (A2A §13.2). A config of another task
// than the one the request named is not the caller's: false.
func (x *exchange) pushConfig(c map[string]any) bool {
	if t, ok := c["taskId"]; ok && t != x.taskID && !x.dryRun("a push config of another task", x.taskID) {
		return false
	}
	if !x.s.relay.Restore(c, x.principal) && !x.dryRun("a push config of another's", x.taskID) {
		return false // the server holds another principal's relay URL for it
	}
	if v, ok := c["taskId"].(string); ok && v != "" {
		c["taskId"] = x.seal(a2a.KindTask, v)
	}
	delete(c, "token")
	if a, ok := c["authentication"].(map[string]any); ok {
		delete(a, "credentials")
	}
	// A 0.3-style nesting.
	if p, ok := c["pushNotificationConfig"].(map[string]any); ok {
		delete(p, "token")
		if a, ok := p["authentication"].(map[string]any); ok {
			delete(a, "credentials")
		}
	}
	return true
}
