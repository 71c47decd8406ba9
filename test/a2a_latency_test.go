package test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// BenchmarkA2A measures GetTask of a working task and SendMessage of a
// one-shot echo task on the a2a-go v2.3.1 server's JSON-RPC binding, direct
// and through Warden's A2A sidecar, alone and with its task table on a
// redis-server (--state), in the same run. It reports the median and p99
// round trips besides the mean.
func BenchmarkA2A(b *testing.B) {
	base := startA2AGo(b)
	benchA2ARPC(b, "direct", base+"/jsonrpc")
	benchA2ARPC(b, "warden", startA2AWarden(b, base)+"/jsonrpc")
	benchA2ARPC(b, "warden+redis", startA2AWarden(b, base, "--state", startRedis(b).url())+"/jsonrpc")
}

func benchA2ARPC(b *testing.B, name, rpc string) {
	e := &a2aAttackEnv{url: rpc}
	working, a := e.send(b, aliceToken, "wait", nil, true) // works for 60 s
	if working.ID == "" {
		b.Fatalf("no working task: %s", a)
	}
	b.Run(name+"/GetTask", func(b *testing.B) {
		benchA2ALoop(b, rpc, func() any {
			return map[string]any{"id": working.ID}
		}, "GetTask", `"TASK_STATE_WORKING"`)
	})
	b.Run(name+"/SendMessage", func(b *testing.B) {
		benchA2ALoop(b, rpc, func() any {
			return map[string]any{"message": a2aMessage("hello", nil)}
		}, "SendMessage", `"TASK_STATE_COMPLETED"`)
	})
	e.call(b, aliceToken, "CancelTask", map[string]any{"id": working.ID})
}

// benchA2ALoop sends method with fresh params per iteration as alice and
// fails unless every answer holds want.
func benchA2ALoop(b *testing.B, rpc string, params func() any, method, want string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}
	var lat []time.Duration
	for b.Loop() {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params()})
		req, _ := http.NewRequest(http.MethodPost, rpc, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		status, out, d := timedDo(b, client, req)
		lat = append(lat, d)
		if status != http.StatusOK || !bytes.Contains(out, []byte(want)) {
			b.Fatalf("%s: HTTP %d %s", method, status, out)
		}
	}
	reportPercentiles(b, lat)
}
