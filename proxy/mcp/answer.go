package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/agentwarden/warden/proxy/gate"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/proxy/relay"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// fromUpstream reads one message from the upstream toward the caller. It
// fails closed:
//   - an answer (result or error) that does not answer this exchange's
//     request is dropped: Warden cannot know what it answers, so it cannot
//     filter it (on the standalone GET stream every answer is such); an
//     error with a null id answers the message POSTed (answersNull);
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
		out, keep = x.fromUpstreamRead(data)
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

// messageNames are the members of an upstream message Warden reads.
var messageNames = []string{"id", "result", "error", "method", "params"}

// read reads an upstream message for splicing, with its protocol objects
// (jsonrpc.Object): the message's own members, its params and result, their
// _meta and the related-task object there are read by name, so each is held
// to the spelling of the names read from it; what only Walk reaches (a
// tool's output) is not the protocol's. nil for what is not one JSON
// object.
func read(data []byte) *jsonrpc.Object {
	env, _ := jsonrpc.ReadObject(data)
	if env == nil {
		return nil
	}
	env.Hold(messageNames...)
	for _, k := range []string{"result", "params"} {
		obj, _ := env.Obj(k)
		meta, _ := sub(obj, "_meta")
		sub(meta, mcp.RelatedTask)
	}
	return env
}

// sub is o's member name when it is an object; o may be nil (absent).
func sub(o *jsonrpc.Object, name string) (*jsonrpc.Object, bool) {
	if o == nil {
		return nil, false
	}
	return o.Obj(name)
}

// str is o's member name when it is a string; o may be nil (absent).
func str(o *jsonrpc.Object, name string) (string, bool) {
	if o == nil {
		return "", false
	}
	return o.Str(name)
}

// fromUpstreamRead is fromUpstream on the message read for splicing
// (jsonrpc.Object): nothing is decoded into maps or encoded again; the
// handles are spliced in where the upstream IDs were, the tasks/list items
// that are not the caller's cut, and every other byte passes as it came.
//
// What it reads, it reads by name (jsonrpc.Object's one rule): a name read
// two ways in the object it is read from (given twice, or folding like
// another, or, in a protocol object, spelled otherwise) is the message's
// Err: a client may read the one Warden did not, so Warden would learn or
// seal what the client does not see. Such an answer is replaced with an
// error, any other such message dropped. An object Warden only walks
// through (a tool's output, looked into for the taskId members that name
// tasks) may repeat other names: every value is walked, each repetition's
// included, so nothing in it passes unseen.
func (x *exchange) fromUpstreamRead(data []byte) ([]byte, bool) {
	if !jsonrpc.Valid(data) {
		return data, len(bytes.TrimSpace(data)) == 0
	}
	env := read(data)
	if env == nil || env.Err() != nil {
		return nil, false // not one JSON-RPC object, or one read two ways
	}
	isResult, isError := env.Has("result"), env.Has("error")
	method, _ := env.Str("method")
	if method == mcp.NotifyToolsChanged {
		x.s.forgetTools(x.principal, x.sid)
	}
	rawID, _ := env.Raw("id")
	id := idOf(rawID)
	var facts []owners.Fact
	if x.creates() && !isError && (!isResult || method == "" && x.answers(id)) {
		facts = x.related(env)
	}
	changed, answer := false, false
	if method == "" && (isResult || isError) {
		if !x.answers(id) && !(isError && !isResult && x.answersNull(rawID)) {
			return nil, false
		}
		answer = true
		x.settle(isResult)
		if res, ok := env.Obj("result"); ok {
			var err error
			if changed, err = x.learn(res); err != nil {
				return x.unreadable(err), true
			}
		}
	}
	if env.Err() != nil {
		return x.ambiguous(answer)
	}
	if len(facts) == 0 && !changed && jsonrpc.CountFold(data, "taskId") == 0 && bytes.IndexByte(data, '\\') < 0 {
		return data, true // no taskId or taskIds, in any spelling
	}
	if answer || method != "" {
		if f, ok := x.observed(env, method); ok {
			facts = append(facts, f)
		}
	}
	// Whose every task the message names is, in one look-up; a task of
	// the caller's client that the server polls is the client's own.
	places, named := x.named(env, x.clientTaskPolled(env, method))
	if env.Err() != nil {
		return x.ambiguous(answer)
	}
	facts = append(facts, named...)
	got, err := x.apply(facts...)
	if err != nil {
		if answer {
			return x.unreadable(err), true
		}
		x.s.log.Warn("could not tell whose the tasks of an MCP message are; it is dropped", "principal", x.principal, "err", err)
		return nil, false
	}
	sealed, foreign := x.sealTasks(places, facts, got)
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
	return env.AppendTo(make([]byte, 0, len(data)+64)), true
}

