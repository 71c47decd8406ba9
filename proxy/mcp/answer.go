package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/mcp"
)

// fromUpstream reads one message from the upstream toward the caller. It
// fails closed:
//   - an answer (result or error) that does not answer this exchange's
//     request is dropped: Warden cannot know what it answers, so it cannot
//     filter it (on the standalone GET stream every answer is such);
//   - data that is JSON but not one object (a batch) is dropped, data that
//     is not JSON at all passes only when empty (an SSE priming event);
//   - a message naming a task that is not the caller's is dropped, and the
//     answer to the caller's request is replaced with a JSON-RPC error.
//
// Otherwise it settles the pending decision on the answer, learns tools,
// created tasks and statuses, keeps only the caller's tasks in tasks/list
// (sealing its nextCursor), and replaces task IDs with the caller's handles.
// keep is false when the message must not reach the caller.
func (x *exchange) fromUpstream(data []byte) ([]byte, bool) {
	out, keep, done := x.fromUpstreamFast(data)
	if !done {
		out, keep = x.fromUpstreamDecoded(data)
	}
	if x.dry {
		// Learned from, passed as the server sent it; what would have been
		// held back is logged.
		if !keep || x.replaced {
			x.s.enforcer.Withheld(x.ctx(), "mcp", x.principal, x.call.Method, "an upstream message (an answer to no request of the caller's, or naming another's task) would have been withheld from the caller")
		}
		return data, true
	}
	return out, keep
}

// foreignAnswer replaces the answer to the caller's request when it names
// a task that is not the caller's.
func (x *exchange) foreignAnswer() []byte {
	return mcp.ErrorBody(x.call.ID, mcp.ErrInternal, "the MCP server's answer named a task that is not the caller's")
}

// fromUpstreamDecoded is fromUpstream on the decoded message.
func (x *exchange) fromUpstreamDecoded(data []byte) ([]byte, bool) {
	if !json.Valid(data) {
		return data, len(bytes.TrimSpace(data)) == 0
	}
	msg, err := decode(data)
	if err != nil {
		return nil, false // JSON, but not one JSON-RPC object
	}
	_, isResult := msg["result"]
	_, isError := msg["error"]
	method, _ := msg["method"].(string)
	if method == mcp.NotifyToolsChanged {
		x.s.forgetTools(x.principal, x.sid)
	}
	var facts []owners.Fact
	if x.creates() && !isError && (!isResult || method == "" && x.answers(msg["id"])) {
		facts = x.related(msg)
	}
	changed, answer := false, false
	if method == "" && (isResult || isError) {
		if !x.answers(msg["id"]) {
			return nil, false
		}
		answer = true
		x.settle(isResult)
		if res, ok := msg["result"].(map[string]any); ok {
			var err error
			if changed, err = x.learn(res); err != nil {
				return x.unreadable(err), true
			}
		}
	}
	if len(facts) == 0 && !changed && !bytes.Contains(data, []byte(`"taskId"`)) && !bytes.Contains(data, []byte(`"taskIds"`)) && bytes.IndexByte(data, '\\') < 0 {
		return data, true
	}
	if answer || method != "" {
		if f, ok := x.observed(msg, method); ok {
			facts = append(facts, f)
		}
	}
	// Whose every task the message names is, in one look-up.
	facts = append(facts, x.named(msg)...)
	got, err := x.apply(facts...)
	if err != nil {
		if answer {
			return x.unreadable(err), true
		}
		x.s.log.Warn("could not tell whose the tasks of an MCP message are; it is dropped", "principal", x.principal, "err", err)
		return nil, false
	}
	sealed, foreign := x.sealTasks(msg, facts, got)
	changed = changed || sealed
	switch {
	case foreign && answer:
		x.replaced = true
		return x.foreignAnswer(), true
	case foreign:
		return nil, false
	case !changed:
		return data, true
	}
	return encode(msg), true
}

