package a2a

import (
	"bytes"
	"encoding/json"
	"slices"

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
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	if x.failed {
		return nil, false // a stream that named another's task: nothing more passes
	}
	var env map[string]any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if d.Decode(&env) != nil || len(bytes.TrimSpace(data[d.InputOffset():])) > 0 || env == nil {
		return nil, false // not one JSON object (More misses a stray '}' or ']')
	}
	// A member spelled in another case ("Result") is read by clients that
	// match names without case, and would pass unread here. (A member
	// given twice is read as its last by every decoder, Warden's too.)
	if !exactNames(env) {
		return nil, false
	}
	if !jsonrpc.SameID(env["id"], x.call.ID) {
		return nil, false
	}
	if e, isErr := env["error"]; isErr {
		_, hasResult := env["result"]
		if _, isObj := e.(map[string]any); !isObj || hasResult {
			// Both, or an error that is not one: a client reading the
			// result would read what Warden did not check.
			return nil, false
		}
		return data, true // the upstream's refusal of the caller's own request
	}
	if isEmpty(env["result"]) {
		return data, true // nothing to rewrite (a deleted push config)
	}
	res, ok := env["result"].(map[string]any)
	if !ok {
		return nil, false
	}
	ok = true
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
	case m == a2a.MethodCreatePush || m == a2a.MethodGetPush:
		ok = x.pushConfig(res)
	case m == a2a.MethodListPush:
		if cs, isList := res["configs"].([]any); isList {
			kept := cs[:0]
			for _, c := range cs {
				if c, isObj := c.(map[string]any); isObj && x.pushConfig(c) {
					kept = append(kept, c)
				}
			}
			res["configs"] = kept
		}
	case m == a2a.MethodExtendedCard:
		if !x.s.rewriteCard(res, x.s.public) {
			return jsonrpc.ErrorBody(x.call.ID, jsonrpc.ErrInternal, "the extended agent card cannot be served: Warden has no public URL to write into it (set a2a.public_url)"), true
		}
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
	b, err := jsonrpc.Encode(env)
	if err != nil {
		return nil, false
	}
	return b, true
}

// answerNames are the members of a JSON-RPC answer.
var answerNames = []string{"jsonrpc", "id", "result", "error"}

// exactNames reports whether no member of an answer folds to one of
// answerNames without being it.
func exactNames(env map[string]any) bool {
	for k := range env {
		if slices.Contains(answerNames, k) {
			continue
		}
		f := jsonrpc.Fold(k)
		for _, n := range answerNames {
			if f == jsonrpc.Fold(n) {
				return false
			}
		}
	}
	return true
}

// subject reports whether the task an answer is about, and its context, are
// the caller's, adopting the task when the request is a message that named
// no task; it seals both. A new task must be in the message's context (the
// one it named or Warden gave it, the caller's already); the context of a
// task the caller owned already is the caller's when Warden does not know it
// otherwise: Warden let the task be made only in a context of the caller's.
func (x *exchange) subject(obj map[string]any, idName, state string) bool {
	id, _ := obj[idName].(string)
	if id == "" {
		return false
	}
	if x.taskID != "" && id != x.taskID && !x.dryRun("another task than the one asked for", id) {
		return false // a result or event about another task than the one asked for (or continued)
	}
	c, _ := obj["contextId"].(string)
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
	obj[idName] = x.seal(a2a.KindTask, id)
	if c != "" {
		obj["contextId"] = x.seal(a2a.KindContext, c)
	}
	return true
}

