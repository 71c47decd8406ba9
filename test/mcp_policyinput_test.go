package test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mcpPoster sends one JSON-RPC message of an MCP session as principal and
// returns the answer's JSON-RPC message and the session ID the answer names.
type mcpPoster func(t *testing.T, principal, sid, body string) (msg []byte, newSID string)

// TestMCPToolPolicy runs the example operator policies of deploy/policies
// (only these tools for this principal; no arguments matching these
// patterns) through bin/warden, as the MCP sidecar and as ext_authz, in
// front of the Go SDK everything-server: the listed tool runs, another tool
// and a forbidden argument are refused with the operator's message, and
// another principal is not restricted; a rule on the resource URI and the
// prompt name decides resources/read and prompts/get the same way at both
// doors. Before input.mcp the policy sees no tool (every call runs), and
// ext_authz never decided resources/read or prompts/get.
//
// The same example policies run in front of the TypeScript SDK's task
// server: a tool not listed for the principal is refused, another principal
// calls it, and a forbidden argument is refused before the tool runs; a rule
// on a resource URI judges the spelling the server reads (it looks a URI up
// as new URL(uri).toString() spells it): DEMO://vault/secret, a dot segment
// or a tab in it are refused, where before the server returned the secret
// the rule refuses; and a rule on a number judges the number the tool adds
// (999.99999999999999999 is 1000 to it, refused).
func TestMCPToolPolicy(t *testing.T) {
	bot, ops := "agent://support-bot", "agent://ops"
	call, read, prompt := "tools/call", "resources/read", "prompts/get"
	sub, unsub, complete := "resources/subscribe", "resources/unsubscribe", "completion/complete"
	refusal := "agent://support-bot may call only these tools: get_weather, test_simple_text"
	// A URI the server reads in another spelling (it looks it up as
	// new URL(uri).toString()): before, the rule on demo://vault/secret
	// judged DEMO://vault/secret, and the server returned the secret.
	uriRefusal := "params.uri is not in its canonical spelling"
	// A number the server reads as another (a 64-bit float): before, the
	// rule "a >= 1000 needs approval" judged 999.99999999999999999 and the
	// tool added 1000.
	numberRefusal := "is not one a 64-bit float holds"
	for _, srv := range []struct {
		name     string
		upstream func(t *testing.T) string
		cases    []policyCase
	}{
		{"go-sdk everything-server", func(t *testing.T) string {
			bin := peer(t, ".peers/bin/everything-server")
			addr := freeAddr(t)
			start(t, "everything-server", addr, nil, bin, "-http", addr, "-stateless=false")
			return "http://" + addr
		}, []policyCase{
			{"listed tool runs", bot, call, `{"name":"test_simple_text"}`, ""},
			{"other tool refused", bot, call, `{"name":"test_image_content"}`, refusal},
			{"other principal unrestricted", ops, call, `{"name":"test_image_content"}`, ""},
			{"forbidden argument refused", ops, call, `{"name":"test_simple_text","arguments":{"path":"../../etc/passwd"}}`, `argument ["path"] matches a forbidden pattern`},
			{"ambiguous arguments refused", ops, call, `{"name":"test_simple_text","arguments":{"path":"a","path":"../b"}}`, `member "path" given twice`},
			{"resource read", bot, read, `{"uri":"test://static-text"}`, ""},
			{"resource refused", bot, read, `{"uri":"test://static-binary"}`, "not this resource"},
			{"prompt refused", bot, prompt, `{"name":"test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}`, "not this prompt"},
			{"prompt for another principal", ops, prompt, `{"name":"test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}`, ""},
			{"forbidden prompt argument refused", ops, prompt, `{"name":"test_prompt_with_arguments","arguments":{"arg1":"../a","arg2":"b"}}`, "matches a forbidden pattern"},
			// A multi round-trip retry's answers (SEP-2322; the go-sdk reads
			// params.inputResponses and params.requestState) reach the
			// policy (input.mcp.input_responses), read strictly. Before,
			// they were not read: the server ran each of these.
			{"input responses pass", ops, call, `{"name":"test_simple_text","inputResponses":{"confirm":{"action":"accept","content":{"approver":"ops"}}},"requestState":"s1"}`, ""},
			{"input response refused", ops, call, `{"name":"test_simple_text","inputResponses":{"confirm":{"action":"accept","content":{"approver":"self"}}}}`, "not this answer"},
			{"input response twice refused", ops, call, `{"name":"test_simple_text","inputResponses":{"confirm":{"action":"decline"},"confirm":{"action":"accept","content":{"approver":"self"}}}}`, "appears twice"},
			{"input responses in python spelling refused", ops, call, `{"name":"test_simple_text","input_responses":{"confirm":{"action":"accept","content":{"approver":"self"}}}}`, `must be spelled "inputResponses"`},
			{"input response naming a task refused", ops, call, `{"name":"test_simple_text","inputResponses":{"confirm":{"action":"accept","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}}}`, "names a task"},
			{"request state not a string refused", ops, call, `{"name":"test_simple_text","requestState":{"task":"t"}}`, "params.requestState must be a string"},
		}},
		{"typescript-sdk task server", func(t *testing.T) string { return startNodeMCP(t) }, []policyCase{
			{"unlisted tool refused", bot, call, `{"name":"echo","arguments":{"text":"hi"}}`, refusal},
			{"other principal runs it", ops, call, `{"name":"echo","arguments":{"text":"hi"}}`, ""},
			{"forbidden argument refused", ops, call, `{"name":"echo","arguments":{"text":"../../etc/passwd"}}`, `argument ["text"] matches a forbidden pattern`},
			// the sidecar's type check names "TEXT" as another spelling of the
			// declared text (T1), ext_authz's policy value as differing only in case
			{"ambiguous arguments refused", ops, call, `{"name":"echo","arguments":{"text":"a","TEXT":"../b"}}`, `"TEXT"`},
			{"sum under the bound runs", ops, call, `{"name":"slow_sum","arguments":{"a":999,"b":1,"delay_ms":0}}`, ""},
			{"sum at the bound refused", ops, call, `{"name":"slow_sum","arguments":{"a":1000,"b":1,"delay_ms":0}}`, "needs approval"},
			{"sum the server reads at the bound refused", ops, call, `{"name":"slow_sum","arguments":{"a":999.99999999999999999,"b":1,"delay_ms":0}}`, numberRefusal},
			{"integer past 2^53 refused", ops, call, `{"name":"slow_sum","arguments":{"a":9007199254740993,"b":0,"delay_ms":0}}`, numberRefusal},
			{"resource read", bot, read, `{"uri":"demo://vault/public"}`, ""},
			{"resource refused", bot, read, `{"uri":"demo://vault/secret"}`, "not this resource"},
			{"resource in capitals refused", bot, read, `{"uri":"DEMO://vault/secret"}`, uriRefusal},
			{"resource with a dot segment refused", bot, read, `{"uri":"demo://vault/public/../secret"}`, uriRefusal},
			{"resource with an escaped dot segment refused", bot, read, `{"uri":"demo://vault/%2e/secret"}`, uriRefusal},
			{"resource with a tab refused", bot, read, `{"uri":"demo://vault/sec\tret"}`, uriRefusal},
			// H6: every method naming a resource or a prompt is decided
			// like resources/read and prompts/get. Before, subscribe,
			// unsubscribe and completion/complete passed undecided.
			{"subscribe", bot, sub, `{"uri":"demo://vault/public"}`, ""},
			{"subscribe refused", bot, sub, `{"uri":"demo://vault/secret"}`, "not this resource"},
			{"subscribe in capitals refused", bot, sub, `{"uri":"DEMO://vault/secret"}`, uriRefusal},
			{"unsubscribe refused", bot, unsub, `{"uri":"demo://vault/secret"}`, "not this resource"},
			{"template refused", bot, read, `{"uri":"demo://vault/{name}"}`, uriRefusal},
			{"template completion refused", bot, complete, `{"ref":{"type":"ref/resource","uri":"demo://vault/{name}"},"argument":{"name":"name","value":"s"}}`, "not this resource"},
			{"template completion for another principal", ops, complete, `{"ref":{"type":"ref/resource","uri":"demo://vault/{name}"},"argument":{"name":"name","value":"s"}}`, ""},
			{"prompt refused", bot, prompt, `{"name":"vault_prompt","arguments":{"entry":"public"}}`, "not this prompt"},
			{"prompt completion refused", bot, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"s"}}`, "not this prompt"},
			{"prompt completion behind a decoy name refused", bot, complete, `{"name":"other","ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"s"}}`, "not this prompt"},
			{"ambiguous ref refused", bot, complete, `{"ref":{"type":"ref/prompt","name":"other","NAME":"vault_prompt"},"argument":{"name":"entry","value":"s"}}`, "differ only in case"},
			{"prompt completion for another principal", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"s"}}`, ""},
			// H10: completion/complete's params.argument reaches the
			// policy (input.mcp.argument), read strictly. Before, a rule
			// on it could not be written: these were completed.
			{"completion argument value refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"sec"}}`, "not this completion"},
			{"template completion argument value refused", ops, complete, `{"ref":{"type":"ref/resource","uri":"demo://vault/{name}"},"argument":{"name":"name","value":"sec"}}`, "not this completion"},
			{"completion argument value twice refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p","value":"sec"}}`, "appears twice"},
			{"completion argument value in capitals refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p","VALUE":"sec"}}`, "differ only in case"},
			{"completion argument spelled twice refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p"},"Argument":{"name":"entry","value":"sec"}}`, "differ only in case"},
			{"completion argument value not a string refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":["sec"]}}`, "params.argument"},
			// params.context.arguments, the arguments already resolved, is
			// judged like params.argument. Before, it was not in the
			// policy input and a malformed one reached the server.
			{"completion context passes", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p"},"context":{"arguments":{"entry":"public"}}}`, ""},
			{"completion context value refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p"},"context":{"arguments":{"entry":"secret"}}}`, "not this context"},
			{"completion context value twice refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p"},"context":{"arguments":{"entry":"public","entry":"secret"}}}`, "appears twice"},
			{"completion context arguments in two spellings refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p"},"context":{"arguments":{},"Arguments":{"entry":"secret"}}}`, "differ only in case"},
			{"completion context value not a string refused", ops, complete, `{"ref":{"type":"ref/prompt","name":"vault_prompt"},"argument":{"name":"entry","value":"p"},"context":{"arguments":{"entry":["secret"]}}}`, "params.context"},
		}},
	} {
		t.Run(srv.name, func(t *testing.T) { toolPolicyDoors(t, srv.upstream(t), srv.cases) })
	}
}

// policyCase is one call of TestMCPToolPolicy: refused names the operator's
// message, "" when the call must run.
type policyCase struct {
	name, principal, method, params string
	refused                         string
}

// toolPolicyDoors sends each case through the MCP sidecar and through
// ext_authz, both loaded with the example policies, in front of upstream.
func toolPolicyDoors(t *testing.T, upstream string, cases []policyCase) {
	root := repoRoot(t)
	named := filepath.Join(t.TempDir(), "named.rego")
	if err := os.WriteFile(named, []byte(`package warden.mcp
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": "not this resource"} if {
	input.principal.id == "agent://support-bot"
	input.mcp.uri in {"test://static-binary", "demo://vault/secret", "demo://vault/{name}"}
}
deny contains {"code": "FORBIDDEN", "msg": "a sum from 1000 up needs approval"} if {
	input.mcp.tool == "slow_sum"
	input.mcp.arguments.a >= 1000
}
deny contains {"code": "FORBIDDEN", "msg": "not this prompt"} if {
	input.principal.id == "agent://support-bot"
	input.mcp.prompt in {"test_prompt_with_arguments", "vault_prompt"}
}
deny contains {"code": "FORBIDDEN", "msg": "not this context"} if {
	some v in input.mcp.context_arguments
	startswith(v, "sec")
}
deny contains {"code": "FORBIDDEN", "msg": "not this answer"} if {
	some r in input.mcp.input_responses
	r.content.approver == "self"
}
deny contains {"code": "FORBIDDEN", "msg": "not this completion"} if {
	input.mcp.argument.name in {"entry", "name"}
	startswith(input.mcp.argument.value, "sec")
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := []string{"--policy", filepath.Join(root, "deploy/policies/mcp-tools.rego"), "--policy", filepath.Join(root, "deploy/policies/mcp-arguments.rego"), "--policy", named}

	doors := map[string]mcpPoster{}
	front, _ := startMCPWarden(t, upstream, policy...)
	doors["sidecar"] = func(t *testing.T, principal, sid, body string) ([]byte, string) {
		return httpPost(t, front+"/mcp", principal, sid, body)
	}
	check := extAuthzCheck(t, append([]string{"--extauthz-mcp"}, policy...)...)
	doors["ext_authz"] = func(t *testing.T, principal, sid, body string) ([]byte, string) {
		// Envoy: ask Warden, forward what it allows, answer with its refusal.
		h := mcpHeaders(sid)
		h["authorization"] = "Bearer " + principal
		h["content-type"] = "application/json"
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		if m.Method != "" {
			h["mcp-method"] = m.Method
		}
		resp := check("/mcp", h, body)
		if dr := resp.GetDeniedResponse(); dr != nil {
			return []byte(dr.GetBody()), sid
		}
		return httpPost(t, upstream+"/mcp", principal, sid, body)
	}

	for name, post := range doors {
		t.Run(name, func(t *testing.T) {
			sids := map[string]string{}
			for _, p := range []string{"agent://support-bot", "agent://ops"} {
				_, sid := post(t, p, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"policy","version":"0"}}}`)
				if sid == "" {
					t.Fatalf("%s: initialize named no session", p)
				}
				post(t, p, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				sids[p] = sid
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					msg, _ := post(t, tc.principal, sids[tc.principal], `{"jsonrpc":"2.0","id":7,"method":"`+tc.method+`","params":`+tc.params+`}`)
					var a struct {
						Result *struct {
							Content  []json.RawMessage `json:"content"`
							Contents []json.RawMessage `json:"contents"`
							Messages []json.RawMessage `json:"messages"`
							// completion/complete's answer
							Completion *struct {
								Values []string `json:"values"`
							} `json:"completion"`
						} `json:"result"`
						Error *struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"error"`
					}
					if err := json.Unmarshal(msg, &a); err != nil {
						t.Fatalf("answer %q: %v", msg, err)
					}
					if tc.refused == "" {
						subscribed := a.Result != nil && (tc.method == "resources/subscribe" || tc.method == "resources/unsubscribe")
						completed := a.Result != nil && a.Result.Completion != nil && len(a.Result.Completion.Values) > 0
						if !subscribed && !completed && (a.Result == nil || len(a.Result.Content)+len(a.Result.Contents)+len(a.Result.Messages) == 0) {
							t.Fatalf("the tool did not run: %s", msg)
						}
						return
					}
					if a.Error == nil || !strings.Contains(a.Error.Message, tc.refused) {
						t.Fatalf("want a refusal naming %q, got %s", tc.refused, msg)
					}
				})
			}
		})
	}
}

func mcpHeaders(sid string) map[string]string {
	h := map[string]string{"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
	if sid != "" {
		h["mcp-session-id"] = sid
	}
	return h
}

// httpPost POSTs body to url as principal in session sid and returns the
// JSON-RPC message of the answer (the last of an event stream) and the
// session ID.
func httpPost(t *testing.T, url, principal, sid, body string) ([]byte, string) {
	t.Helper()
	_, msg, sid, _ := httpPostWith(t, url, principal, sid, body, nil)
	return msg, sid
}

// httpPostWith is httpPost with extra headers, set as given (names and
// bytes unchecked), returning the answer's status and headers too.
func httpPostWith(t *testing.T, url, principal, sid, body string, extra map[string]string) (int, []byte, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range mcpHeaders(sid) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer "+principal)
	for k, v := range extra {
		req.Header[k] = []string{v}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		sid = s
	}
	return resp.StatusCode, lastMessage(resp, b), sid, resp.Header
}
