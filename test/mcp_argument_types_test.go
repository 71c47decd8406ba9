package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPArgumentTypes (P1 in docs/security.md): bin/warden's MCP sidecar in
// front of the MCP Python SDK's MCPServer (mcp 2.3.0), loaded with the
// shipped argument policy (deploy/policies/mcp-arguments.rego) and a rule
// refusing remove unless it is a dry run. The SDK reads an argument sent as
// another JSON type than its inputSchema declares as that type: a string
// holding JSON becomes the list its parameter declares (pre_parse_json,
// its escapes decoded), and pydantic's lax mode reads "false" or 0 as the
// bool false. The policy judged the value as sent (a string, a number), the
// tool ran on the value it read. Before, the four "as another type" rows
// ran the tool ("read ../etc/passwd", "removed /x"); now Warden refuses an
// argument whose JSON type the tool's inputSchema does not allow, before
// the policy, and the rows sent as declared are decided as before.
func TestMCPArgumentTypes(t *testing.T) {
	py := peer(t, ".peers/mcp-venv/bin/python")
	addr := freeAddr(t)
	start(t, "mcp-py typed server", addr, nil, py, filepath.Join(repoRoot(t), "test/peers/mcp-py/typed_server.py"), addr)
	rule := filepath.Join(t.TempDir(), "remove.rego")
	if err := os.WriteFile(rule, []byte(`package warden.mcp
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": "remove only as a dry run"} if {
	input.mcp.tool == "remove"
	input.mcp.arguments.dry_run == false
}
deny contains {"code": "FORBIDDEN", "msg": "no negative payment"} if {
	input.mcp.tool == "pay"
	some amount in input.mcp.arguments.limits
	amount < 0
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	front, _ := startMCPWarden(t, "http://"+addr, "--policy", filepath.Join(repoRoot(t), "deploy/policies/mcp-arguments.rego"), "--policy", rule)
	url := front + "/mcp"

	_, sid := httpPost(t, url, "ops", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"types","version":"0"}}}`)
	if sid == "" {
		t.Fatal("initialize named no session")
	}
	httpPost(t, url, "ops", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	typeRefusal := "inputSchema"
	for _, tc := range []struct {
		name, args, want string
	}{
		{"paths as declared", `{"name":"read_files","arguments":{"paths":["a.txt","b.txt"]}}`, "read a.txt,b.txt"},
		{"traversal as declared refused", `{"name":"read_files","arguments":{"paths":["../etc/passwd"]}}`, "forbidden pattern"},
		{"paths as a string of JSON, escaped traversal", `{"name":"read_files","arguments":{"paths":"[\"..\\u002fetc/passwd\"]"}}`, typeRefusal},
		{"paths as a string of JSON", `{"name":"read_files","arguments":{"paths":"[\"a.txt\"]"}}`, typeRefusal},
		{"dry run", `{"name":"remove","arguments":{"path":"/x","dry_run":true}}`, "would remove /x"},
		{"no dry run refused", `{"name":"remove","arguments":{"path":"/x","dry_run":false}}`, "remove only as a dry run"},
		{"dry_run as the string false", `{"name":"remove","arguments":{"path":"/x","dry_run":"false"}}`, typeRefusal},
		{"dry_run as 0", `{"name":"remove","arguments":{"path":"/x","dry_run":0}}`, typeRefusal},
		{"path as a number", `{"name":"remove","arguments":{"path":7,"dry_run":true}}`, typeRefusal},
		// a string holding JSON for a parameter that also takes it as JSON
		// (list[str] | str): the SDK parses it, escapes decoded
		{"one path as declared", `{"name":"read_either","arguments":{"paths":"a.txt"}}`, "read a.txt"},
		{"paths as declared, either", `{"name":"read_either","arguments":{"paths":["a.txt","b.txt"]}}`, "read a.txt,b.txt"},
		{"either: traversal in a string of JSON", `{"name":"read_either","arguments":{"paths":"[\"..\\u002fetc/passwd\"]"}}`, typeRefusal},
		{"untyped: one path", `{"name":"read_untyped","arguments":{"paths":"a.txt"}}`, "read a.txt"},
		{"untyped: traversal in a string of JSON", `{"name":"read_untyped","arguments":{"paths":"[\"..\\u002fetc/passwd\"]"}}`, typeRefusal},
		// patternProperties (pydantic's schema of a dict keyed by a
		// constrained string): pydantic reads "-500" as -500, which the
		// rule judged as a string (in Rego no string is below 0), and
		// matches \d with any Unicode digit, which RE2 does not
		{"amount as declared", `{"name":"pay","arguments":{"limits":{"n_1":500}}}`, "paid n_1=500"},
		{"negative amount refused", `{"name":"pay","arguments":{"limits":{"n_1":-500}}}`, "no negative payment"},
		{"negative amount as a string", `{"name":"pay","arguments":{"limits":{"n_1":"-500"}}}`, typeRefusal},
		{"negative amount as a string under a name RE2 does not match", `{"name":"pay","arguments":{"limits":{"n_\u0663":"-500"}}}`, typeRefusal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, _ := httpPost(t, url, "ops", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+tc.args+`}`)
			if !strings.Contains(string(msg), tc.want) {
				t.Fatalf("%s: got %s, want it to hold %q", tc.args, msg, tc.want)
			}
			if strings.Contains(string(msg), "removed /x") || strings.Contains(string(msg), "read ../") || strings.Contains(string(msg), "=-500") {
				t.Fatalf("%s: the tool ran on what the policy refuses: %s", tc.args, msg)
			}
		})
	}
}
