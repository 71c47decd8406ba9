package mcp

import (
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/mcp"
)

func TestScanStrings(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // key=value of taskId members found
		ok   bool
	}{
		{"params", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a"}}`, []string{"taskId=a"}, true},
		{"nested and arrays", `{"result":{"tasks":[{"taskId":"a"},{"taskId":"b"}]}}`, []string{"taskId=a", "taskId=b"}, true},
		{"inside a text is not a member", `{"result":{"text":"{\"taskId\":\"x\"}"}}`, nil, true},
		{"key with an escape", `{"params":{"task\u0049d":"a"}}`, nil, false},
		{"value with an escape", `{"params":{"taskId":"a\"b"}}`, nil, false},
		{"number value ignored", `{"params":{"taskId":5}}`, nil, true},
		{"array at top", `[{"taskId":"a"}]`, nil, false},
		{"unterminated", `{"params":{"taskId":"a`, nil, false},
		{"trailing garbage", `{"params":{"taskId":"a"}} x`, nil, false},
		{"whitespace", " { \"params\" : { \"taskId\" : \"a\" } } ", []string{"taskId=a"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spans, _, _, ok := scanStrings(nil, []byte(tc.in), "", "taskId")
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			var got []string
			for _, s := range spans {
				if s.key == "taskId" {
					got = append(got, s.key+"="+tc.in[s.start:s.end])
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("found %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// FuzzFromUpstreamFast checks the scanning path against the decoding one:
// wherever the fast path answers, it keeps or drops the same messages and
// gives the same document.
func FuzzFromUpstreamFast(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"working"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-b","status":"completed"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-a","status":"paused"}}`,
		`{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-a"}}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Task not found","data":{"taskId":"t-b"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"taskId\":\"t-b\"}"}]}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"taskId":"t-a"}}`,
		`{"jsonrpc":"2.0","id":1.0,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","taskId":"t-b"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-b","taskId":"t-a"}}`,
		`{"jsonrpc":"2.0","id":1,"Result":{"taskId":"t-b"}}`,
		`{"jsonrpc":"2.0","taskId":"t-b"}`,
		`[{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-b"}}]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		fastAgainstDecoded(t, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`, data)
	})
}

// fastAgainstDecoded reads data, an upstream message, as the answer to
// alice's request req on the fast path and on the decoding one (t-a is
// alice's task, t-b bob's): wherever the fast path answers, both must keep
// or drop it alike and give the same document.
func fastAgainstDecoded(t *testing.T, req, data string) {
	s := unitServer(t)
	taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
	taskCreated(s.enforcer, "t-b", bob, mcp.StatusWorking)
	fast, keepFast, done := exchangeFor(t, s, alice, req).fromUpstreamFast([]byte(data))
	if !done {
		return
	}
	slow, keepSlow := exchangeFor(t, s, alice, req).fromUpstreamDecoded([]byte(data))
	if keepFast != keepSlow || keepFast && !sameJSON(fast, slow) {
		t.Fatalf("fast %s %v, decoded %s %v", fast, keepFast, slow, keepSlow)
	}
}

// FuzzToUpstreamSplice does the same for requests: toUpstream, splicing
// into the message Parse read, against rewriting the message decoded (the
// path it replaced): the same refusal, or the same document.
func FuzzToUpstreamSplice(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"HA"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"HA","message":"m","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"HA"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"HB"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-b"},"x":{"taskId":"HA"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"HC"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"HC","x":{"cursor":"HC"}}}`,
		`{"jsonrpc":"2.0","id":"s","result":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"HA"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["HA","HA"]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"task\u0049d":"HA"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"HA","status":"working"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-a","status":"working"}}`,
		` { "jsonrpc" : "2.0" , "id" : 1 , "method" : "tasks/get" , "params" : { "taskId" : "HA" , "x" : [ 1 , { } ] } } `,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		s := unitServer(t)
		body = strings.ReplaceAll(body, "HA", s.handles.seal(kindTask, alice, "t-a"))
		body = strings.ReplaceAll(body, "HB", s.handles.seal(kindTask, bob, "t-b"))
		body = strings.ReplaceAll(body, "HC", s.handles.sealIn(kindCursor, alice, "s1", "c-2"))
		c, err := mcp.Parse([]byte(body))
		if err != nil {
			return
		}
		x := &exchange{s: s, principal: alice, sid: "s1", call: c}
		cursor := c.Kind == mcp.KindRequest && c.Method == mcp.MethodList && c.HasCursor
		spliced, _, why := x.toUpstream([]byte(body))
		ref, okRef := x.toUpstreamDecoded([]byte(body), cursor)
		if why == refuseNone && !c.HasTaskID && !c.HasRelatedTask && !cursor && !c.HasTaskIDs {
			return // nothing to rewrite: passed as it came
		}
		opens := func(kind byte, v string) bool { _, ok := x.open(kind, v); return ok }
		checked := !(c.HasTaskID && c.Kind == mcp.KindRequest && !opens(kindTask, c.TaskID)) &&
			!(c.HasRelatedTask && !opens(kindTask, c.RelatedTaskID)) && !(cursor && !opens(kindCursor, c.Cursor))
		for _, id := range c.TaskIDs {
			checked = checked && opens(kindTask, id)
		}
		if !checked {
			if why == refuseNone {
				t.Fatalf("%s: passed a handle that is not alice's", body)
			}
			return // refused before anything is rewritten, as before
		}
		if (why == refuseNone) != okRef || okRef && !sameJSON(spliced, ref) {
			t.Fatalf("%s: spliced %s (%v), decoded %s %v", body, spliced, why, ref, okRef)
		}
	})
}

