package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

func TestWalk(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(`{"a":{"b":[{"c":1},{"d":{"e":{}}},[{"f":2}],3,"s"]},"g":null}`), &v); err != nil {
		t.Fatal(err)
	}
	n := 0
	seen := map[string]bool{}
	walk(v, func(m map[string]any) {
		n++
		for k := range m {
			seen[k] = true
		}
	})
	if n != 7 {
		t.Fatalf("walk visited %d objects, want 7", n)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if !seen[k] {
			t.Errorf("key %s not seen", k)
		}
	}
	walk("scalar", func(map[string]any) { t.Fatal("called on a scalar") })
	walk(nil, func(map[string]any) { t.Fatal("called on nil") })
}

// unitServer is a Server whose upstream is never called.
func unitServer(t testing.TB) *Server {
	t.Helper()
	s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: "http://127.0.0.1:1/mcp"}}, newEnforcer(t), testKey, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func exchangeFor(t *testing.T, s *Server, principal, body string) *exchange {
	t.Helper()
	c, err := mcp.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	x := &exchange{s: s, principal: principal, call: c}
	if c.Kind == mcp.KindRequest {
		// The request's decision, which learns what its answer says.
		d, err := s.tasks.Enforce(t.Context(), tasks.Request{Principal: authn.Principal{ID: principal, Method: string(authn.MethodDev)}, Call: c})
		if err != nil {
			t.Fatal(err)
		}
		x.decision = &d
	}
	return x
}

