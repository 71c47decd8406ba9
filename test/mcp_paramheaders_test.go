package test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPParamHeaders: SEP-2243's Mcp-Param-{Name} headers through
// bin/warden in front of the Go SDK everything-server, whose
// test_x_mcp_header tool mirrors its region argument in Mcp-Param-Region.
// The sidecar learns the tool's inputSchema from tools/list: a header equal
// to the argument (plain or =?base64?...?=) is forwarded and the tool runs;
// one that differs, names an argument not given or not mirrored, holds a
// byte outside ASCII or a base64 value that does not decode is refused 400
// (HEADER_MISMATCH) before the server. ext_authz, which never sees the
// schema, refuses the values that do not read and forwards the others.
// Before, every Mcp-Param-* header was forwarded unchecked: a router
// reading Mcp-Param-Region saw a region the argument policy never judged
// (the server, on 2025-11-25, ran the tool on another).
func TestMCPParamHeaders(t *testing.T) {
	bin := peer(t, ".peers/bin/everything-server")
	addr := freeAddr(t)
	start(t, "everything-server", addr, nil, bin, "-http", addr, "-stateless=false")
	front, _ := startMCPWarden(t, "http://"+addr)

	// post returns the answer's status, its JSON-RPC message, the session
	// and whether Warden made it (X-Warden-Decision).
	post := func(t *testing.T, sid, body string, extra map[string]string) (int, []byte, string, bool) {
		t.Helper()
		status, msg, sid, h := httpPostWith(t, front+"/mcp", "alice", sid, body, extra)
		return status, msg, sid, h.Get("X-Warden-Decision") != ""
	}
	_, _, sid, _ := post(t, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"params","version":"0"}}}`, nil)
	if sid == "" {
		t.Fatal("initialize named no session")
	}
	post(t, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)

	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_x_mcp_header","arguments":` + args + `}}`
	}
	for _, tc := range []struct {
		name, args string
		headers    map[string]string
		refused    bool
	}{
		{"equal", `{"region":"us-west1"}`, map[string]string{"Mcp-Param-Region": "us-west1"}, false},
		{"name in another case", `{"region":"us-west1"}`, map[string]string{"mcp-param-REGION": "us-west1"}, false},
		{"base64 equal", `{"region":" padded "}`, map[string]string{"Mcp-Param-Region": "=?base64?IHBhZGRlZCA=?="}, false},
		{"no header on 2025-11-25", `{"region":"eu-west1"}`, nil, false},
		{"different", `{"region":"eu-west1"}`, map[string]string{"Mcp-Param-Region": "us-west1"}, true},
		{"argument not given", `{"level":1}`, map[string]string{"Mcp-Param-Region": "us-west1"}, true},
		{"argument not mirrored", `{"region":"eu","level":1}`, map[string]string{"Mcp-Param-Region": "eu", "Mcp-Param-Level": "1"}, true},
		{"bad base64", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "=?base64?ZXU?="}, true},
		{"byte outside ASCII", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "eu\xc3\xa9"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg, _, warden := post(t, sid, call(tc.args), tc.headers)
			var a struct {
				Result *struct {
					Content []json.RawMessage `json:"content"`
				} `json:"result"`
				Error *struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.Unmarshal(msg, &a)
			if !tc.refused {
				if status != 200 || a.Result == nil || len(a.Result.Content) == 0 {
					t.Fatalf("the tool did not run: %d %s", status, msg)
				}
				return
			}
			if status != 400 || a.Error == nil || !strings.Contains(a.Error.Message, "Mcp-Param-") || !warden {
				t.Fatalf("want Warden's 400 naming the Mcp-Param- header, got %d %s", status, msg)
			}
		})
	}

	check := extAuthzCheck(t, "--extauthz-mcp")
	for _, tc := range []struct {
		name, value string
		refused     bool
	}{
		{"forwarded: the schema is never seen", "us-west1", false},
		{"bad base64", "=?base64?ZXU?=", true},
		{"byte outside ASCII", "eu\xc3\xa9", true},
	} {
		t.Run("ext_authz "+tc.name, func(t *testing.T) {
			h := mcpHeaders(sid)
			h["content-type"], h["mcp-method"], h["mcp-param-region"] = "application/json", "tools/call", tc.value
			resp := check("/mcp", h, call(`{"region":"eu"}`))
			dr := resp.GetDeniedResponse()
			if tc.refused != (dr != nil) || (dr != nil && (dr.GetStatus().GetCode() != 400 || !strings.Contains(dr.GetBody(), "Mcp-Param-Region"))) {
				t.Fatalf("refused %v, want %v: %v", dr != nil, tc.refused, resp)
			}
		})
	}
}
