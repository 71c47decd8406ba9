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
	srv := newServer(t, Config{Listen: "unused", A2A: true, A2AWebhookAllow: []string{"hooks.internal"}})
	req := func(method, path, bearer, body string) *authv3.CheckRequest {
		h := map[string]string{"content-type": "application/json"}
		if bearer != "" {
			h["authorization"] = "Bearer " + bearer
		}
		return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: method, Path: path, Host: "agent.local", Headers: h, RawBody: []byte(body),
		}}}}
	}
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
		{"REST read", req("GET", "/rest/tasks/t1", "bob", ""), 405, ""},
		{"REST send", req("POST", "/rest/message:send", "bob", `{"message":{"parts":[]}}`), 400, ""},
		{"unknown method", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1"}}`), 200, `"code":-32601`},
		{"case-folded member", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"t1"}}`), 400, `"code":-32600`},
		{"public webhook", req("POST", "/jsonrpc", "bob", push("https://hooks.example.com/x")), 0, ""},
		{"allowlisted webhook", req("POST", "/jsonrpc", "bob", push("http://hooks.internal/x")), 0, ""},
		{"loopback webhook", req("POST", "/jsonrpc", "bob", push("http://2130706433/")), 200, `"code":-32602`},
		{"metadata webhook in a message", req("POST", "/jsonrpc", "bob", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[]},"configuration":{"taskPushNotificationConfig":{"url":"http://[::ffff:a9fe:a9fe]/"}}}}`), 200, `"code":-32602`},
	}
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
}