// errAmbiguous says an upstream message gives a name Warden reads twice,
// or two that fold alike, in one object.
var errAmbiguous = errors.New("the MCP server's answer gives a member Warden reads twice (or in two cases)")

// ambiguous is what becomes of a message read two ways: an answer to the
// caller's request is replaced with an error, anything else dropped.
func (x *exchange) ambiguous(answer bool) ([]byte, bool) {
	if !answer {
		x.s.log.Warn("an MCP message gives a member Warden reads twice; it is dropped", "principal", x.principal)
		return nil, false
	}
	return x.unreadable(errAmbiguous), true
}

// place is an object of a message that names tasks: its taskId, or the
// taskIds of a listen acknowledgement.
type place struct {
	obj *jsonrpc.Object
	ids *jsonrpc.Array
}

// named returns every place a message names a task (taskId, and the
// taskIds of a listen acknowledgement), at any depth, and a fact for each
// task there that is not already one of the caller's handles: whose each
// is is then read in one look-up. A taskId equal to client (a task of the
// caller's client the server polls, "" none) is left out.
func (x *exchange) named(msg *jsonrpc.Object, client string) ([]place, []owners.Fact) {
	var places []place
	var facts []owners.Fact
	msg.Walk(func(o *jsonrpc.Object) {
		p := place{obj: o}
		id, ok := o.Str("taskId")
		// The client's own task (clienttasks.go) passes as written.
		own := ok && client != "" && id == client && !o.Has("taskIds")
		if ok && !own && !x.ownHandle(id) {
			facts = append(facts, owners.Fact{Key: taskKey(id)})
		}
		if ids, ok := o.Arr("taskIds"); ok {
			p.ids = ids
			for i := range ids.Len() {
				if id, ok := ids.Str(i); ok && !x.ownHandle(id) {
					facts = append(facts, owners.Fact{Key: taskKey(id)})
				}
			}
		}
		if p.ids != nil || o.Has("taskId") && !own {
			places = append(places, p)
		}
	})
	return places, facts
}

func idsLen(a *jsonrpc.Array) int {
	if a == nil {
		return 0
	}
	return a.Len()
}

// sealTasks replaces every task ID of the places that is the caller's
// (got[i] is the owner of facts[i]) with the caller's handle. changed is
// set when one was replaced; foreign when a place names a task that is
// someone else's or unknown: not for this caller.
func (x *exchange) sealTasks(places []place, facts []owners.Fact, got []string) (changed, foreign bool) {
	owner := make(map[string]string, len(facts))
	for i, f := range facts {
		owner[f.Key.ID] = got[i]
	}
	// mine is the caller's handle of a task ID; it is false for a task
	// that is someone else's or unknown: not for this caller.
	mine := func(id string) (string, bool) {
		if x.ownHandle(id) {
			return id, true
		}
		if owner[id] == x.principal {
			return x.seal(kindTask, id), true
		}
		return id, false
	}
	for _, p := range places {
		if id, ok := p.obj.Str("taskId"); ok {
			h, ok := mine(id)
			foreign = foreign || !ok
			if h != id {
				p.obj.SetStr("taskId", h)
				changed = true
			}
		}
		for i := range idsLen(p.ids) {
			if id, ok := p.ids.Str(i); ok {
				h, ok := mine(id)
				foreign = foreign || !ok
				if h != id {
					p.ids.SetStr(i, h)
					changed = true
				}
			}
		}
	}
	return changed, foreign
}

