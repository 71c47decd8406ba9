package extauthz

import (
	"context"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

// TestA2AChecks: what ext_authz decides about A2A from the request alone.
func TestA2AChecks(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, Config{Listen: "unused", A2A: true, A2AWebhookAllow: []string{"hooks.internal"}, A2APath: "/jsonrpc"})
	req := func(method, path, bearer, body string) *authv3.CheckRequest {
		h := map[string]string{"content-type": "application/json"}
		if bearer != "" {
			h["authorization"] = "Bearer " + bearer
		}
		return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: method, Path: path, Host: "agent.local", Headers: h, RawBody: []byte(body),
		}}}}
	}
	const listTasks = `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	push := func(url string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t1","url":"` + url + `"}}`
	}
	tests := []struct {
		name   string
		req    *authv3.CheckRequest
		status int32 // 0: allowed
		body   string
	}{
		{"public card", req("GET", "/.well-known/agent-card.json", "", ""), 0, ""},
		{"no credentials", req("POST", "/jsonrpc", "", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`), 401, ""},
		{"extended card", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`), 0, ""},
		{"get task (ownership needs the sidecar)", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t1"}}`), 0, ""},
		{"REST read", req("GET", "/rest/tasks/t1", "bob", ""), 404, ""},
		{"REST send", req("POST", "/rest/message:send", "bob", `{"message":{"parts":[]}}`), 404, ""},
		// A JSON-RPC body Warden would allow, on a path the server routes
		// to another handler (the HTTP+JSON binding's cancel): refused on
		// the path, whatever the body.
		{"REST cancel with a JSON-RPC body", req("POST", "/v1/tasks/t1:cancel", "bob", listTasks), 404, `"status":"NOT_FOUND"`},
		{"REST cancel under the endpoint", req("POST", "/jsonrpc/tasks/t1:cancel", "bob", listTasks), 404, ""},
		{"endpoint with a trailing slash", req("POST", "/jsonrpc/", "bob", listTasks), 404, ""},
		{"endpoint with a doubled slash", req("POST", "//jsonrpc", "bob", listTasks), 404, ""},
		{"endpoint percent-escaped", req("POST", "/%6Asonrpc", "bob", listTasks), 404, ""},
		{"endpoint escaped slash", req("POST", "/v1%2F..%2Fjsonrpc", "bob", listTasks), 404, ""},
		{"endpoint through a dot segment", req("POST", "/v1/../jsonrpc", "bob", listTasks), 404, ""},
		{"endpoint with a dot segment", req("POST", "/./jsonrpc", "bob", listTasks), 404, ""},
		{"endpoint in another case", req("POST", "/JSONRPC", "bob", listTasks), 404, ""},
		{"endpoint with a fragment", req("POST", "/jsonrpc#x", "bob", listTasks), 404, ""},
		{"endpoint with a path parameter", req("POST", "/jsonrpc;x=1", "bob", listTasks), 404, ""},
		{"endpoint with a query", req("POST", "/jsonrpc?tenant=a", "bob", listTasks), 200, `without a query`},
		{"GET of the endpoint", req("GET", "/jsonrpc", "bob", ""), 405, ""},
		{"card written to", req("POST", "/.well-known/agent-card.json", "bob", listTasks), 405, ""},
		{"0.3 card", req("GET", "/.well-known/agent.json", "", ""), 0, ""},
		{"0.3 card with a query", req("GET", "/.well-known/agent.json?x=1", "", ""), 400, `"status":"BAD_REQUEST"`},
		{"card escaped", req("GET", "/.well-known/agent-card%2Ejson", "", ""), 404, ""},
		{"anonymous elsewhere", req("GET", "/admin", "", ""), 404, ""},
		{"unknown method", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1"}}`), 200, `"code":-32601`},
		{"case-folded member", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"t1"}}`), 200, `"id":1,"error":{"code":-32600`},
		{"public webhook", req("POST", "/jsonrpc", "bob", push("https://hooks.example.com/x")), 0, ""},
		{"allowlisted webhook", req("POST", "/jsonrpc", "bob", push("http://hooks.internal/x")), 0, ""},
		{"loopback webhook", req("POST", "/jsonrpc", "bob", push("http://2130706433/")), 200, `"code":-32602`},
		{"loopback webhook in 0.3's nesting", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t1","pushNotificationConfig":{"url":"http://127.0.0.1/"}}}`), 200, `"code":-32602`},
		{"tenant (a gateway may route it to another agent)", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"tenant":"acme"}}`), 200, `"code":-32602`},
		{"tenant on a message", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"tenant":"acme","message":{"messageId":"m","parts":[]}}}`), 200, "tenant routing"},
		{"metadata webhook in a message", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[]},"configuration":{"taskPushNotificationConfig":{"url":"http://[::ffff:a9fe:a9fe]/"}}}}`), 200, `"code":-32602`},
	}
	for _, ce := range []string{"gzip", "br", "deflate", "identity, gzip"} {
		r := req("POST", "/jsonrpc", "bob", listTasks)
		r.GetAttributes().GetRequest().GetHttp().GetHeaders()["content-encoding"] = ce
		tests = append(tests, struct {
			name   string
			req    *authv3.CheckRequest
			status int32
			body   string
		}{"body with Content-Encoding " + ce + " (the server would read other bytes)", r, 415, "Content-Encoding"})
	}
	r := req("POST", "/jsonrpc", "bob", listTasks)
	r.GetAttributes().GetRequest().GetHttp().GetHeaders()["content-encoding"] = "identity"
	tests = append(tests, struct {
		name   string
		req    *authv3.CheckRequest
		status int32
		body   string
	}{"Content-Encoding identity", r, 0, ""})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Check(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			dr := resp.GetDeniedResponse()
			if tc.status == 0 {
				if dr != nil {
					t.Fatalf("denied: %v %s", resp.GetStatus(), dr.GetBody())
				}
				return
			}
			if dr == nil || int32(dr.GetStatus().GetCode()) != tc.status || !strings.Contains(dr.GetBody(), tc.body) {
				t.Fatalf("got %v, want HTTP %d with %s", resp, tc.status, tc.body)
			}
		})
	}
	if err := (Config{Listen: "x", MCP: true, A2A: true}).Validate(); err == nil {
		t.Fatal("mcp and a2a together accepted")
	}
	// The default endpoint is "/".
	def := newServer(t, Config{Listen: "unused", A2A: true})
	for path, want := range map[string]int32{"/": 0, "/?x": 200, "/jsonrpc": 404, "//": 404, "/%2F": 404} {
		resp, err := def.Check(ctx, req("POST", path, "bob", listTasks))
		if err != nil {
			t.Fatal(err)
		}
		if got := int32(resp.GetDeniedResponse().GetStatus().GetCode()); got != want {
			t.Errorf("default path: POST %s = HTTP %d, want %d (0: allowed)", path, got, want)
		}
	}
}

// TestEndpointPathConfig: a configured endpoint path is in the one spelling
// requests are compared with.
func TestEndpointPathConfig(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/", true}, {"/jsonrpc", true}, {"/a2a/v1", true}, {"/mcp/", true},
		{"", false}, {"jsonrpc", false}, {"//jsonrpc", false}, {"/a/../jsonrpc", false}, {"/./x", false}, {"/x/.", false},
		{"/%6A", false}, {"/x?y", false}, {"/x#y", false}, {"/x y", false}, {`/x\y`, false}, {"/x\x00", false},
	} {
		errA := (Config{Listen: "x", A2A: true, A2APath: tc.path}).Validate()
		errM := (Config{Listen: "x", MCP: true, MCPPath: tc.path}).Validate()
		if tc.path == "" { // empty: the default
			errA, errM = validEndpointPath("a2a_path", ""), validEndpointPath("mcp_path", "")
		}
		if (errA == nil) != tc.ok || (errM == nil) != tc.ok {
			t.Errorf("path %q: a2a %v, mcp %v, want ok=%v", tc.path, errA, errM, tc.ok)
		}
	}
	if _, err := New(Config{Listen: "x", A2A: true, A2APath: "/a/../b"}, nil, nil); err == nil {
		t.Error("New took an unclean path")
	}
}
