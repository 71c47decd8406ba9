package test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestMCPPythonModelsReadUnscored: the official MCP Python SDK's models
// (2.3.0: pydantic, alias_generator=to_camel, populate_by_name) read a
// member under its Python name as under its wire name: params.meta as
// _meta, task_id as taskId. Each body here is what a Python server would
// act on that way, and Warden refuses it before it is forwarded (J1 in
// docs/security.md); the SDK reading the spelling is checked too, so that
// the rule's reason is the peer's behaviour, not a guess.
func TestMCPPythonModelsReadUnscored(t *testing.T) {
	py := peer(t, ".peers/mcp-venv/bin/python")
	for _, tc := range []struct {
		name, body, model, params, attr, want string
	}{
		{"meta as _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","meta":{"io.modelcontextprotocol/related-task":{"taskId":"raw"}}}}`,
			"CallToolRequestParams", `{"name":"x","meta":{"io.modelcontextprotocol/related-task":{"taskId":"raw"}}}`, `p.meta["io.modelcontextprotocol/related-task"]["taskId"]`, "raw"},
		{"task_id as taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"task_id":"raw"}}`,
			"GetTaskRequestParams", `{"task_id":"raw"}`, `p.task_id`, "raw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := mcp.Parse([]byte(tc.body)); err == nil {
				t.Fatalf("Warden reads %s as a valid request", tc.body)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			script := "import json,sys\nfrom mcp_types._types import " + tc.model + " as M\np = M.model_validate(json.loads(sys.argv[1]))\nprint(" + tc.attr + ")"
			out, err := exec.CommandContext(ctx, py, "-c", script, tc.params).CombinedOutput()
			if err != nil {
				t.Fatalf("python: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Fatalf("the Python SDK read %q, want %q: the spelling is not read as the member", got, tc.want)
			}
		})
	}
}