// streamResponse rewrites a SendMessage result or one StreamResponse: a
// task, a message, a status or an artifact update, or 0.3's object itself
// (a task, a message or an event, told by its members). ok is false when
// what it is about is not the caller's; known is false when it holds none of
// these (nothing of it was checked).
func (x *exchange) streamResponse(res map[string]any) (ok, known bool) {
	if t, isObj := res["task"].(map[string]any); isObj {
		if known = true; !x.task(t) {
			return false, true
		}
	}
	if m, isObj := res["message"].(map[string]any); isObj {
		if known = true; !x.reply(m) {
			return false, true
		}
	}
	for _, k := range []string{"statusUpdate", "artifactUpdate"} {
		if u, isObj := res[k].(map[string]any); isObj {
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
	case isString(res["id"]):
		return x.task(res), true
	case isString(res["taskId"]):
		return x.update(res), true
	case isString(res["messageId"]) || isString(res["contextId"]):
		return x.reply(res), true
	}
	return true, known
}

// update rewrites a status or an artifact update; false when its task is
// not the caller's.
func (x *exchange) update(u map[string]any) bool {
	st, _ := u["status"].(map[string]any)
	state, _ := st["state"].(string)
	if !x.subject(u, "taskId", state) {
		return false
	}
	if m, ok := st["message"].(map[string]any); ok {
		x.message(m)
	}
	return true
}

// isString reports whether v is a string.
func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// reply rewrites a message a message request was answered with: its task
// and context, when it names them, are what the answer is about.
func (x *exchange) reply(m map[string]any) bool {
	if t, _ := m["taskId"].(string); t != "" {
		if !x.subject(m, "taskId", "") {
			return false
		}
	} else if c, _ := m["contextId"].(string); c != "" {
		// The message's own context (named, or Warden's fresh one) or
		// another of the caller's; a context nobody owns is not adopted.
		if !x.adopt(a2a.KindContext, c, "", noCreate) {
			return false
		}
		m["contextId"] = x.seal(a2a.KindContext, c)
	}
	x.references(m)
	return true
}

// task rewrites a Task the answer is about; false when it is not the
// caller's.
func (x *exchange) task(t map[string]any) bool {
	if !x.subject(t, "id", taskState(t)) {
		return false
	}
	x.taskMessages(t)
	return true
}

// taskState is a Task's status.state, "" when it has none.
func taskState(t map[string]any) string {
	st, _ := t["status"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}

// taskMessages rewrites the messages of a Task whose ids are sealed.
func (x *exchange) taskMessages(t map[string]any) {
	if st, ok := t["status"].(map[string]any); ok {
		if m, ok := st["message"].(map[string]any); ok {
			x.message(m)
		}
	}
	if h, ok := t["history"].([]any); ok {
		for _, m := range h {
			if m, ok := m.(map[string]any); ok {
				x.message(m)
			}
		}
	}
}

// message rewrites a Message inside a task or an event: its task and
// context become handles where they are the caller's and are left out
// otherwise; so are its referenced tasks.
func (x *exchange) message(m map[string]any) {
	if x.fresh && x.ownMessage(m) {
		// The client's message as it sent it: without the context Warden
		// gave it before forwarding.
		delete(m, "contextId")
	}
	for _, p := range []struct {
		name string
		kind a2a.Kind
	}{{"taskId", a2a.KindTask}, {"contextId", a2a.KindContext}} {
		v, isStr := m[p.name].(string)
		switch {
		case !isStr || v == "":
		case x.owns(p.kind, v):
			m[p.name] = x.seal(p.kind, v)
		default:
			delete(m, p.name)
		}
	}
	x.references(m)
}

// ownMessage reports whether m is the message the request sent: the
// user's, with its messageId.
func (x *exchange) ownMessage(m map[string]any) bool {
	sent, _ := x.call.Params["message"].(map[string]any)
	id, _ := sent["messageId"].(string)
	role, _ := m["role"].(string)
	return id != "" && m["messageId"] == id && (role == "ROLE_USER" || role == "user")
}

// references keeps the referenced tasks of a message that are the caller's,
// as handles.
func (x *exchange) references(m map[string]any) {
	refs, ok := m["referenceTaskIds"].([]any)
	if !ok {
		return
	}
	kept := refs[:0]
	for _, r := range refs {
		if r, ok := r.(string); ok && r != "" && x.owns(a2a.KindTask, r) {
			kept = append(kept, x.seal(a2a.KindTask, r))
		}
	}
	m["referenceTaskIds"] = kept
}

// list keeps the tasks of a ListTasks page that Warden knows to be the
// caller's (this replica, else the shared store; an unknown owner is
// nobody's), and seals the page token. An error means the owners could not
// be read (the shared store is unreachable): nothing of the page may pass.
func (x *exchange) list(res map[string]any) error {
	ts, _ := res["tasks"].([]any)
	ids := make([]string, len(ts))
	for i, t := range ts {
		if t, ok := t.(map[string]any); ok {
			ids[i], _ = t["id"].(string)
		}
	}
	keys := make([]owners.Key, len(ids))
	for i, id := range ids {
		keys[i] = ownerKey(a2a.KindTask, id)
	}
	whose, err := x.s.enforcer.Owners(x.ctx(), keys...)
	if err != nil {
		return err
	}
	kept := ts[:0]
	var states []owners.Fact
	for i, t := range ts {
		t, ok := t.(map[string]any)
		if !ok || whose[i] == "" || whose[i] != x.principal {
			continue
		}
		x.prove(a2a.KindTask, ids[i])
		t["id"] = x.seal(a2a.KindTask, ids[i])
		if c, _ := t["contextId"].(string); c != "" {
			if !x.adopt(a2a.KindContext, c, "", ofOwnTask) {
				continue // the caller's task in another's context: not listed
			}
			t["contextId"] = x.seal(a2a.KindContext, c)
		}
		states = append(states, owners.Fact{Key: keys[i], Status: taskState(t)})
		x.taskMessages(t)
		kept = append(kept, t)
	}
	if _, err := x.apply(states...); err != nil { // one write to the shared store for the page
		return err
	}
	if ts != nil {
		res["tasks"] = kept
	}
	if _, ok := res["totalSize"]; ok {
		// The server's total counts every tenant's tasks (also when none
		// of this page was left out, or the page is empty): never passed.
		// The caller's own total is known when this page is the whole
		// list (no page asked for, none to come); otherwise it is not,
		// and the page's count would be a wrong total: left out.
		next, _ := res["nextPageToken"].(string)
		if asked, _ := x.call.Params["pageToken"].(string); asked == "" && next == "" {
			res["totalSize"] = len(kept)
		} else {
			delete(res, "totalSize")
		}
	}
	x.sealAt(res, "nextPageToken", a2a.KindCursor)
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
	x.sealAt(c, "taskId", a2a.KindTask)
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

// sealAt replaces a non-empty string member with the caller's handle.
func (x *exchange) sealAt(obj map[string]any, name string, kind a2a.Kind) {
	if v, ok := obj[name].(string); ok && v != "" {
		obj[name] = x.seal(kind, v)
	}
}
