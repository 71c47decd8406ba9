package a2a

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, body string
		code       int // 0: parsed
		check      func(t *testing.T, c Call)
	}{
		{"get task", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t1","historyLength":2}}`, 0, func(t *testing.T, c Call) {
			if c.Task != "t1" || !c.HasTask || c.Continues() {
				t.Fatalf("%+v", c)
			}
		}},
		{"message continuing", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","taskId":"t","contextId":"c","referenceTaskIds":["r1","r2"],"parts":[]},"configuration":{"taskPushNotificationConfig":{"url":"http://x/"}}}}`, 0, func(t *testing.T, c Call) {
			if c.Task != "t" || c.Context != "c" || !slices.Equal(c.References, []string{"r1", "r2"}) || !c.Continues() || !slices.Equal(c.Webhooks, []string{"http://x/"}) {
				t.Fatalf("%+v", c)
			}
		}},
		{"new message", `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","parts":[]}}}`, 0, func(t *testing.T, c Call) {
			if c.Continues() {
				t.Fatalf("%+v", c)
			}
		}},
		{"push create", `{"jsonrpc":"2.0","id":3,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"http://10.0.0.1/"}}`, 0, func(t *testing.T, c Call) {
			if c.Task != "t" || len(c.Webhooks) != 1 {
				t.Fatalf("%+v", c)
			}
		}},
		{"list by context", `{"jsonrpc":"2.0","id":4,"method":"ListTasks","params":{"contextId":"c"}}`, 0, func(t *testing.T, c Call) {
			if c.Context != "c" {
				t.Fatalf("%+v", c)
			}
		}},
		{"unknown method parses", `{"jsonrpc":"2.0","id":5,"method":"tasks/get"}`, 0, nil},
		{"not json", `{`, jsonrpc.ErrParse, nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, jsonrpc.ErrInvalidRequest, nil},
		{"notification", `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"t"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"float id", `{"jsonrpc":"2.0","id":1.0,"method":"GetTask","params":{"id":"t"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"answer", `{"jsonrpc":"2.0","id":1,"result":{}}`, jsonrpc.ErrInvalidRequest, nil},
		{"Id in params", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"Id":"t"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"id twice", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","id":"b"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"TaskId in message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"TaskId":"t"}}}`, jsonrpc.ErrInvalidParams, nil},
		{"URL in push config", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"taskPushNotificationConfig":{"URL":"http://127.0.0.1/"}}}}`, jsonrpc.ErrInvalidParams, nil},
		{"task id a number", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":7}}`, jsonrpc.ErrInvalidParams, nil},
		{"get task without id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`, jsonrpc.ErrInvalidParams, nil},
		{"references not strings", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":[1]}}}`, jsonrpc.ErrInvalidParams, nil},
		{"proto name of a message's taskId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"task_id":"t"}}}`, jsonrpc.ErrInvalidParams, nil},
		{"proto name of contextId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"context_id":"c"}}}`, jsonrpc.ErrInvalidParams, nil},
		{"proto name of referenceTaskIds", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"reference_task_ids":["r"]}}}`, jsonrpc.ErrInvalidParams, nil},
		{"proto name of a push config's taskId", `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"task_id":"t"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"proto name of the push config", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"task_push_notification_config":{"url":"http://127.0.0.1/"}}}}`, jsonrpc.ErrInvalidParams, nil},
		{"proto name of a push URL's object", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"taskPushNotificationConfig":{"url":"https://x/","task_id":"t"}}}}`, jsonrpc.ErrInvalidParams, nil},
		{"proto name of pageToken", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"page_token":"p"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"other snake names pass", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","history_length":2}}`, 0, nil},
		{"page token a number", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":5}}`, jsonrpc.ErrInvalidParams, nil},
		// Every place a push config's URL can sit is read: 1.0's, 0.3's
		// nesting, a draft's, any other; names a server reads alike are
		// refused; a url that is not a string is refused (the JS SDK's
		// server reads String(url)).
		{"push create, 0.3 nesting", pushCreate(`"pushNotificationConfig":{"url":"http://127.0.0.1/"}`), 0, webhooks("http://127.0.0.1/")},
		{"push create, draft nesting", pushCreate(`"config":{"url":"http://127.0.0.1/"}`), 0, webhooks("http://127.0.0.1/")},
		{"push create, draft nesting twice", pushCreate(`"config":{"pushNotificationConfig":{"url":"http://10.0.0.1/"}}`), 0, webhooks("http://10.0.0.1/")},
		{"push create, every place", pushCreate(`"url":"https://a/","pushNotificationConfig":{"url":"https://b/"},"config":{"url":"https://c/"}`), 0, webhooks("https://c/", "https://b/", "https://a/")},
		{"push create, a list of configs", pushCreate(`"configs":[{"url":"http://127.0.0.1/"},{"x":{"url":"http://10.0.0.1/"}}]`), 0, webhooks("http://127.0.0.1/", "http://10.0.0.1/")},
		{"push create, null url", pushCreate(`"url":null`), 0, webhooks()},
		{"push create, URL nested", pushCreate(`"pushNotificationConfig":{"URL":"http://127.0.0.1/"}`), jsonrpc.ErrInvalidParams, nil},
		{"push create, Config", pushCreate(`"Config":{"url":"http://127.0.0.1/"}`), jsonrpc.ErrInvalidParams, nil},
		{"push create, proto name of the nesting", pushCreate(`"push_notification_config":{"url":"http://127.0.0.1/"}`), jsonrpc.ErrInvalidParams, nil},
		{"push create, url a list", pushCreate(`"pushNotificationConfig":{"url":["http://127.0.0.1/"]}`), jsonrpc.ErrInvalidParams, nil},
		{"push create, url an object", pushCreate(`"config":{"url":{"href":"http://127.0.0.1/"}}`), jsonrpc.ErrInvalidParams, nil},
		{"push create, nested too deep", pushCreate(`"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"url":"https://x/"}}}}}}}}`), jsonrpc.ErrInvalidParams, nil},
		{"message, 0.3 push config", message(`"pushNotificationConfig":{"url":"http://127.0.0.1/"}`), 0, webhooks("http://127.0.0.1/")},
		{"message, 0.3 shape inside 1.0's", message(`"taskPushNotificationConfig":{"pushNotificationConfig":{"url":"http://127.0.0.1/"}}`), 0, webhooks("http://127.0.0.1/")},
		{"message, both", message(`"taskPushNotificationConfig":{"url":"https://a/"},"pushNotificationConfig":{"url":"https://b/"}`), 0, webhooks("https://b/", "https://a/")},
		{"message, URL", message(`"pushNotificationConfig":{"Url":"http://127.0.0.1/"}`), jsonrpc.ErrInvalidParams, nil},
		{"message, configuration not an object", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":[{"url":"http://127.0.0.1/"}]}}`, jsonrpc.ErrInvalidParams, nil},
		{"tenant", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","tenant":"acme"}}`, 0, func(t *testing.T, c Call) {
			if c.Tenant != "acme" {
				t.Fatalf("%+v", c)
			}
		}},
		{"tenant not a string", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"tenant":["a"]}}`, jsonrpc.ErrInvalidParams, nil},
		{"Tenant", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"Tenant":"a"}}`, jsonrpc.ErrInvalidRequest, nil},
		{"params a list", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`, jsonrpc.ErrInvalidRequest, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.body))
			var je *jsonrpc.Error
			switch {
			case tc.code == 0 && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.code != 0 && (!errors.As(err, &je) || je.Code != tc.code):
				t.Fatalf("Parse = %v, want code %d", err, tc.code)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// pushCreate is a CreateTaskPushNotificationConfig request with members
// besides taskId.
func pushCreate(members string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t",` + members + `}}`
}

