package mcp

import (
	"bytes"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// listNames are the members of a tasks/list answer listFast reads.
var listNames = []string{"jsonrpc", "id", "result", "error", "method"}

// listFast is fromUpstream for the answer to the caller's tasks/list,
// without decoding (jsonrpc.Object): the items that are not the caller's
// are cut, the others' taskId sealed, nextCursor sealed; every other byte
// passes as it came. It reads only an answer that needs no other page of
// the upstream's (the server's last page, or one no further page is read
// for) and names tasks only as
// its items' taskId, with no escape anywhere; done is false for any other
// (the scanning and decoding paths then read it, as before).
func (x *exchange) listFast(data []byte) (out []byte, keep, done bool) {
	if x.dry || bytes.IndexByte(data, '\\') >= 0 {
		return nil, false, false
	}
	env, err := jsonrpc.ReadObject(data)
	if err != nil {
		return nil, false, false
	}
	if env.Hold(listNames...); env.Err() != nil || env.Has("method") || env.Has("error") {
		return nil, false, false
	}
	res, ok := env.Obj("result")
	if id, _ := env.Raw("id"); !ok || !x.answers(idOf(id)) {
		return nil, false, false // not the answer to the caller's tasks/list
	}
	list, listed := res.Arr("tasks")
	if !listed && res.Has("tasks") {
		return nil, false, false
	}
	n := 0
	if listed {
		n = list.Len()
	}
	if jsonrpc.CountFold(data, "taskId") != n {
		return nil, false, false // a taskId elsewhere, in any spelling: the reading path checks each
	}
	ids := make([]string, n)
	facts := make([]owners.Fact, n)
	for i := range n {
		t, isObj := list.Obj(i)
		if !isObj {
			return nil, false, false
		}
		if ids[i], ok = t.Str("taskId"); !ok {
			return nil, false, false
		}
		st, _ := t.Str("status")
		facts[i] = owners.Fact{Key: taskKey(ids[i]), Status: st}
	}
	cursor, _ := res.Str("nextCursor")
	if env.Err() != nil {
		return nil, false, false
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, false, false
	}
	kept := 0
	for i := range n {
		if got[i] != "" && got[i] == x.principal {
			kept++
		}
	}
	if x.req != nil && cursor != "" {
		// The caller's page reads the upstream's next pages too
		// (listPage): to fill it, or to tell whether another of the
		// caller's tasks follows its cursor.
		return nil, false, false
	}
	for i := range n {
		if got[i] != "" && got[i] == x.principal {
			t, _ := list.Obj(i)
			t.SetStr("taskId", x.seal(kindTask, ids[i]))
		} else {
			list.Drop(i)
		}
	}
	if cursor != "" {
		res.SetStr("nextCursor", x.seal(kindCursor, cursor))
	} else {
		res.Del("nextCursor")
	}
	x.settle(true)
	return env.AppendTo(make([]byte, 0, min(len(data), 64<<10))), true, true
}

// idOf is a raw id decoded, nil when it is none.
func idOf(raw []byte) any {
	v, _ := idValue(raw)
	return v
}
