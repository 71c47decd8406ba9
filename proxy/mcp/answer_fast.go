package mcp

import (
	"bytes"

	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// fromUpstreamFast is fromUpstream without decoding, for the messages that
// need no restructuring (everything but the answers to tools/list,
// tools/call and tasks/list) and name only the caller's tasks. done is false
// when the decoding path must run.
func (x *exchange) fromUpstreamFast(data []byte) (out []byte, keep, done bool) {
	var spanBuf [8]span // id, result, a task's taskId and status: a few
	spans, folds, valid, readable := scanStrings(spanBuf[:0], data, "taskIds", "taskId", "status")
	if !valid || folds > 0 {
		return nil, false, false // taskIds (a listen acknowledgement, in any spelling) is an array
	}
	if x.call.Method == mcp.MethodList {
		if out, keep, done := x.listFast(data); done {
			return out, keep, true
		}
	}
	if !readable || repeated(spans) {
		return nil, false, false
	}
	var id, method []byte
	var result span
	hasResult, hasError, hasMethod := false, false, false
	for _, s := range spans {
		if s.depth != 1 {
			continue
		}
		switch s.key {
		case "id":
			id = nil
			if s.end > s.start {
				id = data[s.start:s.end]
			}
		case "result":
			hasResult = true
			result = s
		case "error":
			hasError = true
		case "method":
			hasMethod = s.end > s.start+2 && data[s.start] == '"' // a non-empty string
			if hasMethod {
				method = data[s.start+1 : s.end-1]
				if bytes.IndexByte(method, '\\') >= 0 {
					return nil, false, false // the decoding path reads it as the client does
				}
			}
		}
	}
	if !hasMethod && (hasResult || hasError) {
		v, ok := idValue(id)
		if (!ok || !x.answers(v)) && !(hasError && !hasResult && x.answersNull(id)) {
			return nil, false, true // an answer to no request of this exchange
		}
		if hasResult && learns(x.call.Method) && (x.call.Method != mcp.MethodToolsCall || hasKey(spans, "taskId")) {
			return nil, false, false
		}
		x.settle(hasResult)
	}
	if hasMethod && string(method) == mcp.NotifyToolsChanged {
		x.s.forgetTools(x.principal, x.sid)
	}
	// Statuses are read only where the server states them (observe): at
	// depth 2, in the answer's result or the notification's params.
	source := hasMethod && statusNotice(string(method)) || !hasMethod && hasResult && !hasError && statusAnswer(x.call.Method)
	statusOf := func(obj int) (string, bool) {
		for _, s := range spans {
			if s.key == "status" && s.obj == obj && s.depth == 2 {
				return string(data[s.start:s.end]), true
			}
		}
		return "", false
	}
	// A message names a task or two: on the stack while they are few.
	var atBuf [2]span
	var factsBuf [2]owners.Fact
	at, facts := atBuf[:0], factsBuf[:0]
	for _, s := range spans {
		if s.key != "taskId" {
			continue
		}
		tid := string(data[s.start:s.end])
		if x.ownHandle(tid) {
			continue
		}
		f := owners.Fact{Key: taskKey(tid)}
		if st, ok := statusOf(s.obj); ok && source && s.depth == 2 && (hasMethod || tid == x.taskID && s.start > result.start && s.end < jsonrpc.ValueEnd(data, result.start)) {
			f.Status = st
		}
		at, facts = append(at, s), append(facts, f)
	}
	if len(at) == 0 {
		return data, true, true
	}
	got, err := x.apply(facts...)
	if err != nil {
		return nil, false, false // the decoding path answers for it
	}
	var withBuf [2]string
	with := withBuf[:0]
	for i := range at {
		if got[i] != x.principal {
			return nil, false, false // not the caller's, or new: the decoding path decides
		}
		with = append(with, x.seal(kindTask, facts[i].Key.ID))
	}
	return splice(data, at, with), true, true
}