func TestToUpstream(t *testing.T) {
	s := unitServer(t)
	mine := s.handles.seal(kindTask, alice, "t-a")
	other := s.handles.seal(kindTask, alice, "t-a2")
	bobs := s.handles.seal(kindTask, bob, "t-b")
	session := s.handles.seal(kindSession, alice, "t-a")
	cursor := s.handles.sealIn(kindCursor, alice, "s1", "page-2")
	otherSession := s.handles.sealIn(kindCursor, alice, "s2", "page-2")
	escaped := strings.Replace(mine, ".", `\u002e`, 1)
	rt := mcp.RelatedTask
	tests := []struct {
		name   string
		body   string
		out    string // "": unchanged
		taskID string
		why    refusal
	}{
		{"raw id", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t-a"}}`, "", "", refuseTask},
		{"own handle", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + mine + `"}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"t-a"}}`, "t-a", refuseNone},
		{"own handle, escaped", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + escaped + `"}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"t-a"}}`, "t-a", refuseNone},
		{"own handles in every place, and elsewhere", `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"` + mine + `","message":"m","_meta":{"` + rt + `":{"taskId":"` + other + `"}},"list":[{"taskId":"` + mine + `"}]}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tasks/steer","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-a2"}},"list":[{"taskId":"` + mine + `"}],"message":"m","taskId":"t-a"}}`, "t-a", refuseNone},
		{"own handle in a tool's arguments stays a handle", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"taskId":"` + mine + `","status":"input_required"}}}`, "", "", refuseNone},
		{"a taskId member beside params", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + mine + `"},"x":{"taskId":"` + other + `"}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"t-a"},"x":{"taskId":"` + other + `"}}`, "t-a", refuseNone},
		{"raw id with an own handle in _meta", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"t-b","_meta":{"` + rt + `":{"taskId":"` + mine + `"}}}}`, "", "", refuseTask},
		{"own handle with a raw id in _meta", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"` + mine + `","_meta":{"` + rt + `":{"taskId":"t-b"}}}}`, "", "", refuseTask},
		{"raw related task on tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"` + rt + `":{"taskId":"t-b"}}}}`, "", "", refuseTask},
		{"own related task on tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"` + rt + `":{"taskId":"` + mine + `"}}}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-a"}},"name":"x"}}`, "", refuseNone},
		{"raw related task in a notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"` + rt + `":{"taskId":"t-b"}}}}`, "", "", refuseTask},
		{"own related task in a client's answer", `{"jsonrpc":"2.0","id":"s1","result":{"action":"accept","_meta":{"` + rt + `":{"taskId":"` + mine + `"}}}}`,
			`{"id":"s1","jsonrpc":"2.0","result":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-a"}},"action":"accept"}}`, "", refuseNone},
		{"raw related task in a client's answer", `{"jsonrpc":"2.0","id":"s1","result":{"_meta":{"` + rt + `":{"taskId":"t-b"}}}}`, "", "", refuseTask},
		{"a client's own task in a notification", `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"client-1","status":"working"}}`, "", "", refuseNone},
		{"taskId on another request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","taskId":"t-b"}}`, "", "", refuseTask},
		{"handle in another field is left alone", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"note":"` + mine + `"}}}`, "", "", refuseNone},
		{"numbers kept exactly", `{"jsonrpc":"2.0","id":9007199254740992,"method":"tasks/get","params":{"taskId":"` + mine + `","n":1.50}}`,
			`{"id":9007199254740992,"jsonrpc":"2.0","method":"tasks/get","params":{"n":1.50,"taskId":"t-a"}}`, "t-a", refuseNone},
		{"no HTML escaping", `{"jsonrpc":"2.0","id":"<&>","method":"tasks/get","params":{"taskId":"` + mine + `"}}`,
			`{"id":"<&>","jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"t-a"}}`, "t-a", refuseNone},
		{"another principal's handle", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + bobs + `"}}`, "", "", refuseTask},
		{"another principal's handle outside the places", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + mine + `","_meta":{"x":{"taskId":"` + bobs + `"}}}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tasks/get","params":{"_meta":{"x":{"taskId":"` + bobs + `"}},"taskId":"t-a"}}`, "t-a", refuseNone},
		{"another principal's related task", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + mine + `","_meta":{"` + rt + `":{"taskId":"` + bobs + `"}}}}`, "", "", refuseTask},
		{"a session handle as a task's", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + session + `"}}`, "", "", refuseTask},
		{"a garbled handle", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"wt2.zz"}}`, "", "", refuseTask},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":["` + mine + `"]}`, "", "", refuseNone},
		{"own cursor", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"` + cursor + `"}}`,
			`{"id":1,"jsonrpc":"2.0","method":"tasks/list","params":{"cursor":"page-2"}}`, "", refuseNone},
		{"raw cursor", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"page-2"}}`, "", "", refuseCursor},
		{"cursor of another session", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"` + otherSession + `"}}`, "", "", refuseCursor},
		{"a task handle as a cursor", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"` + mine + `"}}`, "", "", refuseCursor},
		{"listen to own tasks", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + mine + `","` + escaped + `"]}}}`,
			`{"id":1,"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"taskIds":["t-a","t-a"]}}}`, "", refuseNone},
		{"listen to a raw id", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + mine + `","t-b"]}}}`, "", "", refuseTask},
		{"listen to another principal's task", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + bobs + `"]}}}`, "", "", refuseTask},
		{"tools/list cursors are the server's", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"page-2"}}`, "", "", refuseNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := exchangeFor(t, s, alice, tc.body)
			x.sid = "s1"
			out, taskID, why := x.toUpstream([]byte(tc.body))
			want := tc.out
			if want == "" {
				want = tc.body
			}
			if !sameJSON(out, []byte(want)) || taskID != tc.taskID || why != tc.why {
				t.Fatalf("toUpstream =\n%s %q %v\nwant\n%s %q %v", out, taskID, why, want, tc.taskID, tc.why)
			}
		})
	}
}

func TestFromUpstream(t *testing.T) {
	s := unitServer(t)
	e := s.enforcer
	taskCreated(e, "t-a", alice, mcp.StatusWorking)
	taskCreated(e, "t-b", bob, mcp.StatusWorking)
	ha := s.handles.seal(kindTask, alice, "t-a")
	tests := []struct {
		name    string
		request string // the caller's request
		data    string
		out     string // "": unchanged
		keep    bool
	}{
		{"not JSON", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, `hello`, "", false},
		{"empty (an SSE priming event)", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ``, "", true},
		{"JSON but not an object", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `[1,2]`, "", false},
		{"a batch of answers", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `[{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-b"}}]`, "", false},
		{"two objects", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"result":{}} {"jsonrpc":"2.0","id":1,"result":{"taskId":"t-b"}}`, "", false},
		{"answer with another spelling of the id", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1.0,"result":{}}`, "", false},
		{"answer on a stream with no request", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, "", false},
		{"answer naming another's task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"taskId":"t-b"}}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"the MCP server's answer named a task that is not the caller's"}}`, true},
		{"a message that is not JSON-RPC, naming another's task", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"Result":{"taskId":"t-b"}}`, "", false},
		{"a task ID at the top", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","taskId":"t-b"}`, "", false},
		{"an escaped key", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","method":"notifications/message","params":{"task\u0049d":"t-b"}}`, "", false},
		{"answer without tasks, byte for byte", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0", "id":1, "result":{}}`, "", true},
		{"notification about own task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-a","status":"working"}}`,
			`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"status":"working","taskId":"` + ha + `"}}`, true},
		{"notification about another's task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-b","status":"working"}}`, "", false},
		{"notification about an unknown task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t-zzz","status":"working"}}`, "", false},
		{"server request about another's task", `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"x"}}`,
			`{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"_meta":{"` + mcp.RelatedTask + `":{"taskId":"t-b"}}}}`, "", false},
		{"server request about own task", `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"x"}}`,
			`{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"_meta":{"` + mcp.RelatedTask + `":{"taskId":"t-a"}}}}`,
			`{"id":"e1","jsonrpc":"2.0","method":"elicitation/create","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + ha + `"}}}}`, true},
		{"notification with a handle already", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"` + ha + `"}}`, "", true},
		{"answer about own task", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"working"}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"status":"working","taskId":"` + ha + `"}}`, true},
		{"task list filtered", `{"jsonrpc":"2.0","id":"l","method":"tasks/list"}`,
			`{"jsonrpc":"2.0","id":"l","result":{"tasks":[{"taskId":"t-b"},{"taskId":"t-a"},{"taskId":"t-zzz"},"junk"],"nextCursor":"c"}}`,
			`{"id":"l","jsonrpc":"2.0","result":{"nextCursor":"` + s.handles.sealIn(kindCursor, alice, "", "c") + `","tasks":[{"taskId":"` + ha + `"}]}}`, true},
		{"listen acknowledged for own task", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}`,
			`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["t-a","` + ha + `"]}}}`,
			`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["` + ha + `","` + ha + `"]}}}`, true},
		{"listen acknowledged for another's task", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}`,
			`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["t-a","t-b"]}}}`, "", false},
		{"task IDs listed in an answer", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}`,
			`{"jsonrpc":"2.0","id":1,"result":{"taskIds":["t-zzz"]}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"the MCP server's answer named a task that is not the caller's"}}`, true},
		{"task list without tasks", `{"jsonrpc":"2.0","id":"l","method":"tasks/list"}`, `{"jsonrpc":"2.0","id":"l","result":{}}`, "", true},
		{"task list for another request id", `{"jsonrpc":"2.0","id":"l","method":"tasks/list"}`,
			`{"jsonrpc":"2.0","id":"m","result":{"tasks":[{"taskId":"t-a"}]}}`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := exchangeFor(t, s, alice, tc.request)
			out, keep := x.fromUpstream([]byte(tc.data))
			want := tc.out
			if want == "" && tc.keep {
				want = tc.data
			}
			if keep != tc.keep || (keep && !sameJSON(out, []byte(want))) {
				t.Fatalf("fromUpstream =\n%s %v\nwant\n%s %v", out, keep, want, tc.keep)
			}
		})
	}
}

