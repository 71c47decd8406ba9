package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// parseCorpus are requests Parse reads or refuses: the tests' and the
// fuzzers' seeds, and the members that fold, repeat, nest or escape at each
// place Parse reads. TestParseCorpus holds each outcome to the golden file
// (testdata/parse_corpus.golden, written by the map-decoding Parse this
// reading replaced: -update writes it again).
var parseCorpus = []string{
	``, ` `, `x`, `[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}]`, `"str"`, `5`, `null`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`,
	` {"jsonrpc" : "2.0", "id" : "x" , "method":"GetTask","params":{"id":"t","historyLength":2,"metadata":{"a":[1,"é"]}}} `,
	`{"jsonrpc":"2.0","ID":1,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"Method":"GetTask","method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"},"x":1,"X":2}`,
	`{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2\u002e0","id":1,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"},"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"},"error":null}`,
	`{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1.0,"method":"GetTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":7,"params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":5}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[]}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":""}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","id":"u"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"i\u0064":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t\u002ex"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","tenant":"acme"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","tenant":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","tenant":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"t","metadata":{"k":"v","K":"w"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"t","id":"p"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"task_id":"t","id":"p"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"t","id":"p"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"DeleteTaskPushNotificationConfig","params":{"id":"p"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"https://a/","pushNotificationConfig":{"url":"https://b/"},"config":[{"url":"https://c/"}]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"https://a/","token":"x","authentication":{"schemes":["Bearer"],"credentials":"c"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","URL":"https://a/"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","config":{"url":"https://a/","Url":"https://b/"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","push_notification_config":{"url":"https://a/"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","x":[[[[[[[[[{"url":"https://deep/"}]]]]]]]]]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","x":[[{"url":"https://a/"}],{"y":{"url":"https://b/","z":[{"url":"https://c/"}]}}],"b":{"url":"https://d/"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","a":{"b":{"c":{"d":{"e":{"f":{"g":{"url":"https://deep/"}}}}}}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"url":"https://deep/"}}}}}}}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","u\u0072l":"https://esc/"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"c","pageToken":"p","pageSize":1}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"","pageToken":""}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"page_token":"p"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"tenant":"acme"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"<&>"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":"t","referenceTaskIds":["a"]},"configuration":{"taskPushNotificationConfig":{"url":"http://x/"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","taskId":"t","contextId":"c","parts":[{"text":"x"}],"referenceTaskIds":["r1","r2"]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","taskId":"","contextId":""}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","taskId":7}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","contextId":null}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":[1]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":"r"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":null}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":[]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"TaskId":"t"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"task_id":"t"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"context_id":"c"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"reference_task_ids":["r"]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":"t","taskId":"u"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"Message":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"taskPushNotificationConfig":{"URL":"http://127.0.0.1/"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"pushNotificationConfig":{"url":"https://hooks.example.com/"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"historyLength":1}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":5}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"task_push_notification_config":{}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"taskPushNotificationConfig":{"url":"https://a/"},"TaskPushNotificationConfig":{}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":"weather","x":{"y":1}}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":7}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":null}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"Skill":"x"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"sk\u0069ll":"x"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":null}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":[1]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"x":{"priority":"low","PRIORITY":"urgent"}}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"text":"a"},{"raw":"YQ=="},{"url":"https://f/"},{"data":{"x":1}},{"kind":"text","text":"b"},{"kind":"file","file":{}},{"kind":"data","data":{}}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"text":"a","data":{}}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"kind":"text","data":{}}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"kind":"video"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"kind":7}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"Text":"a"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"text":"a","text":"b"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"media_type":"x","text":"a"}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":["a"]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[null]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":{"text":"a"}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":null}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":[{"text":"a","metadata":{"a":1,"A":2}}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","taskId":"t","parts":[{"data":{"x":1,"x":2}}]}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m"},"tenant":"acme"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"Unknown","params":{"id":7,"x":{"y":1}}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"t\",\"\u017fkill\":1}}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"metadata\":{\"\u017fkill\":\"x\"}}}}",
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}}`,
	`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"ID":17}}`,
}

var update = flag.Bool("update", false, "write testdata/parse_corpus.golden again")

// TestParseCorpus: every request of parseCorpus is read, or refused, as
// the golden file says: the refusal's code and text, or what the sidecar
// and ext_authz read of it and the params forwarded.
func TestParseCorpus(t *testing.T) {
	var out bytes.Buffer
	for _, body := range parseCorpus {
		fmt.Fprintf(&out, "%s\n\t%s\n", body, outcome(t, []byte(body)))
	}
	const golden = "testdata/parse_corpus.golden"
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d:\n got  %s\n want %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%d lines, want %d", len(gl), len(wl))
	}
}

// canonical is JSON written again with sorted members and no spacing.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	c, _ := json.Marshal(v)
	return string(c)
}

// outcome is how one request reads: refused (code and text), or what Parse
// read of it and the params as forwarded (written again canonically).
func outcome(t *testing.T, b []byte) string {
	c, err := Parse(b)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			t.Fatalf("%s: %v", b, err)
		}
		return fmt.Sprintf("refused %d %s", je.Code, je.Message)
	}
	params := "absent"
	if c.Params != nil {
		params = canonical(t, c.Params.AppendTo(nil))
	}
	return fmt.Sprintf("id=%s method=%s task=%q/%v context=%q/%v refs=%q webhooks=%q tenant=%q skill=%q parts=%q metadata=%s messageId=%q pageToken=%q params=%s",
		c.ID, c.Method, c.Task, c.HasTask, c.Context, c.HasContext, c.References, c.Webhooks, c.Tenant, c.Content.Skill, c.Content.Parts, c.Content.Metadata, c.MessageID, c.PageToken, params)
}
