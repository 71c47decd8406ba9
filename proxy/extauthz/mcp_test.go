package extauthz

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
)

func mcpServer(t testing.TB) *Server { return mcpReplica(t, nil) }

// mcpReplica is mcpServer over tasks, the owner table's shared store (nil:
// this replica's table only).
func mcpReplica(t testing.TB, tasks proxy.TaskStore) *Server {
	t.Helper()
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: []authn.Method{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	enf, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: engine, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "unused", MCP: true, AllowedHosts: []string{"mcp.local"}}, macpOn(t, enf), nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// mcpCheck builds a CheckRequest as Envoy's ext_authz filter does for an MCP
// POST (with_request_body, pack_as_bytes); extra headers override, "" deletes.
func mcpCheck(method, body string, extra map[string]string) *authv3.CheckRequest {
	headers := map[string]string{
		":authority": "mcp.local", ":method": method, ":path": "/mcp", "content-type": "application/json",
		"accept": "application/json, text/event-stream", "authorization": "Bearer alice", "mcp-protocol-version": "2026-07-28",
	}
	var p struct {
		Method string `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(body), &p) == nil && p.Method != "" {
		headers["mcp-method"] = p.Method
		if p.Params.TaskID != "" {
			headers["mcp-name"] = p.Params.TaskID
		}
	}
	for k, v := range extra {
		if v == "" {
			delete(headers, k)
		} else {
			headers[k] = v
		}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: method, Path: "/mcp", Host: headers[":authority"], Protocol: "HTTP/1.1", Headers: headers, RawBody: []byte(body),
	}}}}
}

// TestMCPThroughCheck: the rules that can be decided from an MCP request
// alone give the answers the standalone sidecar gives (see
// test/mcp_tasks_test.go TestMCPBadInput and TestMCPSEP2669).
func TestMCPThroughCheck(t *testing.T) {
	srv := mcpServer(t)
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"abc"}}`
	for _, tc := range []struct {
		name   string
		method string
		body   string
		extra  map[string]string
		allow  bool
		status int
		want   string // in the denial body
	}{
		{"tasks/get with matching headers", "POST", get, nil, true, 0, ""},
		{"GET stream", "GET", "", nil, true, 0, ""},
		{"no credentials", "POST", get, map[string]string{"authorization": ""}, false, 401, `"code":-32001`},
		{"foreign origin", "POST", get, map[string]string{"origin": "http://evil.example"}, false, 403, "Origin"},
		{"an allowed host", "POST", get, map[string]string{"origin": "https://mcp.local"}, true, 0, ""},
		{"a rebound name as Origin and Host", "POST", get, map[string]string{"origin": "https://rebound.example", ":authority": "rebound.example"}, false, 403, "Origin"},
		{"broken JSON", "POST", `{"jsonrpc":"2.0","id":3,"method":`, nil, false, 400, `"code":-32700`},
		{"truncated body", "POST", get[:30], nil, false, 400, `"code":-32700`},
		{"body cut by Envoy", "POST", get[:30], map[string]string{"x-envoy-auth-partial-body": "true"}, false, 413, "max_request_bytes"},
		{"batch", "POST", "[" + get + "]", nil, false, 400, `"code":-32600`},
		{"Mcp-Name mismatch", "POST", get, map[string]string{"mcp-name": "other"}, false, 400, `"code":-32020`},
		{"Mcp-Name missing on 2026-07-28", "POST", get, map[string]string{"mcp-name": ""}, false, 400, `"code":-32020`},
		{"Mcp-Name missing on 2025-11-25", "POST", get, map[string]string{"mcp-name": "", "mcp-protocol-version": "2025-11-25"}, true, 0, ""},
		{"Mcp-Method mismatch", "POST", get, map[string]string{"mcp-method": "tools/call"}, false, 400, `"code":-32020`},
		{"steer over the bound", "POST", `{"jsonrpc":"2.0","id":4,"method":"tasks/steer","params":{"taskId":"abc","message":"` + strings.Repeat("x", 17<<10) + `"}}`, nil, false, 200, `"id":4,"error":{"code":-32602`},
		{"steer without an id, over the bound", "POST", `{"jsonrpc":"2.0","method":"tasks/steer","params":{"taskId":"abc","message":"` + strings.Repeat("x", 17<<10) + `"}}`, nil, false, 400, "tasks/steer is a request and needs an id"},
		{"cancel without an id", "POST", `{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"abc"}}`, nil, false, 400, `"code":-32600`},
		{"tools/call without an id", "POST", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, map[string]string{"mcp-name": "", "mcp-method": ""}, false, 400, "needs an id"},
		{"tasks/list without an id", "POST", `{"jsonrpc":"2.0","method":"tasks/list"}`, map[string]string{"mcp-name": "", "mcp-method": ""}, false, 400, "needs an id"},
		{"a notification", "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"mcp-name": "", "mcp-method": ""}, true, 0, ""},
		{"steer within the bound", "POST", `{"jsonrpc":"2.0","id":4,"method":"tasks/steer","params":{"taskId":"abc","message":"focus"}}`, nil, true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Check(context.Background(), mcpCheck(tc.method, tc.body, tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			if ok := resp.GetOkResponse(); tc.allow {
				if ok == nil {
					t.Fatalf("denied: %v", resp.GetDeniedResponse())
				}
				if hs := ok.GetHeaders(); len(hs) != 1 || hs[0].GetHeader().GetValue() != "alice" {
					t.Errorf("principal header: %v", hs)
				}
				return
			}
			dr := resp.GetDeniedResponse()
			if dr == nil {
				t.Fatal("allowed, want a denial")
			}
			if int(dr.GetStatus().GetCode()) != tc.status || !strings.Contains(dr.GetBody(), tc.want) || !json.Valid([]byte(dr.GetBody())) {
				t.Fatalf("HTTP %d %s, want %d with %s", dr.GetStatus().GetCode(), dr.GetBody(), tc.status, tc.want)
			}
			if tc.status == 401 {
				found := false
				for _, h := range dr.GetHeaders() {
					found = found || h.GetHeader().GetKey() == "www-authenticate"
				}
				if !found {
					t.Error("no WWW-Authenticate on 401")
				}
			}
		})
	}
}

// BenchmarkCheckMCP measures Check for an allowed MCP tasks/get and a denied
// one (Mcp-Name mismatch, decided through the Enforcer).
func BenchmarkCheckMCP(b *testing.B) {
	srv := mcpServer(b)
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"4f1c2b7e9a0d4c3b8e6f5a1d2c3b4a59"}}`
	for name, r := range map[string]*authv3.CheckRequest{
		"tasks-get/allow": mcpCheck("POST", get, nil),
		"tasks-get/deny":  mcpCheck("POST", get, map[string]string{"mcp-name": "other"}),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := srv.Check(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMCPPath: MCP has one endpoint; a body or a GET on any other path,
// however close its spelling, is denied before anything else is read.
func TestMCPPath(t *testing.T) {
	srv := mcpServer(t)
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"abc"}}`
	for _, tc := range []struct {
		method, path string
		allow        bool
	}{
		{"POST", "/mcp", true},
		{"GET", "/mcp", true},
		{"POST", "/messages?sessionId=1", false}, // the legacy HTTP+SSE transport's endpoint
		{"GET", "/sse", false},
		{"GET", "/admin", false},
		{"POST", "/mcp/", false},
		{"POST", "//mcp", false},
		{"POST", "/%6Dcp", false},
		{"POST", "/x/../mcp", false},
		{"POST", "/MCP", false},
		{"POST", "/mcp#x", false},
	} {
		body := get
		if tc.method != "POST" {
			body = ""
		}
		req := mcpCheck(tc.method, body, nil)
		req.GetAttributes().GetRequest().GetHttp().Path = tc.path
		resp, err := srv.Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		dr := resp.GetDeniedResponse()
		if tc.allow != (dr == nil) {
			t.Errorf("%s %s: denied=%v (%s), want allowed=%v", tc.method, tc.path, dr != nil, dr.GetBody(), tc.allow)
		}
		if !tc.allow && (dr.GetStatus().GetCode() != 404 || !strings.Contains(dr.GetBody(), "endpoint at /mcp only")) {
			t.Errorf("%s %s: %d %s, want 404 naming /mcp", tc.method, tc.path, dr.GetStatus().GetCode(), dr.GetBody())
		}
	}
}

// TestMCPContentEncoding: a compressed body is not decided on; the server
// may inflate it into another message.
func TestMCPContentEncoding(t *testing.T) {
	srv := mcpServer(t)
	get := `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"abc"}}`
	for ce, allow := range map[string]bool{"gzip": false, "deflate": false, "br": false, "identity": true, "": true} {
		resp, err := srv.Check(context.Background(), mcpCheck("POST", get, map[string]string{"content-encoding": ce}))
		if err != nil {
			t.Fatal(err)
		}
		dr := resp.GetDeniedResponse()
		if allow != (dr == nil) || !allow && dr.GetStatus().GetCode() != 415 {
			t.Errorf("Content-Encoding %q: %v, want allowed=%v (else 415)", ce, resp, allow)
		}
	}
}

// macpOn is the MACP decision on e, as cmd/warden builds it for ext_authz.
func macpOn(t testing.TB, e *proxy.Enforcer) *sessions.Decider {
	t.Helper()
	dec, err := sessions.New(e, sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dec
}