// named returns a fact for every task a decoded message names (taskId, and
// the taskIds of a listen acknowledgement) that is not already one of the
// caller's handles: whose each is is then read in one look-up.
func (x *exchange) named(msg map[string]any) []owners.Fact {
	var facts []owners.Fact
	walk(msg, func(obj map[string]any) {
		if id, ok := obj["taskId"].(string); ok && !x.ownHandle(id) {
			facts = append(facts, owners.Fact{Key: taskKey(id)})
		}
		ids, _ := obj["taskIds"].([]any) // a listen acknowledgement
		for _, v := range ids {
			if id, ok := v.(string); ok && !x.ownHandle(id) {
				facts = append(facts, owners.Fact{Key: taskKey(id)})
			}
		}
	})
	return facts
}

// sealTasks replaces every task ID of a decoded message that is the
// caller's (got[i] is the owner of facts[i]) with the caller's handle.
// changed is set when one was replaced; foreign when the message names a
// task that is someone else's or unknown: not for this caller.
func (x *exchange) sealTasks(msg map[string]any, facts []owners.Fact, got []string) (changed, foreign bool) {
	owner := make(map[string]string, len(facts))
	for i, f := range facts {
		owner[f.Key.ID] = got[i]
	}
	// mine replaces a task ID with the caller's handle; it is false for a
	// task that is someone else's or unknown: not for this caller.
	mine := func(id string) (string, bool) {
		if x.ownHandle(id) {
			return id, true
		}
		if owner[id] == x.principal {
			changed = true
			return x.seal(kindTask, id), true
		}
		return id, false
	}
	walk(msg, func(obj map[string]any) {
		if id, ok := obj["taskId"].(string); ok {
			h, ok := mine(id)
			obj["taskId"], foreign = h, foreign || !ok
		}
		ids, _ := obj["taskIds"].([]any) // a listen acknowledgement
		for i, v := range ids {
			if id, ok := v.(string); ok {
				h, ok := mine(id)
				ids[i], foreign = h, foreign || !ok
			}
		}
	})
	return changed, foreign
}

// unreadable replaces the answer to the caller's request when whose its
// tasks are cannot be told (the shared store is unreachable): nothing of it
// passes.
func (x *exchange) unreadable(err error) []byte {
	x.s.log.Warn("could not filter an MCP answer; replacing it with an error", "method", x.call.Method, "principal", x.principal, "err", err)
	x.replaced = true
	return mcp.ErrorBody(x.call.ID, mcp.ErrInternal, unavailable)
}

// observed returns the status of a task where the server states it: the
// params of a task status notification, or the result answering the
// caller's tasks/get (or cancel, pause, resume) about the task it named.
// A taskId and status anywhere else (a tool's output, which may echo what
// the caller sent) say nothing about a task. tasks/list items are read by
// learn, created tasks by learn and related.
func (x *exchange) observed(msg map[string]any, method string) (owners.Fact, bool) {
	var obj map[string]any
	switch {
	case statusNotice(method):
		obj, _ = msg["params"].(map[string]any)
	case method == "" && statusAnswer(x.call.Method):
		obj, _ = msg["result"].(map[string]any)
		if id, _ := obj["taskId"].(string); id != x.taskID {
			return owners.Fact{}, false
		}
	}
	id, _ := obj["taskId"].(string)
	st, _ := obj["status"].(string)
	if id == "" || st == "" || strings.HasPrefix(id, handlePrefix) {
		return owners.Fact{}, false
	}
	return owners.Fact{Key: taskKey(id), Status: st}, true
}

// statusNotice reports whether notifications of method state a task's
// status in their params (2025-11-25 and SEP-2669; the 2026-07-28
// extension).
func statusNotice(method string) bool {
	return method == mcp.NotifyStatus || method == mcp.NotifyTasks
}

// statusAnswer reports whether the result answering method is the task its
// params.taskId named, with its status.
func statusAnswer(method string) bool {
	switch method {
	case mcp.MethodGet, mcp.MethodCancel, mcp.MethodPause, mcp.MethodResume:
		return true
	}
	return false
}