func TestFromUpstreamLearns(t *testing.T) {
	s := unitServer(t)
	e := s.enforcer
	t.Run("tools/list", func(t *testing.T) {
		x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b"},{"name":"c","execution":{"taskSupport":""}},{"name":""},"junk"]}}`))
		for tool, want := range map[string]string{"a": "required", "b": "forbidden", "c": "forbidden"} {
			if got, err := s.taskSupport(context.Background(), nil, false, alice, "", nil, tool); err != nil || got.support != want {
				t.Errorf("taskSupport(%s) = %q, want %q", tool, got.support, want)
			}
		}
		if s.tools.Contains(toolKey{alice, "", ""}) {
			t.Error("a tool without a name was recorded")
		}
	})
	t.Run("created task, 2025", func(t *testing.T) {
		x := exchangeFor(t, s, bob, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","task":{}}}`)
		out, _ := x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"new-1","status":"working"}}}`))
		if owner, ok := taskOwner(e, "new-1"); !ok || owner != bob {
			t.Fatalf("owner %q %v", owner, ok)
		}
		if !strings.Contains(string(out), s.handles.seal(kindTask, bob, "new-1")) {
			t.Fatalf("%s", out)
		}
	})
	t.Run("a created task already another's", func(t *testing.T) {
		taskCreated(e, "taken", alice, mcp.StatusWorking)
		x := exchangeFor(t, s, bob, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","task":{}}}`)
		out, keep := x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"taken","status":"working"}}}`))
		if owner, _ := taskOwner(e, "taken"); owner != alice || !keep || !strings.Contains(string(out), "not the caller's") {
			t.Fatalf("owner %q; %s %v", owner, out, keep)
		}
	})
	t.Run("created task, 2026", func(t *testing.T) {
		x := exchangeFor(t, s, bob, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a"}}`)
		x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"new-2","status":"working"}}`))
		if owner, ok := taskOwner(e, "new-2"); !ok || owner != bob {
			t.Fatalf("owner %q %v", owner, ok)
		}
	})
	t.Run("not a task result", func(t *testing.T) {
		x := exchangeFor(t, s, bob, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a"}}`)
		x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete","taskId":"new-3"}}`))
		x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"x","data":{"task":{"taskId":"new-4"}}}}`))
		x2 := exchangeFor(t, s, bob, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a"}}`)
		x2.fromUpstream([]byte(`{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"new-5"}}}`))
		for _, id := range []string{"new-3", "new-4", "new-5"} {
			if _, ok := taskOwner(e, id); ok {
				t.Errorf("%s recorded", id)
			}
		}
	})
	t.Run("a related task is learned only when nobody's", func(t *testing.T) {
		taskCreated(e, "rel-bob", bob, mcp.StatusWorking)
		rel := func(id string) []byte {
			return []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"` + mcp.RelatedTask + `":{"taskId":"` + id + `"}}}}`)
		}
		for _, tc := range []struct{ id, owner string }{{"rel-bob", bob}, {"rel-new", alice}} {
			x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"a","task":{}}}`)
			x.fromUpstream(rel(tc.id))
			if o, _ := taskOwner(e, tc.id); o != tc.owner {
				t.Errorf("related %s: owner %q, want %q", tc.id, o, tc.owner)
			}
		}
	})
	t.Run("statuses", func(t *testing.T) {
		taskCreated(e, "st-1", alice, mcp.StatusWorking)
		x := exchangeFor(t, s, bob, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		// Bob's stream does not get alice's notification, but Warden
		// learns the status from it.
		if _, keep := x.fromUpstream([]byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"st-1","status":"paused"}}`)); keep {
			t.Fatal("kept")
		}
		d, err := tasks.New(e).Enforce(context.Background(), tasks.Request{
			Principal: authn.Principal{ID: alice}, TaskID: "st-1", Owner: true,
			Call: mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodPause, HasTaskID: true, TaskID: "h"},
		})
		if err != nil || d.Allow {
			t.Fatalf("pause of a paused task: %+v %v", d, err)
		}
	})
}

// TestStatusSources: a task's status is read only where the server states
// it, on the fast and the decoding path alike; a taskId and status a tool
// echoes, or any other nested pair, changes nothing.
func TestStatusSources(t *testing.T) {
	s := unitServer(t)
	e := s.enforcer
	get := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"h"}}`
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	tests := []struct {
		name     string
		request  string
		data     string // TASK is the task's upstream ID
		observed bool
	}{
		{"tasks/get answer", get, `{"jsonrpc":"2.0","id":1,"result":{"taskId":"TASK","status":"paused"}}`, true},
		{"tasks/get answer about another task", get, `{"jsonrpc":"2.0","id":1,"result":{"taskId":"TASK-other","status":"paused"},"x":{"taskId":"TASK","status":"paused"}}`, false},
		{"tasks/get error", get, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m","data":{"taskId":"TASK","status":"paused"}}}`, false},
		{"a tool's echo", call, `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"taskId":"TASK","status":"paused"}}}`, false},
		{"a tool's echo at the result's top", call, `{"jsonrpc":"2.0","id":1,"result":{"taskId":"TASK","status":"paused"}}`, false},
		{"status notification", call, `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"TASK","status":"paused"}}`, true},
		{"status notification, escaped method", call, `{"jsonrpc":"2.0","method":"notifications\/tasks\/status","params":{"taskId":"TASK","status":"paused"}}`, true},
		{"2026 tasks notification", call, `{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"TASK","status":"paused"}}`, true},
		{"nested in a status notification", call, `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"TASK-other","status":"working","x":{"taskId":"TASK","status":"paused"}}}`, false},
		{"another notification", call, `{"jsonrpc":"2.0","method":"notifications/message","params":{"taskId":"TASK","status":"paused"}}`, false},
		{"a log message's data", call, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"taskId":"TASK","status":"paused"}}}`, false},
		{"tasks/list item", `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"TASK","status":"paused"}]}}`, true},
	}
	n := 0
	for _, tc := range tests {
		for _, path := range []string{"fast", "decoded"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				n++
				id := fmt.Sprintf("st-%d", n)
				taskCreated(e, id, alice, mcp.StatusWorking)
				taskCreated(e, id+"-other", alice, mcp.StatusWorking)
				x := exchangeFor(t, s, alice, tc.request)
				x.taskID = id
				data := []byte(strings.ReplaceAll(tc.data, "TASK", id))
				if path == "fast" {
					x.fromUpstream(data)
				} else {
					x.fromUpstreamDecoded(data)
				}
				// resume is allowed from paused only.
				d, err := tasks.New(e).Enforce(context.Background(), tasks.Request{
					Principal: authn.Principal{ID: alice}, TaskID: id, Owner: true,
					Call: mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodResume, HasTaskID: true, TaskID: "h"},
				})
				if err != nil {
					t.Fatal(err)
				}
				d.Settle(false)
				if d.Allow != tc.observed {
					t.Fatalf("status paused observed = %v, want %v", d.Allow, tc.observed)
				}
			})
		}
	}
}

func TestFromUpstreamSettles(t *testing.T) {
	s := unitServer(t)
	e := s.enforcer
	taskCreated(e, "t-a", alice, mcp.StatusWorking)
	limits := mcp.Limits{MaxSteerQueue: 1}
	steer := func(id string) *exchange {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/steer","params":{"taskId":"h","message":"m"}}`
		x := exchangeFor(t, s, alice, body)
		d, err := tasks.New(e).Enforce(context.Background(), tasks.Request{Principal: authn.Principal{ID: alice}, Call: x.call, TaskID: "t-a", Owner: true, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allow {
			return nil
		}
		x.decision = &d
		return x
	}
	tests := []struct {
		name   string
		answer string
		free   bool // the queue place is given back
	}{
		{"error answer", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}`, true},
		{"answer to another id", `{"jsonrpc":"2.0","id":2,"result":{}}`, true},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`, true},
		{"result", `{"jsonrpc":"2.0","id":1,"result":{}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := steer("1")
			if x == nil {
				t.Fatal("first steer refused")
			}
			x.fromUpstream([]byte(tc.answer))
			x.settle(false) // what forward does when the exchange ends
			second := steer("3")
			if (second != nil) != tc.free {
				t.Fatalf("second steer allowed: %v, want %v", second != nil, tc.free)
			}
			if second != nil {
				second.settle(false)
			}
			taskObserved(e, "t-a", mcp.StatusInputRequired) // reset for the next case
			taskObserved(e, "t-a", mcp.StatusWorking)
		})
	}
}

// sameJSON compares two JSON documents by value (member order and spacing
// aside); non-JSON compares as bytes.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(va, vb)
}

// TestToolsChangedForgets: a server's notifications/tools/list_changed on a
// session makes Warden read that session's taskSupport again, on the fast
// and the decoding path; other sessions keep theirs.
func TestToolsChangedForgets(t *testing.T) {
	for _, data := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"\u006e":1}}`, // an escaped key: the decoding path
		`{"jsonrpc":"2.0","method":"notifications\/tools\/list_changed"}`,                     // an escaped method
	} {
		s := unitServer(t)
		list, _ := jsonrpc.ReadObject([]byte(`{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}`))
		s.learnTools(alice, "s1", list, "")
		s.learnTools(alice, "s2", list, "")
		s.learnTools(bob, "s1", list, "")
		x := &exchange{s: s, principal: alice, sid: "s1"}
		if _, keep := x.fromUpstream([]byte(data)); !keep {
			t.Fatalf("%s dropped", data)
		}
		for k, want := range map[toolKey]bool{{alice, "s1", "a"}: false, {alice, "s2", "a"}: true, {bob, "s1", "a"}: true} {
			if got := s.tools.Contains(k); got != want {
				t.Errorf("%s: %+v remembered %v, want %v", data, k, got, want)
			}
		}
	}
}
