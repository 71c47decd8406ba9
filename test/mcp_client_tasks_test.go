package test

import (
	"encoding/json"
	"slices"
	"testing"
)

// elicitTaskRun is what test/peers/mcp/task_elicit.mjs prints with FLOW=client.
type elicitTaskRun struct {
	Result struct {
		Types []string `json:"types"`
		Final struct {
			Action  string            `json:"action"`
			Content map[string]string `json:"content"`
			Error   string            `json:"error"`
		} `json:"final"`
	} `json:"result"`
	Error string `json:"error"`
	Fatal string `json:"fatal"`
}

// TestMCPClientSideTask: the MCP TypeScript SDK 1.32.2 server asks the SDK
// client for input with a task-augmented elicitation/create (the client runs
// the task: tasks.requests.elicitation.create, 2025-11-25); the server then
// polls the client's tasks/get and reads its tasks/result, and the client's
// answer names its task in related-task metadata. The same direct and
// through Warden. Before, Warden withheld the server's tasks/get (it named a
// task that is no server task of the caller's) and refused the client's
// tasks/result answer (its related task was no handle): the server's poll
// timed out. The other direction, a server task asking the client for input
// (ask_in_task: elicitation/create with the task's related-task metadata,
// delivered on the client's tasks/result), worked before and is checked
// alongside.
func TestMCPClientSideTask(t *testing.T) {
	upstream := startNodeMCP(t)
	warden, _ := startMCPWarden(t, upstream)
	for name, base := range map[string]string{"direct": upstream, "warden": warden} {
		t.Run(name+"/server task asks the client", func(t *testing.T) {
			var r struct {
				Types    []string `json:"types"`
				Elicited string   `json:"elicited"`
				Text     string   `json:"text"`
				Error    string   `json:"error"`
				Fatal    string   `json:"fatal"`
			}
			runNode(t, "task_elicit.mjs", &r, "MCP_URL="+base+"/mcp", "TOKEN=alice", "FLOW=server")
			if !slices.Equal(r.Types, []string{"taskCreated", "taskStatus", "result"}) || r.Elicited != "name?" || r.Text != "hello alice" {
				t.Errorf("got %+v, want the task created, polled, its elicitation answered and its result hello alice", r)
			}
		})
		t.Run(name+"/client task", func(t *testing.T) {
			var r elicitTaskRun
			runNode(t, "task_elicit.mjs", &r, "MCP_URL="+base+"/mcp", "TOKEN=alice", "FLOW=client")
			got, _ := json.Marshal(r)
			if r.Error != "" || r.Fatal != "" || r.Result.Final.Error != "" {
				t.Fatalf("the task-augmented elicitation failed: %s", got)
			}
			if !slices.Equal(r.Result.Types, []string{"taskCreated", "taskStatus", "result"}) ||
				r.Result.Final.Action != "accept" || r.Result.Final.Content["name"] != "alice" {
				t.Errorf("got %s, want the task created, its status polled and the client's answer (accept, name alice)", got)
			}
		})
	}
}