// toUpstreamDecoded is how toUpstream rewrote a message before it spliced:
// on the message decoded, encoded again; FuzzToUpstreamSplice's reference.
func (x *exchange) toUpstreamDecoded(body []byte, cursor bool) (out []byte, ok bool) {
	msg, err := decode(body)
	if err != nil {
		return body, false
	}
	p, _ := msg["params"].(map[string]any)
	ok = x.openTaskDecoded(p)
	for _, k := range []string{"params", "result"} {
		obj, _ := msg[k].(map[string]any)
		meta, _ := obj["_meta"].(map[string]any)
		rel, _ := meta[mcp.RelatedTask].(map[string]any)
		ok = ok && x.openTaskDecoded(rel)
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
func (x *exchange) openTaskDecoded(obj map[string]any) bool {
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

// FuzzListFast checks listFast against the decoding path on answers to
// alice's tasks/list: wherever it answers, it keeps the same tasks and gives
// the same document (t-a is alice's, t-b bob's).
func FuzzListFast(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","status":"working"},{"taskId":"t-b","status":"working"}],"nextCursor":"c-2"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","status":"completed","ttl":1,"createdAt":"x"},{"taskId":"t-c"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":null,"nextCursor":7}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","meta":{"taskId":"t-b"}}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","taskId":"t-b"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a"}],"Tasks":[{"taskId":"t-b"}]}}`,
		`{ "jsonrpc" : "2.0" , "id" : 1 , "result" : { "tasks" : [ { "taskId" : "t-a" , "status" : "working" } , 3 ] , "_meta" : { } } }`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		fastAgainstDecoded(t, `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`, data)
	})
}

// TestListFastTaken: the answers listFast reads (a page of alice's and
// bob's tasks; one with a cursor whose page holds only hers) take no
// decoding.
func TestListFastTaken(t *testing.T) {
	for _, data := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","status":"working"},{"taskId":"t-b","status":"working"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","status":"working"}],"nextCursor":"c-2"}}`,
	} {
		s := unitServer(t)
		taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
		taskCreated(s.enforcer, "t-b", bob, mcp.StatusWorking)
		x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`)
		out, keep, done := x.fromUpstreamFast([]byte(data))
		if !done || !keep || strings.Contains(string(out), "t-b") || strings.Contains(string(out), `"t-a"`) {
			t.Errorf("%s: %s %v %v", data, out, keep, done)
		}
	}
}
