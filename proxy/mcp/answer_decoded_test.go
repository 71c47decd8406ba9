package mcp

// The answer path as it was before it read answers as jsonrpc.Objects: the
// message decoded into maps, rewritten, encoded again. It is the reference
// FuzzFromUpstreamRead and TestFromUpstreamEquivalent compare the spliced
// path with, on answers where no name Warden reads is given twice.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

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
		facts = x.relatedDecoded(msg)
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
			if changed, err = x.learnDecoded(res); err != nil {
				return x.unreadable(err), true
			}
		}
	}
	if len(facts) == 0 && !changed && !bytes.Contains(data, []byte(`"taskId"`)) && !bytes.Contains(data, []byte(`"taskIds"`)) && bytes.IndexByte(data, '\\') < 0 {
		return data, true
	}
	if answer || method != "" {
		if f, ok := x.observedDecoded(msg, method); ok {
			facts = append(facts, f)
		}
	}
	// Whose every task the message names is, in one look-up.
	facts = append(facts, x.namedDecoded(msg)...)
	got, err := x.apply(facts...)
	if err != nil {
		if answer {
			return x.unreadable(err), true
		}
		x.s.log.Warn("could not tell whose the tasks of an MCP message are; it is dropped", "principal", x.principal, "err", err)
		return nil, false
	}
	sealed, foreign := x.sealTasksDecoded(msg, facts, got)
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
func (x *exchange) namedDecoded(msg map[string]any) []owners.Fact {
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
func (x *exchange) sealTasksDecoded(msg map[string]any, facts []owners.Fact, got []string) (changed, foreign bool) {
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

// observed returns the status of a task where the server states it: the
// params of a task status notification, or the result answering the
// caller's tasks/get (or cancel, pause, resume) about the task it named.
// A taskId and status anywhere else (a tool's output, which may echo what
// the caller sent) say nothing about a task. tasks/list items are read by
// learn, created tasks by learn and related.
func (x *exchange) observedDecoded(msg map[string]any, method string) (owners.Fact, bool) {
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

// learn reads the result answering the caller's request; it reports whether
// it changed the result. An error means the owners of the listed tasks could
// not be read (the shared state is unreachable).
func (x *exchange) learnDecoded(res map[string]any) (bool, error) {
	switch x.call.Method {
	case mcp.MethodToolsList:
		x.s.learnToolsDecoded(x.principal, x.sid, res, "")
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
		return true, x.listPageDecoded(res)
	}
	return false, nil
}

// listPage makes the caller's page of tasks/list from the upstream's page
// in res: the caller's tasks only, and, while it holds fewer than the
// upstream's page (the server's page size) and the server has more, the
// caller's tasks of the next upstream pages, read with Warden's own
// tasks/list (at most relay.MaxListPages in all). Its nextCursor is the sealed
// cursor of the last upstream page read, absent when that was the last: a
// page shows no trace of the tasks left out (no empty page with a cursor
// while the server has any of the caller's tasks within the bound). An
// error means a page or the owners could not be read: nothing passes.
func (x *exchange) listPageDecoded(res map[string]any) error {
	list, _ := res["tasks"].([]any)
	kept, err := x.keepOwnDecoded(list)
	if err != nil {
		return err
	}
	cursor, _ := res["nextCursor"].(string)
	page := func(cursor string) (map[string]any, error) {
		nextObj, err := x.s.call(x.req.Context(), x.req, x.strip, nil, x.sid, x.call.Params, mcp.MethodList, map[string]any{"cursor": cursor})
		var next map[string]any
		if nextObj != nil {
			next, _ = decode(nextObj.Source())
		}
		if err == nil && next == nil {
			err = errors.New("an error answer")
		}
		if err != nil {
			return nil, fmt.Errorf("tasks/list page: %w", err)
		}
		return next, nil
	}
	pages, reads := 1, !x.dry && x.req != nil
	for ; reads && cursor != "" && len(kept) < max(len(list), 1) && pages < relay.MaxListPages; pages++ {
		next, err := page(cursor)
		if err != nil {
			return err
		}
		more, _ := next["tasks"].([]any)
		mine, err := x.keepOwnDecoded(more)
		if err != nil {
			return err
		}
		kept = append(kept, mine...)
		cursor, _ = next["nextCursor"].(string)
	}
	if reads {
		var err error
		cursor, err = relay.Ahead(cursor, func() bool { return pages < relay.MaxListPages }, func(at string, _ bool) (bool, string, error) {
			pages++
			next, err := page(at)
			if err != nil {
				return false, "", err
			}
			more, _ := next["tasks"].([]any)
			mine, err := x.keepOwnDecoded(more)
			at, _ = next["nextCursor"].(string)
			return len(mine) > 0, at, err
		})
		if err != nil {
			return err
		}
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
func (x *exchange) keepOwnDecoded(list []any) ([]any, error) {
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

// related returns the facts of a message on the stream of the caller's
// tools/call that relates itself to a task (the related-task _meta of the
// answer's result, or of a notification or request's params): the server
// ran the call as that task, so it is the caller's unless another's
// already. Bare status notifications say no such thing, as a server that
// broadcasts them would give the caller someone else's task.
func (x *exchange) relatedDecoded(msg map[string]any) []owners.Fact {
	var facts []owners.Fact
	for _, k := range []string{"result", "params"} {
		obj, _ := msg[k].(map[string]any)
		meta, _ := obj["_meta"].(map[string]any)
		rel, _ := meta[mcp.RelatedTask].(map[string]any)
		id, _ := rel["taskId"].(string)
		if id == "" || strings.HasPrefix(id, handlePrefix) {
			continue
		}
		facts = append(facts, owners.Fact{Key: taskKey(id), Created: true})
	}
	return facts
}

func decode(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

func encode(m map[string]any) []byte {
	b, _ := jsonrpc.Encode(m) // decoded JSON always encodes
	return b
}

// walk calls fn on every object in v, depth first.
func walk(v any, fn func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		fn(t)
		for _, c := range t {
			walk(c, fn)
		}
	case []any:
		for _, c := range t {
			walk(c, fn)
		}
	}
}

// learnTools records execution.taskSupport of every listed tool (absent
// means forbidden) for the principal's session, and returns want's.
func (s *Server) learnToolsDecoded(principal, sid string, result map[string]any, want string) (support string, found bool) {
	tools, _ := result["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			continue
		}
		v := mcp.SupportForbidden
		if ex, ok := m["execution"].(map[string]any); ok {
			if ts, ok := ex["taskSupport"].(string); ok && ts != "" {
				v = ts
			}
		}
		s.tools.Add(principal, toolKey{principal, sid, name}, tool{support: v})
		if name == want {
			support, found = v, true
		}
	}
	return support, found
}
