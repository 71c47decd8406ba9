package mcp

import (
	"strings"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// A client-side task (2025-11-25 tasks, the receiver side): the server asks
// the client for something with params.task (a task-augmented
// elicitation/create or sampling/createMessage), the client answers with a
// CreateTaskResult naming a task it runs, and the server then polls it with
// tasks/get, tasks/result and tasks/cancel sent to the client, whose
// answers name it in related-task metadata. Such a task ID is the client's
// own, never the server's: it is neither sealed nor one of the owner table's
// tasks. Warden remembers the IDs a principal's client created in one
// session, and lets exactly those pass where only the caller's server tasks
// may: in the server's tasks/* requests to that client and in the client's
// answers' related-task metadata. An ID Warden knows as a server task is
// never learned; a client naming another's task as its own otherwise learns
// nothing: it gets only the server's requests about the ID it gave.

// maxClientTasks bounds the client-side task IDs remembered.
const maxClientTasks = 16384

// clientTaskKey names a client-side task as one principal's client created
// it in one upstream session.
type clientTaskKey struct{ principal, sid, id string }

// newClientTasks is the table of client-side tasks, of size entries, each
// principal holding at most an eighth (shareOf) of it: a client answering
// with made-up CreateTaskResults (no server request is needed) forgets its
// own, never another principal's.
func newClientTasks(size int, w *owners.Watch) *owners.Cache[clientTaskKey, struct{}] {
	return owners.NewCache[clientTaskKey, struct{}](size, size/shareOf, w, owners.TableClientTasks)
}

// learnClientTask remembers the task a client's answer (a CreateTaskResult:
// result.task.taskId) says it created.
func (x *exchange) learnClientTask() {
	if x.call.Kind != mcp.KindResponse || x.call.Request == nil {
		return
	}
	res, ok := x.call.Request.Obj("result")
	if !ok {
		return
	}
	task, ok := res.Obj("task")
	if !ok {
		return
	}
	id, ok := task.Str("taskId")
	if !ok || id == "" || strings.HasPrefix(id, handlePrefix) || res.Err() != nil {
		return
	}
	// A server task (anyone's, as far as Warden knows) is never a client's.
	if o, err := x.s.enforcer.Owners(x.ctx(), x.principal, taskKey(id)); err != nil || o[0] != "" {
		return
	}
	x.s.clientTasks.Add(x.principal, clientTaskKey{x.principal, x.sid, id}, struct{}{})
}

// clientTask reports whether id is a task the caller's client created in
// this session.
func (x *exchange) clientTask(id string) bool {
	return id != "" && x.s.clientTasks.Contains(clientTaskKey{x.principal, x.sid, id})
}

// clientTaskPolled is the task ID an upstream request to the client polls
// (tasks/get, tasks/result, tasks/cancel: params.taskId) when it is one the
// caller's client created; "" otherwise.
func (x *exchange) clientTaskPolled(msg *jsonrpc.Object, method string) string {
	switch method {
	case mcp.MethodGet, mcp.MethodResult, mcp.MethodCancel:
	default:
		return ""
	}
	if !msg.Has("id") {
		return "" // a request, answered by the client
	}
	p, ok := msg.Obj("params")
	if !ok {
		return ""
	}
	if id, ok := p.Str("taskId"); ok && x.clientTask(id) {
		return id
	}
	return ""
}
