package mcp

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc"
	"github.com/agentwarden/warden/rules/mcp"
)

// answerRequests are the caller's requests the answer tests read answers
// to: alice's (id 1).
var answerRequests = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","task":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u"}}`,
}

type answerPath int

const (
	pathDecoded answerPath = iota // the reference
	pathRead                      // fromUpstreamRead
	pathWhole                     // fromUpstream: the scanning path, then the reading one
)

// answerState is what reading an answer left behind: the message, whether
// it passed or was replaced, the owners and statuses of the test's tasks,
// and the tools learned.
type answerState struct {
	out            []byte
	keep, replaced bool
	owners         []string
	tools          []string
}

// readAnswer reads data as the answer to alice's request req, on the
// decoding path (the reference), the reading one, or as fromUpstream does
// (the scanning path first), on a fresh server where t-a is alice's task
// and t-b bob's.
func readAnswer(t *testing.T, req, data string, path answerPath) answerState {
	t.Helper()
	s := unitServer(t)
	taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
	taskCreated(s.enforcer, "t-b", bob, mcp.StatusWorking)
	x := exchangeFor(t, s, alice, req)
	x.taskID = "t-a"
	var st answerState
	switch path {
	case pathDecoded:
		st.out, st.keep = x.fromUpstreamDecoded([]byte(data))
	case pathRead:
		st.out, st.keep = x.fromUpstreamRead([]byte(data))
	default:
		st.out, st.keep = x.fromUpstream([]byte(data))
	}
	st.replaced = x.replaced
	for _, id := range []string{"t-a", "t-b", "t-c", "t-d"} {
		o, _ := taskOwner(s.enforcer, id)
		st.owners = append(st.owners, id+"="+o)
	}
	s.tools.Each(func(k toolKey, v tool) { st.tools = append(st.tools, k.name+"="+v.support) })
	slices.Sort(st.tools)
	return st
}

// readAgainstDecoded compares the two paths on one answer: the same
// keeping, replacing, learning and document. Where an object of data gives
// a name twice (or two that fold alike) the reading path may refuse
// instead (dropped, or the ambiguity error in place of the answer).
func readAgainstDecoded(t *testing.T, req, data string) {
	t.Helper()
	ref := readAnswer(t, req, data, pathDecoded)
	got := readAnswer(t, req, data, pathRead)
	same := ref.keep == got.keep && ref.replaced == got.replaced && (!ref.keep || sameJSON(ref.out, got.out)) &&
		slices.Equal(ref.owners, got.owners) && slices.Equal(ref.tools, got.tools)
	if same {
		return
	}
	refused := !got.keep || got.replaced && bytes.Contains(got.out, []byte("twice"))
	if refused && repeatsNames(data) {
		return
	}
	t.Fatalf("%s\nas the answer to %s:\ndecoded %s keep=%v replaced=%v %v %v\nread    %s keep=%v replaced=%v %v %v",
		data, req, ref.out, ref.keep, ref.replaced, ref.owners, ref.tools, got.out, got.keep, got.replaced, got.owners, got.tools)
}

// repeatsNames reports whether an object of data, at any depth, gives a
// name twice or two that fold alike, or spells one of the names the read
// path reads in another case (in a protocol object the read path refuses
// it; the decoding path read such a name as absent).
func repeatsNames(data string) bool {
	env, _ := jsonrpc.ReadObject([]byte(data))
	if env == nil {
		return false
	}
	found := false
	env.Walk(func(o *jsonrpc.Object) { found = found || o.Check(mcpReadNames) != nil })
	return found
}

// mcpReadNames are the names the read path reads by name somewhere.
var mcpReadNames = append([]string{"taskId", "taskIds", "status", "task", "resultType", "tasks", "nextCursor", "tools", "name",
	"execution", "taskSupport", "_meta", "io.modelcontextprotocol/related-task", "lastUpdatedAt"}, messageNames...)

// answerSeeds are answers to the requests of answerRequests: the created,
// listed, named tasks (t-a alice's, t-b bob's, t-c and t-d unknown), tools,
// and every shape the decoding path read.
var answerSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"working"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"paused","x":"\u00e9"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-c","status":"working","ttl":60000}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t-c","status":"working"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-b","status":"working"}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-d"}}}}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-c"}}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},{"name":"b"},{"name":"c","execution":{"taskSupport":""}},3,{"name":7}]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"\u0061","execution":{"taskSupport":"required"}}],"nextCursor":"n"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","status":"working"},{"taskId":"t-b","status":"working"},{"taskId":"t-c"},4],"nextCursor":"c-2"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","status":"completed","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-a"}}}]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tasks":"none","nextCursor":5}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tasks":null}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"notifications":{"taskIds":["t-a","t-a"]}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"notifications":{"taskIds":["t-a","t-b"]}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"contents":[{"uri":"u","text":"{\"taskId\":\"t-b\"}"}],"x":[[{"taskId":"t-a"}]]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"a":1,"a":2,"taskId":"t-a"}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"taskId":"t-a","taskId":"t-b"}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"taskId":"t-a","TaskId":"t-b"}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-b","status":"working","taskId":"t-c"}}}`,
	`{"jsonrpc":"2.0","id":2,"id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"Result":{"taskId":"t-b"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Task not found","data":{"taskId":"t-b"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-a","status":"completed"}}`,
	`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-a","status":"completed","status":"working"}}`,
	`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
	`{"jsonrpc":"2.0","method":"notifications\/tasks\/status","params":{"task\u0049d":"t-a","status":"input_required"}}`,
	`{"jsonrpc":"2.0","id":1.0,"result":{"taskId":"t-a"}}`,
	`{"jsonrpc":"2.0","id":"1","result":{"taskId":"t-a"}}`,
	`{"jsonrpc":"2.0","id":7,"result":{"taskId":"t-a"}}`,
	` { "jsonrpc" : "2.0" , "id" : 1 , "result" : { "taskId" : "t-a" , "n" : 1.50 , "b" : [ true , null ] } } `,
	`[{"jsonrpc":"2.0","id":1,"result":{}}]`,
	`null`,
	``,
	`: ping`,
}

// TestFromUpstreamEquivalent: on every seed answer, to every request, the
// reading path does what the decoding path did, but where the answer gives
// a name twice (TestFromUpstreamAmbiguous says which it refuses).
func TestFromUpstreamEquivalent(t *testing.T) {
	for _, req := range answerRequests {
		for _, data := range answerSeeds {
			t.Run(fmt.Sprintf("%.40s/%.60s", req[30:], data), func(t *testing.T) {
				readAgainstDecoded(t, req, data)
			})
		}
	}
}

// FuzzFromUpstreamRead compares the reading path with the decoding one on
// random upstream messages, as the answer to each kind of request.
func FuzzFromUpstreamRead(f *testing.F) {
	for i, seed := range answerSeeds {
		f.Add(uint8(i), seed)
	}
	f.Fuzz(func(t *testing.T, which uint8, data string) {
		readAgainstDecoded(t, answerRequests[int(which)%len(answerRequests)], data)
	})
}

// TestFromUpstreamAmbiguous: where Warden learns from an answer (what it
// answers, whose task it created, a task's status, a tool's taskSupport,
// the tasks listed) or seals a task ID, a name given twice (or two that
// fold alike) in the object Warden reads it from is refused: the answer
// to the caller's request is replaced with an error, another message
// dropped, and nothing is learned. The decoding path read the last of
// them and wrote only that one: each of these passed before (every case
// fails on it). A name repeated in an object Warden only walks through
// passes as it came (the last case, as before).
func TestFromUpstreamAmbiguous(t *testing.T) {
	get, call, list, tools := answerRequests[0], answerRequests[1], answerRequests[3], answerRequests[2]
	tests := []struct {
		name, req, data string
		refused         bool
	}{
		{"the answer's id twice", get, `{"jsonrpc":"2.0","id":2,"id":1,"result":{"taskId":"t-a","status":"working"}}`, true},
		{"result and Result", get, `{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a"},"Result":{"taskId":"t-a"}}`, true},
		{"the created task's id twice", call, `{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-d","status":"working","taskId":"t-c"}}}`, true},
		{"the created task twice", call, `{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-d"},"task":{"taskId":"t-c"}}}`, true},
		{"the related task's id in two cases", call, `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-d","TaskID":"t-c"}}}}`, true},
		{"a status twice", get, `{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"completed","status":"working"}}`, true},
		{"a tool's name twice", tools, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","name":"b","execution":{"taskSupport":"required"}}]}}`, true},
		{"a listed task's id twice", list, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"t-a","taskId":"t-b"}]}}`, true},
		{"a taskId in a tool's output twice", call, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"taskId":"t-a","TaskId":"t-b"}}}`, true},
		{"a notification's status twice", get, `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-a","status":"completed","status":"working"}}`, true},
		{"another name twice in a tool's output", call, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"a":1,"a":2,"taskId":"t-a"}}}`, false},
	}
	for _, tc := range tests {
		for _, path := range []answerPath{pathRead, pathWhole} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, path), func(t *testing.T) {
				ambiguousCase(t, tc.req, tc.data, tc.refused, path)
			})
		}
	}
}

// ambiguousCase reads one case of TestFromUpstreamAmbiguous on path.
func ambiguousCase(t *testing.T, req, data string, want bool, path answerPath) {
	got := readAnswer(t, req, data, path)
	refused := !got.keep || got.replaced && bytes.Contains(got.out, []byte(errAmbiguous.Error()))
	if refused != want {
		t.Fatalf("refused = %v, want %v: %s keep=%v", refused, want, got.out, got.keep)
	}
	if !want {
		return
	}
	for _, o := range got.owners {
		if strings.HasPrefix(o, "t-c=") && o != "t-c=" || strings.HasPrefix(o, "t-d=") && o != "t-d=" {
			t.Errorf("learned %s from an ambiguous answer", o)
		}
	}
	if len(got.tools) > 0 {
		t.Errorf("learned tools %v from an ambiguous answer", got.tools)
	}
	if got.keep && bytes.Contains(got.out, []byte(`"t-`)) {
		t.Errorf("an upstream ID passed: %s", got.out)
	}
}

