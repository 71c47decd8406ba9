package mcp

import (
	"strings"

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
// taskID is the upstream ID params.taskId names.
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
		if _, ok := x.open(kindTask, c.RelatedTaskID); !ok {
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
	out, ok, done := x.toUpstreamFast(body, cursor)
	if !done {
		out, ok = x.toUpstreamDecoded(body, cursor)
	}
	if !ok {
		return body, "", refuseTask
	}
	return out, taskID, refuseNone
}

// toUpstreamDecoded is toUpstream's rewriting on the decoded message.
func (x *exchange) toUpstreamDecoded(body []byte, cursor bool) (out []byte, ok bool) {
	msg, err := decode(body)
	if err != nil {
		return body, false
	}
	p, _ := msg["params"].(map[string]any)
	ok = x.openTask(p)
	for _, k := range []string{"params", "result"} {
		obj, _ := msg[k].(map[string]any)
		meta, _ := obj["_meta"].(map[string]any)
		rel, _ := meta[mcp.RelatedTask].(map[string]any)
		ok = ok && x.openTask(rel)
	}
	if !ok {
		return body, false
	}
	n, _ := p["notifications"].(map[string]any)
	ids, _ := n["taskIds"].([]any)
	for i, v := range ids {
		h, _ := v.(string)
		id, good := x.open(kindTask, h)
		if !good {
			return body, false
		}
		ids[i] = id
	}
	if c, isStr := p["cursor"].(string); isStr && cursor {
		id, good := x.open(kindCursor, c)
		if !good {
			return body, false
		}
		p["cursor"] = id
	}
	return encode(msg), true
}

// openTask replaces the caller's handle in obj.taskId with the upstream ID;
// it is false when that member holds a handle that is not the caller's.
func (x *exchange) openTask(obj map[string]any) bool {
	h, isStr := obj["taskId"].(string)
	if !isStr || !strings.HasPrefix(h, handlePrefix) {
		return true
	}
	id, ok := x.open(kindTask, h)
	if ok {
		obj["taskId"] = id
	}
	return ok
}

// toUpstreamFast is toUpstream's rewriting without decoding, for requests
// whose places of handles are params.taskId and params.cursor: the handles'
// bytes are replaced in place. done is false when the body needs the
// decoding path (a related-task _meta, members of the same name elsewhere
// at that depth, an escape in a key or a handle, an upstream ID that would
// need escaping).
func (x *exchange) toUpstreamFast(body []byte, cursor bool) (out []byte, ok, done bool) {
	if x.call.HasRelatedTask || x.call.HasTaskIDs {
		return nil, false, false
	}
	spans, readable := scanStrings(body, "taskId", "cursor")
	if !readable {
		return nil, false, false
	}
	tasks, cursors := 0, 0
	for _, s := range spans {
		switch {
		case s.depth == 1 && (s.key == "result" || s.key == "error"):
			return nil, false, false // an answer: its object at depth 2 is not params
		case s.depth == 2 && s.key == "taskId":
			tasks++
		case s.depth == 2 && s.key == "cursor":
			cursors++
		}
	}
	if tasks > 1 || cursors > 1 {
		return nil, false, false // which one is params' cannot be told here
	}
	var rep []span
	var with []string
	for _, s := range spans {
		if s.depth != 2 {
			continue
		}
		h := string(body[s.start:s.end])
		var id string
		switch {
		case s.key == "taskId" && x.call.HasTaskID && strings.HasPrefix(h, handlePrefix):
			var good bool
			if id, good = x.open(kindTask, h); !good {
				return body, false, true
			}
		case s.key == "cursor" && cursor: // params.cursor
			var good bool
			if id, good = x.open(kindCursor, h); !good {
				return body, false, true
			}
		default:
			continue
		}
		if !plainString(id) {
			return nil, false, false
		}
		rep, with = append(rep, s), append(with, id)
	}
	return splice(body, rep, with), true, true
}

// plainString reports whether s can sit between JSON quotes unescaped.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
