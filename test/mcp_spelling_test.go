package test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMCPAnswerSpelling: through bin/warden, an MCP server's answer that
// spells a name Warden reads otherwise, alone, in a protocol object (the
// task a task-creating tools/call made: "TaskId", the Kelvin sign's
// "tas\u212aId") is Warden's error and the server's raw id never reaches the
// client; the same lone spelling in a tool's structuredContent is the
// tool's data and passes as the tool wrote it. Fails before on the first
// two: the created task passed with its raw, unsealed id (a client matching
// names without case, Go's encoding/json, reads it as the task's id).
func TestMCPAnswerSpelling(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &req) != nil || len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch {
		case req.Method == "tools/list":
			result = `{"tools":[{"name":"upper","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},{"name":"kelvin","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},{"name":"data","inputSchema":{"type":"object"}}]}`
		case req.Method == "tools/call" && req.Params.Name == "upper":
			result = `{"task":{"TaskId":"raw-upper","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}`
		case req.Method == "tools/call" && req.Params.Name == "kelvin":
			result = "{\"task\":{\"tas\u212aId\":\"raw-kelvin\",\"status\":\"working\",\"createdAt\":\"2026-01-01T00:00:00Z\",\"lastUpdatedAt\":\"2026-01-01T00:00:00Z\",\"ttl\":60000}}"
		case req.Method == "tools/call":
			result = `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"TaskId":"raw-data"}}`
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
	}))
	defer up.Close()
	warden, _ := startMCPWarden(t, up.URL)
	hdr := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	for _, tc := range []struct {
		tool, task, raw string
		refused         bool
	}{
		{"upper", `,"task":{}`, "raw-upper", true},
		{"kelvin", `,"task":{}`, "raw-kelvin", true},
		{"data", ``, "raw-data", false},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			status, b := rawPost(t, warden, "alice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tc.tool+`","arguments":{}`+tc.task+`}}`, hdr)
			if status != http.StatusOK {
				t.Fatalf("HTTP %d: %s", status, b)
			}
			refused := rpcCode(t, b) != 0
			if refused != tc.refused || refused == strings.Contains(string(b), tc.raw) {
				t.Fatalf("refused %v, want %v: %s", refused, tc.refused, b)
			}
		})
	}
}