// message is a SendMessage request with a configuration's members.
func message(conf string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[]},"configuration":{` + conf + `}}}`
}

// webhooks checks the URLs read, in order.
func webhooks(want ...string) func(t *testing.T, c Call) {
	return func(t *testing.T, c Call) {
		t.Helper()
		if !slices.Equal(c.Webhooks, want) {
			t.Fatalf("webhooks %q, want %q", c.Webhooks, want)
		}
	}
}

func TestStates(t *testing.T) {
	for s, term := range map[string]bool{"TASK_STATE_COMPLETED": true, "canceled": true, "TASK_STATE_REJECTED": true, "failed": true,
		"TASK_STATE_WORKING": false, "input-required": false, "": false, "bogus": false} {
		if Terminal(s) != term {
			t.Errorf("Terminal(%q) = %v", s, !term)
		}
	}
}

// TestStateOf: a status's state reads as the answer writes it, a known
// one as the constant (every spelling State knows), anything else as Str
// reads it.
func TestStateOf(t *testing.T) {
	for _, c := range []struct{ status, want string }{
		{`{"state":"TASK_STATE_WORKING"}`, StateWorking},
		{`{"state":"input-required"}`, "input-required"},
		{`{"state":"cancelled"}`, "cancelled"},
		{`{"state":"TASK_STATE_\u0057ORKING"}`, StateWorking},
		{`{"state":"TASK_STATE_BOGUS"}`, "TASK_STATE_BOGUS"},
		{`{"state":1}`, ""},
		{`{}`, ""},
	} {
		o, err := jsonrpc.ReadObject([]byte(c.status))
		if err != nil {
			t.Fatal(err)
		}
		if got := StateOf(o); got != c.want {
			t.Errorf("%s: %q, want %q", c.status, got, c.want)
		}
	}
	for _, s := range states {
		if State(s) == "" {
			t.Errorf("%q is no state State knows", s)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":"t","referenceTaskIds":["a"]},"configuration":{"taskPushNotificationConfig":{"url":"http://x/"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{"id":"t"}}`))
	f.Add([]byte(pushCreate(`"url":"https://a/","pushNotificationConfig":{"url":"https://b/"},"config":[{"url":"https://c/"}]`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("error without a JSON-RPC code: %v", err)
			}
			return
		}
		if !jsonrpc.ValidID(c.ID) || c.Method == "" {
			t.Fatalf("parsed %q with id %s method %q", b, c.ID, c.Method)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"GetTask", `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"wt2.xjsDIy_PG9j4Ehg1X93SkegMgC9nPbLJM2EUAxC4AugTgwDeAwwp2Y9PO9PaRw"}}`},
		{"SendMessage", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","taskId":"wt2.a","contextId":"wt2.b","parts":[{"text":"hello there"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://hooks.example.com/a2a","token":"t"}}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			body := []byte(bc.body)
			for b.Loop() {
				if _, err := Parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRequestRefused: the checks of what a request alone tells, which the
// sidecar and ext_authz share: a tenant is refused, so is a webhook URL
// outside what allow lets through.
func TestRequestRefused(t *testing.T) {
	allow, err := ParseAllow([]string{"hooks.internal"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body      string
		tenant, webhook rules.Code
	}{
		{"neither", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`, rules.CodeOK, rules.CodeOK},
		{"tenant", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"tenant":"acme"}}`, rules.CodeInvalidParams, rules.CodeOK},
		{"empty tenant", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"tenant":""}}`, rules.CodeOK, rules.CodeOK},
		{"allowed webhook", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"http://hooks.internal/x"}}`, rules.CodeOK, rules.CodeOK},
		{"loopback webhook", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":"http://127.0.0.1/x"}}`, rules.CodeOK, rules.CodeInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := TenantRefused(c); got.Code != tc.tenant {
				t.Errorf("TenantRefused = %v, want code %v", got, tc.tenant)
			}
			if got := WebhookRefused(c, allow); got.Code != tc.webhook {
				t.Errorf("WebhookRefused = %v, want code %v", got, tc.webhook)
			}
		})
	}
}

