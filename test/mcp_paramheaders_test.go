package test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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

// TestMCPParamHeaderComma: a mirrored argument holding a comma, sent in one
// field line as SEP-2243 clients send plain ASCII (the Go SDK's and the
// Python SDK's clients wrap only non-ASCII, edge whitespace and the
// sentinel), through bin/warden in front of the Go SDK everything-server in
// its stateless mode at 2026-07-28, which itself compares the header
// (Header.Get: the first line, whole) with the argument. The sidecar sees
// field lines: one line "Paris, France" is one value, forwarded whole, and
// the server runs the tool on it; two lines are refused by Warden (the
// server would read the first). ext_authz sees Envoy's comma-joined value,
// where one line holding a comma cannot be told from two lines: refused,
// naming =?base64?...?=, the form every door passes. Before, the sidecar
// refused one line holding a comma as the header given twice (U3's fix).
func TestMCPParamHeaderComma(t *testing.T) {
	bin := peer(t, ".peers/bin/everything-server")
	addr := freeAddr(t)
	start(t, "everything-server", addr, nil, bin, "-http", addr)
	front, _ := startMCPWarden(t, "http://"+addr)

	call := func(region string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_x_mcp_header","arguments":{"region":` + strconv.Quote(region) +
			`},"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"comma","version":"0"},"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	}
	// post sends body with each of lines as an Mcp-Param-Region field line.
	post := func(t *testing.T, body string, lines ...string) (int, []byte, bool) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, front+"/mcp", strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer alice",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_x_mcp_header"} {
			req.Header.Set(k, v)
		}
		for _, l := range lines {
			req.Header.Add("Mcp-Param-Region", l)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, lastMessage(resp, b), resp.Header.Get("X-Warden-Decision") != ""
	}
	for _, tc := range []struct {
		name, region string
		lines        []string
		refused      string // a word of Warden's refusal ("": the tool runs)
	}{
		{"one line holding a comma", "Paris, France", []string{"Paris, France"}, ""},
		{"one line holding a comma, base64", "Paris, France", []string{"=?base64?UGFyaXMsIEZyYW5jZQ==?="}, ""},
		{"a list in one line", "eu,us", []string{"eu,us"}, ""},
		{"two lines", "Paris, France", []string{"Paris", "France"}, "given 2 times"},
		{"two lines, the argument the first", "Paris", []string{"Paris", "France"}, "given 2 times"},
		{"one line holding a comma, another argument", "Paris", []string{"Paris, France"}, "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg, warden := post(t, call(tc.region), tc.lines...)
			var a struct {
				Result *struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"result"`
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.Unmarshal(msg, &a)
			if tc.refused == "" {
				// the server compared the header it received with the argument
				if status != 200 || a.Result == nil || len(a.Result.Content) == 0 || a.Result.Content[0].Text != "region="+tc.region {
					t.Fatalf("the tool did not run on %q: %d %s", tc.region, status, msg)
				}
				return
			}
			if status != 400 || !warden || a.Error == nil || a.Error.Code != -32020 || !strings.Contains(a.Error.Message, tc.refused) {
				t.Fatalf("want Warden's 400 -32020 saying %q, got %d %s", tc.refused, status, msg)
			}
		})
	}

	// ext_authz: one line holding a comma reads as two lines joined;
	// base64 passes.
	check := extAuthzCheck(t, "--extauthz-mcp")
	h := map[string]string{"accept": "application/json, text/event-stream", "content-type": "application/json", "mcp-protocol-version": "2026-07-28",
		"mcp-method": "tools/call", "mcp-name": "test_x_mcp_header"}
	for value, refused := range map[string]bool{"Paris, France": true, "=?base64?UGFyaXMsIEZyYW5jZQ==?=": false} {
		h["mcp-param-region"] = value
		dr := check("/mcp", h, call("Paris, France")).GetDeniedResponse()
		if refused != (dr != nil) || (dr != nil && (dr.GetStatus().GetCode() != 400 || !strings.Contains(dr.GetBody(), "=?base64?"))) {
			t.Errorf("ext_authz, Mcp-Param-Region %q: refused %v (%s), want %v", value, dr != nil, dr.GetBody(), refused)
		}
	}
}
