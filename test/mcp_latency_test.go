package test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// BenchmarkTasksGet measures one tasks/get of a running task on the fixture
// MCP server, direct and through Warden, in the same run; it reports the
// median and p99 round trips besides the mean.
func BenchmarkTasksGet(b *testing.B) {
	upstream := startFixtureMCP(b)
	warden, _ := startMCPWarden(b, upstream)
	for _, target := range []struct{ name, base string }{{"direct", upstream}, {"warden", warden}} {
		b.Run(target.name, func(b *testing.B) {
			c := mcpClient{b, target.base, "alice"}
			id := c.create(60, 10_000) // stays working for the run
			params := map[string]any{"taskId": id, "_meta": extMeta}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			var lat []time.Duration
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, target.base+"/mcp", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tasks/get")
				req.Header.Set("Mcp-Name", id)
				req.Header.Set("Authorization", "Bearer alice")
				status, out, d := timedDo(b, client, req)
				lat = append(lat, d)
				if status != 200 || !bytes.Contains(out, []byte(`"status":"working"`)) {
					b.Fatalf("tasks/get: HTTP %d %s", status, out)
				}
			}
			reportPercentiles(b, lat)
			c.call("tasks/cancel", map[string]any{"taskId": id}, nil)
		})
	}
}