// TestParseContent: a message's skill (metadata.skill), part kinds and
// metadata are read, and every name a server could read otherwise than the
// policy is refused. Fails before: Content does not exist.
func TestParseContent(t *testing.T) {
	msg := func(m string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m",` + m + `}}}`
	}
	for _, tc := range []struct {
		name, body string
		skill      string
		parts      []string
		meta       string
		refused    string // in the error; "" parsed
	}{
		{"skill and parts", msg(`"metadata":{"skill":"weather","x":[1]},"parts":[{"text":"hi"},{"url":"http://x/f","mediaType":"a/b"},{"raw":"AA=="},{"data":{"a":1}}]`), "weather", []string{"text", "file", "file", "data"}, `{"skill":"weather","x":[1]}`, ""},
		{"no metadata", msg(`"parts":[{"text":"hi"}]`), "", []string{"text"}, "", ""},
		{"0.3 part kinds", msg(`"parts":[{"kind":"text","text":"hi"},{"kind":"file","file":{"uri":"http://x/"}}]`), "", []string{"text", "file"}, "", ""},
		{"null skill", msg(`"metadata":{"skill":null},"parts":[]`), "", []string{}, `{"skill":null}`, ""},
		{"Skill", msg(`"metadata":{"Skill":"admin"}`), "", nil, "", "spelled"},
		{"skill twice", msg(`"metadata":{"skill":"weather","skill":"admin"}`), "", nil, "", "twice"},
		{"skill not a string", msg(`"metadata":{"skill":["admin"]}`), "", nil, "", "must be a string"},
		{"Metadata", msg(`"Metadata":{"skill":"admin"}`), "", nil, "", "Metadata"},
		{"Parts", msg(`"Parts":[{"data":1}]`), "", nil, "", "Parts"},
		{"part with two contents", msg(`"parts":[{"text":"hi","data":{}}]`), "", nil, "", "holds one of"},
		{"part with none", msg(`"parts":[{"filename":"a"}]`), "", nil, "", "holds one of"},
		{"kind contradicting the content", msg(`"parts":[{"kind":"text","data":{}}]`), "", nil, "", "must name what it holds"},
		{"Text", msg(`"parts":[{"Text":"hi"}]`), "", nil, "", "Text"},
		{"media_type", msg(`"parts":[{"text":"hi","media_type":"x"}]`), "", nil, "", "mediaType"},
		{"parts not a list", msg(`"parts":{"text":"hi"}`), "", nil, "", "list"},
		{"part not an object", msg(`"parts":["hi"]`), "", nil, "", "object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.body))
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want one with %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Content.Skill != tc.skill || !slices.Equal(c.Content.Parts, tc.parts) || (tc.parts == nil) != (c.Content.Parts == nil) || string(c.Content.Metadata) != tc.meta {
				t.Fatalf("%+v", c.Content)
			}
		})
	}
}
