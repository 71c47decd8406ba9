package a2a

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules/a2a"
)

// answerServer is a server of upstream, public at warden.example, where
// task-1 and ctx-1 are alice's, task-2 and ctx-2 bob's.
func answerServer(t testing.TB, upstream string) *Server {
	t.Helper()
	e := newEnforcer(t)
	s, err := New(Config{HTTPConfig: listener.HTTPConfig{Upstream: upstream}, PublicURL: "https://warden.example/jsonrpc"}, e, testKey, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ task, ctx, owner string }{{"task-1", "ctx-1", "alice"}, {"task-2", "ctx-2", "bob"}} {
		if _, err := a2aSeen(e, context.Background(), owners.Key{Kind: owners.A2ATask, ID: k.task}, k.owner, "TASK_STATE_WORKING"); err != nil {
			t.Fatal(err)
		}
		if _, err := a2aSeen(e, context.Background(), owners.Key{Kind: owners.A2AContext, ID: k.ctx}, k.owner, ""); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// answerExchange is bob's exchange of method about his task-2 on s.
func answerExchange(s *Server, method string) *exchange {
	x := &exchange{s: s, principal: "bob", call: a2a.Call{ID: json.RawMessage("7"), Method: method}}
	if method != a2a.MethodExtendedCard {
		x.taskID = "task-2"
		x.prove(a2a.KindTask, "task-2")
	}
	return x
}

// TestAnswerAmbiguousNames: an answer in which a member Warden reads by
// name (to seal it, withhold it or point it at Warden) is given twice, or
// in two cases, or alone in another case, in a push config (Get, Create,
// each of a List's), its authentication, 0.3's nested config, the list
// itself, the extended card or one of its interfaces, never passes: a
// client matching names without case (Go's encoding/json, a2a-go) would
// read the one Warden did not rewrite (another's task id, the credentials
// Warden withholds, the upstream's own URL). Before, these were decoded
// into maps, where "Token" and "token" are two keys: the one Warden did not
// look at passed raw.
func TestAnswerAmbiguousNames(t *testing.T) {
	s := answerServer(t, "http://127.0.0.1:1/jsonrpc")
	answer := func(result string) string { return `{"jsonrpc":"2.0","id":7,"result":` + result + `}` }
	list := func(c string) string { return answer(`{"configs":[` + c + `]}`) }
	const cfg = `"id":"p","taskId":"task-2","url":"https://hooks.example/"`
	tests := []struct {
		name, method, answer string
		secret               string // what must not reach the caller
	}{
		{"list: token in two cases", a2a.MethodListPush, list(`{` + cfg + `,"token":"t","Token":"SECRET"}`), "SECRET"},
		{"list: token in another case alone", a2a.MethodListPush, list(`{` + cfg + `,"TOKEN":"SECRET"}`), "SECRET"},
		{"list: authentication in two cases", a2a.MethodListPush, list(`{` + cfg + `,"authentication":{"schemes":["Bearer"]},"Authentication":{"schemes":["Bearer"],"credentials":"SECRET"}}`), "SECRET"},
		{"list: authentication in another case alone", a2a.MethodListPush, list(`{` + cfg + `,"Authentication":{"schemes":["Bearer"],"credentials":"SECRET"}}`), "SECRET"},
		{"list: credentials in two cases", a2a.MethodListPush, list(`{` + cfg + `,"authentication":{"credentials":"c","Credentials":"SECRET"}}`), "SECRET"},
		{"list: credentials in another case alone", a2a.MethodListPush, list(`{` + cfg + `,"authentication":{"CREDENTIALS":"SECRET"}}`), "SECRET"},
		{"list: another's task id in another case", a2a.MethodListPush, list(`{` + cfg + `,"TaskId":"task-1"}`), "task-1"},
		{"list: the only task id in another case", a2a.MethodListPush, list(`{"id":"p","taskID":"task-1","url":"https://hooks.example/"}`), "task-1"},
		{"list: the configs in another case", a2a.MethodListPush, answer(`{"Configs":[{"taskId":"task-1","url":"https://a/","token":"SECRET"}]}`), "SECRET"},
		{"list: the configs twice", a2a.MethodListPush, answer(`{"configs":[],"configs":[{"taskId":"task-1","token":"SECRET"}]}`), "SECRET"},
		{"list: token twice", a2a.MethodListPush, list(`{` + cfg + `,"token":"SECRET","token":"SECRET"}`), "SECRET"},
		{"get: token in two cases", a2a.MethodGetPush, answer(`{` + cfg + `,"token":"t","Token":"SECRET"}`), "SECRET"},
		{"get: the url in another case", a2a.MethodGetPush, answer(`{` + cfg + `,"URL":"https://SECRET/"}`), "SECRET"},
		{"get: 0.3 nesting, token in another case", a2a.MethodGetPush, answer(`{"taskId":"task-2","pushNotificationConfig":{"url":"https://h/","Token":"SECRET"}}`), "SECRET"},
		{"get: 0.3 nesting in another case", a2a.MethodGetPush, answer(`{"taskId":"task-2","PushNotificationConfig":{"url":"https://h/","token":"SECRET"}}`), "SECRET"},
		{"get: 0.3 nesting, credentials in two cases", a2a.MethodGetPush, answer(`{"taskId":"task-2","pushNotificationConfig":{"url":"https://h/","authentication":{"credentials":"c","credentialS":"SECRET"}}}`), "SECRET"},
		{"create: another's task id in two cases", a2a.MethodCreatePush, answer(`{` + cfg + `,"taskid":"task-1"}`), "task-1"},
		{"card: interfaces in another case", a2a.MethodExtendedCard, answer(`{"name":"a","SupportedInterfaces":[{"url":"http://SECRET/","protocolBinding":"JSONRPC"}]}`), "SECRET"},
		{"card: interfaces in two cases", a2a.MethodExtendedCard, answer(`{"name":"a","supportedInterfaces":[],"supportedinterfaces":[{"url":"http://SECRET/","protocolBinding":"JSONRPC"}]}`), "SECRET"},
		{"card: an interface's url in two cases", a2a.MethodExtendedCard, answer(`{"name":"a","supportedInterfaces":[{"url":"http://x/","Url":"http://SECRET/","protocolBinding":"JSONRPC"}]}`), "SECRET"},
		{"card: an interface's binding in another case", a2a.MethodExtendedCard, answer(`{"name":"a","supportedInterfaces":[{"url":"http://SECRET/","ProtocolBinding":"GRPC","protocolBinding":"JSONRPC"}]}`), "GRPC"},
		{"card: 0.3's url in another case", a2a.MethodExtendedCard, answer(`{"name":"a","URL":"http://SECRET/"}`), "SECRET"},
		{"card: 0.3's transport in two cases", a2a.MethodExtendedCard, answer(`{"name":"a","url":"http://x/","preferredTransport":"JSONRPC","PreferredTransport":"SECRET"}`), "SECRET"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, keep := answerExchange(s, tc.method).fromUpstream([]byte(tc.answer))
			if keep && (strings.Contains(string(out), tc.secret) || !strings.Contains(string(out), `"error"`)) {
				t.Fatalf("passed as %s", out)
			}
		})
	}
}

// TestCardAmbiguousNames: the public agent card likewise: a member Warden
// points at itself, given twice or in another case, makes the card
// Warden's error (502), never the upstream's URL passed to a client that
// reads names without case; so does a card that is not one JSON object
// (a decoder reading the first value would read the card unrewritten).
func TestCardAmbiguousNames(t *testing.T) {
	for _, tc := range []struct{ name, card string }{
		{"interfaces in another case", `{"name":"a","SupportedInterfaces":[{"url":"http://SECRET/","protocolBinding":"JSONRPC"}]}`},
		{"interfaces in two cases", `{"name":"a","supportedInterfaces":[],"SUPPORTEDINTERFACES":[{"url":"http://SECRET/","protocolBinding":"JSONRPC"}]}`},
		{"additional interfaces twice", `{"name":"a","additionalInterfaces":[],"additionalInterfaces":[{"url":"http://SECRET/","transport":"JSONRPC"}]}`},
		{"an interface's url in another case", `{"name":"a","supportedInterfaces":[{"URL":"http://SECRET/","protocolBinding":"JSONRPC"}]}`},
		{"an interface's tenant in another case", `{"name":"a","supportedInterfaces":[{"url":"http://x/","protocolBinding":"JSONRPC","Tenant":"SECRET"}]}`},
		{"0.3 url in another case", `{"name":"a","Url":"http://SECRET/"}`},
		{"a card followed by another value", `{"name":"a","url":"http://SECRET/"} {}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.card)
			}))
			defer up.Close()
			s := answerServer(t, up.URL+"/jsonrpc")
			w := httptest.NewRecorder()
			s.card(w, httptest.NewRequest(http.MethodGet, "/.well-known/agent-card.json", nil))
			if w.Code == http.StatusOK || strings.Contains(w.Body.String(), "SECRET") {
				t.Fatalf("card served: %d %s", w.Code, w.Body)
			}
		})
	}
}

// TestStateReadAmbiguous: the state Warden reads to decide (its own
// GetTask) is read by name like an answer's: a name it reads given twice, in
// two cases or alone in another case decides nothing (Warden's retryable
// error). Before, encoding/json took the last of them whatever its case.
func TestStateReadAmbiguous(t *testing.T) {
	for _, tc := range []struct{ name, result string }{
		{"state in two cases", `{"id":"task-9","status":{"state":"TASK_STATE_WORKING","State":"TASK_STATE_COMPLETED"}}`},
		{"state twice", `{"id":"task-9","status":{"state":"TASK_STATE_WORKING","state":"TASK_STATE_COMPLETED"}}`},
		{"state in another case alone", `{"id":"task-9","status":{"STATE":"TASK_STATE_WORKING"}}`},
		{"status in another case alone", `{"id":"task-9","Status":{"state":"TASK_STATE_WORKING"}}`},
		{"id in another case", `{"ID":"task-9","status":{"state":"TASK_STATE_WORKING"}}`},
		{"result in another case", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			h.up.hostile = func(method string, p map[string]any) string {
				if method != "GetTask" {
					return ""
				}
				if tc.result == "" {
					return `{"jsonrpc":"2.0","id":"warden-state","Result":{"id":"task-9","status":{"state":"TASK_STATE_WORKING"}}}`
				}
				return `{"jsonrpc":"2.0","id":"warden-state","result":` + tc.result + `}`
			}
			// alice's task the upstream has and Warden never saw (a restart).
			hd := h.srv.handles.Seal('t', "alice", "task-9")
			status, m := h.call(t, "alice", "SubscribeToTask", map[string]any{"id": hd})
			if status != 503 || errorCode(m) != -32603 {
				t.Fatalf("subscribe decided on an ambiguous state: %d %v", status, m)
			}
		})
	}
}

// TestTaskAnswerSpelled: in the task path too (tasks, events, messages,
// ListTasks pages), a member Warden reads by name spelled in another case,
// alone, refuses the answer: Warden would not seal or cut it, and a client
// matching names without case reads another tenant's raw task or context
// id, the server's total over every tenant, or its raw page cursor.
func TestTaskAnswerSpelled(t *testing.T) {
	s := answerServer(t, "http://127.0.0.1:1/jsonrpc")
	answer := func(result string) string { return `{"jsonrpc":"2.0","id":7,"result":` + result + `}` }
	task := func(extra string) string {
		return `{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING"}` + extra + `}`
	}
	for _, tc := range []struct{ name, method, answer, secret string }{
		{"a history message's task", a2a.MethodGetTask, answer(task(`,"history":[{"messageId":"m","role":"ROLE_AGENT","TaskId":"task-1"}]`)), "task-1"},
		{"a history message's context", a2a.MethodGetTask, answer(task(`,"history":[{"messageId":"m","role":"ROLE_AGENT","contextID":"ctx-1"}]`)), "ctx-1"},
		{"a status message's references", a2a.MethodGetTask, answer(`{"id":"task-2","contextId":"ctx-2","status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m","ReferenceTaskIds":["task-1"]}}}`), "task-1"},
		{"a task's history", a2a.MethodGetTask, answer(task(`,"History":[{"messageId":"m","taskId":"task-1"}]`)), "task-1"},
		{"a list's total", a2a.MethodListTasks, answer(`{"tasks":[],"nextPageToken":"","TotalSize":9000}`), "9000"},
		{"a list's cursor", a2a.MethodListTasks, answer(`{"tasks":[],"NextPageToken":"SECRET"}`), "SECRET"},
		{"a list's tasks", a2a.MethodListTasks, answer(`{"Tasks":[{"id":"task-1","contextId":"ctx-1"}]}`), "task-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, keep := answerExchange(s, tc.method).fromUpstream([]byte(tc.answer))
			if keep && (strings.Contains(string(out), tc.secret) || !strings.Contains(string(out), `"error"`)) {
				t.Fatalf("passed as %s", out)
			}
		})
	}
}