// learn reads the result answering the caller's request; it reports whether
// it changed the result. An error means the owners of the listed tasks could
// not be read (the shared state is unreachable).
func (x *exchange) learn(res map[string]any) (bool, error) {
	switch x.call.Method {
	case mcp.MethodToolsList:
		x.s.learnTools(x.principal, x.sid, res, "")
	case mcp.MethodToolsCall:
		task, _ := res["task"].(map[string]any) // 2025-11-25: {task: Task}
		if task == nil && res["resultType"] == "task" {
			task = res // 2026-07-28: a flat CreateTaskResult
		}
		if id, ok := task["taskId"].(string); ok && id != "" {
			// The answer to the caller's own call: the task is the
			// caller's, unless known as another's already (the answer
			// then names a task that is not the caller's).
			st, _ := task["status"].(string)
			if _, err := x.apply(owners.Fact{Key: taskKey(id), Created: true, Status: st}); err != nil {
				return false, err
			}
		}
	case mcp.MethodList:
		return true, x.listPage(res)
	}
	return false, nil
}

// maxListPages bounds the upstream pages one tasks/list answer reads.
const maxListPages = 16

// listPage makes the caller's page of tasks/list from the upstream's page
// in res: the caller's tasks only, and, while it holds fewer than the
// upstream's page (the server's page size) and the server has more, the
// caller's tasks of the next upstream pages, read with Warden's own
// tasks/list (at most maxListPages in all). Its nextCursor is the sealed
// cursor of the last upstream page read, absent when that was the last: a
// page shows no trace of the tasks left out (no empty page with a cursor
// while the server has any of the caller's tasks within the bound). An
// error means a page or the owners could not be read: nothing passes.
func (x *exchange) listPage(res map[string]any) error {
	list, _ := res["tasks"].([]any)
	kept, err := x.keepOwn(list)
	if err != nil {
		return err
	}
	cursor, _ := res["nextCursor"].(string)
	for pages := 1; !x.dry && x.req != nil && cursor != "" && len(kept) < max(len(list), 1) && pages < maxListPages; pages++ {
		next, err := x.s.call(x.req.Context(), x.req, x.strip, x.sid, x.call.Params, mcp.MethodList, map[string]any{"cursor": cursor})
		if err == nil && next == nil {
			err = errors.New("an error answer")
		}
		if err != nil {
			return fmt.Errorf("tasks/list page: %w", err)
		}
		more, _ := next["tasks"].([]any)
		mine, err := x.keepOwn(more)
		if err != nil {
			return err
		}
		kept = append(kept, mine...)
		cursor, _ = next["nextCursor"].(string)
	}
	if _, listed := res["tasks"]; listed || len(kept) > 0 {
		res["tasks"] = kept
	}
	delete(res, "nextCursor")
	if cursor != "" {
		res["nextCursor"] = x.seal(kindCursor, cursor)
	}
	return nil
}

// keepOwn returns the caller's tasks of a tasks/list page, learning the
// statuses of the known ones. A task no answer to its owner's own request
// named (one a server made of a plain call, one whose answer Warden never
// read) is nobody's: its owner is never guessed.
func (x *exchange) keepOwn(list []any) ([]any, error) {
	facts := make([]owners.Fact, len(list))
	for i, t := range list {
		m, _ := t.(map[string]any)
		id, _ := m["taskId"].(string)
		st, _ := m["status"].(string)
		facts[i] = owners.Fact{Key: taskKey(id), Status: st}
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, err
	}
	kept := make([]any, 0, len(list))
	for i, t := range list {
		if got[i] != "" && got[i] == x.principal {
			kept = append(kept, t)
		}
	}
	if x.dry && len(kept) < len(list) {
		x.s.enforcer.Withheld(x.ctx(), "mcp", x.principal, x.call.Method, fmt.Sprintf("tasks/list would have shown %d of %d tasks", len(kept), len(list)))
	}
	return kept, nil
}
