package mcp

import (
	"strings"

	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// refusal is why toUpstream refused a message.
type refusal uint8

const (
	refuseNone   refusal = iota
	refuseTask           // a place for a task handle holds anything but the caller's: "Task not found"
	refuseCursor         // a tasks/list cursor that is not the caller's
)

// toUpstream checks every place of a request where a handle belongs and
// replaces the caller's handles with the upstream IDs. The places are read
// by Parse after JSON decoding (so "wt2\u002e..." is a handle like any
// other): params.taskId, the related-task _meta (params, or result of a
// client's answer), tasks/list's params.cursor and subscriptions/listen's
// params.notifications.taskIds; each must hold a valid handle of the
// caller (params.taskId in a request), anything else (a raw upstream ID,
// another principal's handle) is refused. Nothing else is rewritten: a
// handle elsewhere (a tool's arguments) reaches the server as the opaque
// string it is, so a tool never learns a task's upstream ID to echo back.
// The upstream IDs are spliced into the message as Parse read it
// (mcp.Call.Request): every other byte passes as it came. taskID is the
// upstream ID params.taskId names.
func (x *exchange) toUpstream(body []byte) (out []byte, taskID string, why refusal) {
	c := x.call
	strictTask := c.HasTaskID && c.Kind == mcp.KindRequest
	if strictTask {
		id, ok := x.open(kindTask, c.TaskID)
		if !ok {
			return body, "", refuseTask
		}
		taskID = id
	}
	if c.HasRelatedTask {
		// A client's answer about a task it runs names that task, its own
		// (clienttasks.go); it passes as written.
		if _, ok := x.open(kindTask, c.RelatedTaskID); !ok && !(c.Kind == mcp.KindResponse && x.clientTask(c.RelatedTaskID)) {
			return body, "", refuseTask
		}
	}
	cursor := c.Kind == mcp.KindRequest && c.Method == mcp.MethodList && c.HasCursor
	if cursor {
		if _, ok := x.open(kindCursor, c.Cursor); !ok {
			return body, "", refuseCursor
		}
	}
	for _, t := range c.TaskIDs {
		if _, ok := x.open(kindTask, t); !ok {
			return body, "", refuseTask
		}
	}
	if !c.HasTaskID && !c.HasRelatedTask && !cursor && !c.HasTaskIDs {
		return body, "", refuseNone
	}
	if c.Request == nil || !x.openIn(c.Request, cursor) {
		return body, "", refuseTask // a message Parse did not read is not forwarded
	}
	return c.Request.AppendTo(make([]byte, 0, len(body)+64)), taskID, refuseNone
}

// openIn replaces the caller's handles in msg, the message as Parse read
// it, with the upstream IDs: params.taskId (a handle; a notification's
// other value stays), params.cursor (tasks/list), the related-task _meta
// of params and of a result, params.notifications.taskIds. It is false
// when a handle there does not open.
func (x *exchange) openIn(msg *jsonrpc.Object, cursor bool) bool {
	if res, ok := msg.Obj("result"); ok && !x.openRelated(res) {
		return false
	}
	p, ok := msg.Obj("params")
	if !ok {
		return true
	}
	if x.call.HasTaskID && !x.openAt(p, "taskId", kindTask) {
		return false
	}
	if cursor && !x.openAt(p, "cursor", kindCursor) {
		return false
	}
	if !x.openRelated(p) {
		return false
	}
	n, ok := p.Obj("notifications")
	if !ok || !x.call.HasTaskIDs {
		return true
	}
	if ids, ok := n.Arr("taskIds"); ok {
		for i := range ids.Len() {
			h, _ := ids.Str(i)
			id, good := x.open(kindTask, h)
			if !good {
				return false
			}
			ids.SetStr(i, id)
		}
	}
	return true
}

// openRelated opens the related-task taskId of obj's _meta.
func (x *exchange) openRelated(obj *jsonrpc.Object) bool {
	meta, ok := obj.Obj("_meta")
	if !ok {
		return true
	}
	rel, ok := meta.Obj(mcp.RelatedTask)
	return !ok || x.openAt(rel, "taskId", kindTask)
}

// openAt replaces the handle obj's member name holds with its upstream ID;
// a value that is not a handle stays (a notification's raw task ID), one
// that does not open is false.
func (x *exchange) openAt(obj *jsonrpc.Object, name string, kind byte) bool {
	h, isStr := obj.Str(name)
	if !isStr || !strings.HasPrefix(h, handlePrefix) {
		return true
	}
	id, ok := x.open(kind, h)
	if ok {
		obj.SetStr(name, id)
	}
	return ok
}