// unreadable replaces the answer to the caller's request when whose its
// tasks are cannot be told (the shared store is unreachable): nothing of it
// passes.
func (x *exchange) unreadable(err error) []byte {
	x.s.log.Warn("could not filter an MCP answer; replacing it with an error", "method", x.call.Method, "principal", x.principal, "err", err)
	x.replaced = true
	if errors.Is(err, errAmbiguous) {
		return mcp.ErrorBody(x.call.ID, mcp.ErrInternal, errAmbiguous.Error())
	}
	if c, ok := gate.Cause(err); ok {
		return mcp.ErrorBody(x.call.ID, mcp.ErrInternal, c)
	}
	return mcp.ErrorBody(x.call.ID, mcp.ErrInternal, unavailable)
}

// observed returns the status of a task where the server states it: the
// params of a task status notification, or the result answering the
// caller's tasks/get (or cancel, pause, resume) about the task it named.
// A taskId and status anywhere else (a tool's output, which may echo what
// the caller sent) say nothing about a task. tasks/list items are read by
// learn, created tasks by learn and related.
func (x *exchange) observed(msg *jsonrpc.Object, method string) (owners.Fact, bool) {
	var obj *jsonrpc.Object
	switch {
	case statusNotice(method):
		obj, _ = msg.Obj("params")
	case method == "" && statusAnswer(x.call.Method):
		obj, _ = msg.Obj("result")
		if id, _ := str(obj, "taskId"); id != x.taskID {
			return owners.Fact{}, false
		}
	}
	id, _ := str(obj, "taskId")
	st, _ := str(obj, "status")
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
// not be read (the shared state is unreachable), or an answer Warden read
// was ambiguous (errAmbiguous); a name read two ways where the caller's
// result is read is res's Err.
func (x *exchange) learn(res *jsonrpc.Object) (bool, error) {
	switch x.call.Method {
	case mcp.MethodToolsList:
		x.s.learnTools(x.principal, x.sid, res, "")
	case mcp.MethodToolsCall:
		task, _ := res.Obj("task") // 2025-11-25: {task: Task}
		if t, _ := res.Str("resultType"); task == nil && t == "task" {
			task = res // 2026-07-28: a flat CreateTaskResult
		}
		id, _ := str(task, "taskId")
		st, _ := str(task, "status")
		if id != "" && res.Err() == nil {
			// The answer to the caller's own call: the task is the
			// caller's, unless known as another's already (the answer
			// then names a task that is not the caller's).
			if _, err := x.apply(owners.Fact{Key: taskKey(id), Created: true, Status: st}); err != nil {
				return false, err
			}
		}
	case mcp.MethodList:
		return true, x.listPage(res)
	}
	return false, nil
}

// listPage makes the caller's page of tasks/list from the upstream's page
// in res: the caller's tasks only, and, while it holds fewer than the
// upstream's page (the server's page size) and the server has more, the
// caller's tasks of the next upstream pages, read with Warden's own
// tasks/list (at most relay.MaxListPages in all). Its nextCursor is the sealed
// cursor of the last upstream page read, given only when another of the
// caller's tasks follows (relay.Ahead, the read-ahead A2A's ListTasks
// shares; security.md V2): a page shows no trace of the tasks left out (no
// empty page with a cursor, no cursor leading only to others' tasks, within
// the bound). The
// items of this page stay where they are (the message's taskIds are sealed
// with the rest of it); those of the next pages are added sealed. An error
// means a page or the owners could not be read: nothing passes.
func (x *exchange) listPage(res *jsonrpc.Object) error {
	list, listed := res.Arr("tasks")
	cursor, _ := res.Str("nextCursor")
	if res.Err() != nil {
		return nil
	}
	kept, n, _, err := x.keepOwn(res, list)
	if err != nil {
		return err
	}
	size := len(kept)
	var more [][]byte // the caller's items of the next pages, sealed
	pages, reads := 1, !x.dry && x.req != nil
	for ; reads && cursor != "" && n+len(more) < max(size, 1) && pages < relay.MaxListPages; pages++ {
		if more, cursor, err = x.fillFrom(more, cursor); err != nil {
			return fmt.Errorf("tasks/list page: %w", err)
		}
	}
	if reads {
		// A cursor only when another of the caller's tasks follows.
		cursor, err = relay.Ahead(cursor, func() bool { return pages < relay.MaxListPages }, func(at string, _ bool) (bool, string, error) {
			pages++
			part := x.hold.Part() // the page is dropped once read: nothing kept
			defer part.Release()
			next, items, err := x.nextPage(part, at)
			if err != nil {
				return false, "", err
			}
			_, mine, _, err := x.keepOwn(next, items)
			at, _ = next.Str("nextCursor")
			return mine > 0, at, err
		})
		if err != nil {
			return fmt.Errorf("tasks/list page: %w", err)
		}
	}
	for i := range size {
		if !kept[i] {
			list.Drop(i)
		}
	}
	switch {
	case listed:
		for _, b := range more {
			list.AppendRaw(b)
		}
	case res.Has("tasks") || len(more) > 0:
		// Not a list: the caller's page is what the next pages held.
		res.SetRaw("tasks", append(append([]byte{'['}, bytes.Join(more, []byte{','})...), ']'))
	}
	if cursor != "" {
		res.SetStr("nextCursor", x.seal(kindCursor, cursor))
	} else {
		res.Del("nextCursor")
	}
	return nil
}

// fillFrom appends to more the caller's items of the upstream's page after
// cursor, sealed, and returns them with the page's nextCursor. What the
// page weighs is charged to the answer's share of the budget (a Part)
// while it is read, and given back but for the items kept.
func (x *exchange) fillFrom(more [][]byte, cursor string) ([][]byte, string, error) {
	part := x.hold.Part()
	defer part.Release()
	next, items, err := x.nextPage(part, cursor)
	if err != nil {
		return nil, "", err
	}
	cursor, _ = next.Str("nextCursor")
	_, _, mine, err := x.keepOwn(next, items)
	if err != nil {
		return nil, "", err
	}
	for _, t := range mine {
		b, err := x.sealed(t)
		if err != nil {
			return nil, "", err
		}
		part.Keep(int64(len(b)))
		more = append(more, b)
	}
	return more, cursor, nil
}

// nextPage reads the upstream's tasks/list page after cursor with Warden's
// own tasks/list, as the caller (its credentials, session and _meta), and
// returns it with its tasks (nil: none), its bytes charged to part.
func (x *exchange) nextPage(part *listener.Hold, cursor string) (*jsonrpc.Object, *jsonrpc.Array, error) {
	next, err := x.s.call(x.req.Context(), x.req, x.strip, part, x.sid, x.call.Params, mcp.MethodList, map[string]any{"cursor": cursor})
	if err == nil && next == nil {
		err = errors.New("an error answer")
	}
	if err != nil {
		return nil, nil, err
	}
	items, _ := next.Arr("tasks")
	return next, items, nil
}

// sealed is an item of a further tasks/list page, the caller's, with the
// tasks it names sealed; an error when one is not the caller's.
func (x *exchange) sealed(item *jsonrpc.Object) ([]byte, error) {
	places, facts := x.named(item, "")
	if item.Err() != nil {
		return nil, errAmbiguous
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, err
	}
	if _, foreign := x.sealTasks(places, facts, got); foreign {
		return nil, errors.New("an item names a task that is not the caller's")
	}
	return item.AppendTo(nil), nil
}

// keepOwn reads a tasks/list page (list nil: none) read from page, learning the statuses
// of the known tasks, and returns which items are the caller's (kept[i]),
// how many, and those items. A task no answer to its owner's own request
// named (one a server made of a plain call, one whose answer Warden never
// read) is nobody's: its owner is never guessed.
func (x *exchange) keepOwn(page *jsonrpc.Object, list *jsonrpc.Array) (kept []bool, n int, items []*jsonrpc.Object, err error) {
	size := 0
	if list != nil {
		size = list.Len()
	}
	facts := make([]owners.Fact, size)
	objs := make([]*jsonrpc.Object, size)
	for i := range size {
		objs[i], _ = list.Obj(i)
		id, _ := str(objs[i], "taskId")
		st, _ := str(objs[i], "status")
		facts[i] = owners.Fact{Key: taskKey(id), Status: st}
	}
	if page.Err() != nil {
		return nil, 0, nil, errAmbiguous
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, 0, nil, err
	}
	kept = make([]bool, size)
	for i := range size {
		if got[i] != "" && got[i] == x.principal {
			kept[i], n = true, n+1
			items = append(items, objs[i])
		}
	}
	if x.dry && n < size {
		x.s.enforcer.Withheld(x.ctx(), "mcp", x.principal, x.call.Method, fmt.Sprintf("tasks/list would have shown %d of %d tasks", n, size))
	}
	return kept, n, items, nil
}
