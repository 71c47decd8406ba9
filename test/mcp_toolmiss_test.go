package test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMCPToolMiss runs the MCP TypeScript SDK task server behind the
// sidecar (security.md X2). Calls naming tools the server does not list,
// each a new made-up name, cost one tools/list read between them, not one
// each (before: one each, Warden re-read the whole list for every miss).
// A tool the server registers later in the session (add_late; the SDK
// sends notifications/tools/list_changed on the session's GET stream) is
// refused before and runs once the client has seen the notification, with
// no wait.
func TestMCPToolMiss(t *testing.T) {
	upstream := startNodeMCP(t)
	warden, _ := startMCPWarden(t, upstream)
	sid := sdkSession(t, warden, "alice")
	hdr := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	call := func(tool string) int {
		status, b := rawPost(t, warden, "alice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`, hdr)
		if status != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", tool, status, b)
		}
		return rpcCode(t, b)
	}
	lists := func() int {
		var inv map[string]int
		getJSON(t, upstream+"/debug/invocations", &inv)
		return inv["tools_list"]
	}

	// the session's standalone stream, where list_changed arrives
	resp := rawRequest(t, http.MethodGet, warden, "alice", "", hdr)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				events <- d
			}
		}
	}()

	const n = 10
	before := lists()
	for i := range n {
		if code := call(fmt.Sprintf("ghost-%d", i)); code != -32602 {
			t.Fatalf("made-up tool: code %d, want -32602", code)
		}
	}
	if got := lists() - before; got != 1 {
		t.Errorf("%d calls naming made-up tools: the server read %d tools/list, want 1", n, got)
	}

	if code := call("late"); code != -32602 {
		t.Fatalf("late before it is added: code %d, want -32602", code)
	}
	if code := call("add_late"); code != 0 {
		t.Fatalf("add_late: code %d", code)
	}
	timeout := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case d, ok := <-events:
			if !ok {
				t.Fatal("GET stream ended before notifications/tools/list_changed")
			}
			seen = strings.Contains(d, "notifications/tools/list_changed")
		case <-timeout:
			t.Fatal("no notifications/tools/list_changed on the GET stream")
		}
	}
	if code := call("late"); code != 0 {
		t.Errorf("late after list_changed: code %d, want it run", code)
	}
}