// BenchmarkAnswer reads one answer Warden learns from, as fromUpstream
// does, against the decoding path it replaced: a tools/list page (the
// tools' taskSupport) and a task-creating tools/call's answer (whose task
// it is), in the shape the MCP TypeScript SDK answers.
func BenchmarkAnswer(b *testing.B) {
	for _, bc := range []struct{ name, req, data string }{
		{"tools-list", answerRequests[2], `{"result":{"tools":[{"name":"fast","description":"answers at once","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"execution":{"taskSupport":"optional"}},{"name":"slow","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"echo","inputSchema":{"type":"object"}}]},"jsonrpc":"2.0","id":1}`},
		{"tools-call-task", answerRequests[1], `{"result":{"task":{"taskId":"t-a","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":1000}},"jsonrpc":"2.0","id":1}`},
	} {
		for _, path := range []string{"decoded", "read"} {
			b.Run(bc.name+"/"+path, func(b *testing.B) {
				s := unitServer(b)
				taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
				c, err := mcp.Parse([]byte(bc.req))
				if err != nil {
					b.Fatal(err)
				}
				x := &exchange{s: s, principal: alice, call: c}
				data := []byte(bc.data)
				b.ReportAllocs()
				for b.Loop() {
					var keep bool
					if path == "decoded" {
						_, keep = x.fromUpstreamDecoded(data)
					} else {
						_, keep = x.fromUpstreamRead(data)
					}
					if !keep {
						b.Fatal("dropped")
					}
				}
			})
		}
	}
}
