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
deny contains {"code": "FORBIDDEN", "msg": "remove only as a dry run"} if {
	input.mcp.tool in {"act", "either"}
	some k, v in input.mcp.arguments
	v.dry_run == false
}
deny contains {"code": "FORBIDDEN", "msg": "remove only as a dry run"} if {
	input.mcp.tool == "flags"
	input.mcp.arguments.f.x_dry_run == false
}
deny contains {"code": "FORBIDDEN", "msg": "remove only as a dry run"} if {
	input.mcp.tool == "tidy"
	input.mcp.arguments.o.dryRun == false
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
	spelling := "another spelling"
	jsonContent := "contentMediaType"
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
		// S1: the schema, not Warden, picks the sub-schema a value is
		// read by; each "S1" row ran the tool before ("removed /x",
		// "read ../etc/passwd")
		{"tagged union as declared", `{"name":"act","arguments":{"action":{"kind":"rm","path":"/x","dry_run":true}}}`, "would remove /x"},
		{"tagged union, no dry run refused", `{"name":"act","arguments":{"action":{"kind":"rm","path":"/x","dry_run":false}}}`, "remove only as a dry run"},
		{"tagged union, the other tag", `{"name":"act","arguments":{"action":{"kind":"ls","path":"/x","dry_run":"false"}}}`, "listed /x"},
		{"S1 tagged union, dry_run as the string false", `{"name":"act","arguments":{"action":{"kind":"rm","path":"/x","dry_run":"false"}}}`, typeRefusal},
		{"pattern member as declared", `{"name":"flags","arguments":{"path":"/x","f":{"x_dry_run":true}}}`, "would remove /x"},
		{"S1 pattern member as the string false", `{"name":"flags","arguments":{"path":"/x","f":{"x_dry_run":"false"}}}`, typeRefusal},
		{"union as declared", `{"name":"either","arguments":{"a":{"dry_run":true,"path":"/x"}}}`, "would remove /x"},
		{"union, the other model", `{"name":"either","arguments":{"a":{"dry_run":"false","name":"n"}}}`, "named n"},
		{"S1 union, dry_run as the string false", `{"name":"either","arguments":{"a":{"dry_run":"false","path":"/x"}}}`, typeRefusal},
		{"str or list, a string", `{"name":"read_some","arguments":{"paths":"a.txt"}}`, "read a.txt"},
		{"str or list, a list", `{"name":"read_some","arguments":{"paths":["a.txt"]}}`, "read a.txt"},
		{"unannotated, a string", `{"name":"read_any","arguments":{"paths":"a.txt"}}`, "read a.txt"},
		{"S1 unannotated, a string of JSON, escaped traversal", `{"name":"read_any","arguments":{"paths":"[\"..\\u002fetc/passwd\"]"}}`, typeRefusal},
		{"unannotated with a default, a string", `{"name":"read_any","arguments":{"paths":"a.txt","where":"there"}}`, "read a.txt in 'there'"},
		{"S1 unannotated with a default, a string of JSON", `{"name":"read_any","arguments":{"paths":"a.txt","where":"[\"..\\u002fetc\"]"}}`, typeRefusal},
		{"str or list, a string that only starts like JSON", `{"name":"read_some","arguments":{"paths":"[WIP] notes.txt"}}`, "read [WIP] notes.txt"},
		{"S1 str or list, a string of JSON, escaped traversal", `{"name":"read_some","arguments":{"paths":"[\"..\\u002fetc/passwd\"]"}}`, typeRefusal},
		// T1: a member the schema does not declare that the tool reads
		// as one it declares (pydantic's populate_by_name reads dry_run
		// beside the alias dryRun the schema lists); the "T1" Python-name
		// rows ran the tool before ("removed /x")
		{"alias as declared", `{"name":"tidy","arguments":{"o":{"path":"/x","dryRun":true}}}`, "would remove /x"},
		{"alias, no dry run refused", `{"name":"tidy","arguments":{"o":{"path":"/x","dryRun":false}}}`, "remove only as a dry run"},
		{"T1 the Python name", `{"name":"tidy","arguments":{"o":{"path":"/x","dry_run":false}}}`, spelling},
		{"T1 the Python name escaped", `{"name":"tidy","arguments":{"o":{"path":"/x","dry\u005frun":false}}}`, spelling},
		{"T1 the Python name beside the alias", `{"name":"tidy","arguments":{"o":{"path":"/x","dryRun":true,"dry_run":false}}}`, spelling},
		{"T1 another case (pydantic ignores it; a case-insensitive reader would not)", `{"name":"tidy","arguments":{"o":{"path":"/x","DryRun":false}}}`, spelling},
		// T2: a string the schema says holds JSON (Json[T]): pydantic
		// parses it, and Warden reads it as pydantic does or refuses it;
		// the policy judges the value it holds. Before T2 the traversal
		// rows read ../etc/passwd (the policy judged the string); T2's
		// first form refused every row here, the plain ones included
		{"T2 a JSON string field", `{"name":"read_batch","arguments":{"b":{"paths":"[\"docs/a.md\"]"}}}`, "read docs/a.md"},
		{"T2 a JSON string field, escaped traversal", `{"name":"read_batch","arguments":{"b":{"paths":"[\"..\\u002fetc/passwd\"]"}}}`, "forbidden pattern"},
		{"T2 a JSON string field, a lone surrogate", `{"name":"read_batch","arguments":{"b":{"paths":"[\"a\\ud800\"]"}}}`, jsonContent},
		{"T2 a JSON string field, not JSON", `{"name":"read_batch","arguments":{"b":{"paths":"docs/a.md"}}}`, jsonContent},
		{"T2 a JSON string field, an element of another type", `{"name":"read_batch","arguments":{"b":{"paths":"[\"docs/a.md\",7]"}}}`, typeRefusal},
		{"T2 a JSON object", `{"name":"read_spec","arguments":{"o":{"spec":"{\"path\":\"docs/a.md\"}"}}}`, "read docs/a.md"},
		{"T2 a JSON object, escaped traversal", `{"name":"read_spec","arguments":{"o":{"spec":"{\"path\":\"..\\/etc/passwd\"}"}}}`, "forbidden pattern"},
		{"T2 a JSON object, a name given twice (pydantic reads the last)", `{"name":"read_spec","arguments":{"o":{"spec":"{\"path\":\"docs/a.md\",\"path\":\"..\\/etc/passwd\"}"}}}`, "given twice"},
		{"T2 a JSON object, NaN", `{"name":"read_spec","arguments":{"o":{"spec":"{\"path\":NaN}"}}}`, jsonContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, _ := httpPost(t, url, "ops", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+tc.args+`}`)
			if !strings.Contains(string(msg), tc.want) {
				t.Fatalf("%s: got %s, want it to hold %q", tc.args, msg, tc.want)
			}
			if strings.Contains(string(msg), "removed /x") || strings.Contains(string(msg), "read ../") {
				t.Fatalf("%s: the tool ran on what the policy refuses: %s", tc.args, msg)
			}
		})
	}
	// The SDK's server alone reads the T2 strings Warden refuses as
	// attacks: the escaped traversals, and the last of a name given twice.
	direct := "http://" + addr + "/mcp"
	_, dsid := httpPost(t, direct, "", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"types","version":"0"}}}`)
	httpPost(t, direct, "", dsid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, args := range []string{
		`{"name":"read_batch","arguments":{"b":{"paths":"[\"..\\u002fetc/passwd\"]"}}}`,
		`{"name":"read_spec","arguments":{"o":{"spec":"{\"path\":\"docs/a.md\",\"path\":\"..\\/etc/passwd\"}"}}}`,
	} {
		if msg, _ := httpPost(t, direct, "", dsid, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":`+args+`}`); !strings.Contains(string(msg), "read ../etc/passwd") {
			t.Errorf("%s: the server alone answered %s, want it to read ../etc/passwd", args, msg)
		}
	}
}
