package mcp

import (
	"testing"

	"github.com/agentwarden/warden/proxy/handle"
)

var testKey, _ = handle.SingleKey([]byte("0123456789abcdef0123456789abcdef"))

// TestHandlesStable pins the MCP domain's handles to the ones Warden gave
// before the sealing moved to proxy/handle: handles clients hold keep
// opening after an upgrade.
func TestHandlesStable(t *testing.T) {
	h, err := newHandles(testKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		got, want string
	}{
		{h.seal(kindTask, "alice", "task-1"), "wt2.xjsDIy_PG9j4Ehg1X93SkegMgC9nPbLJM2EUAxC4AugTgwDeAwwp2Y9PO9PaRw"},
		{h.sealIn(kindEvent, "alice", "s1", "ev-1"), "wt2.0uP6kFP7fAIqK73qfIEWmVkUZkDYY_0gqXZvb9OEzd7JRK0gsVNpm5Bcp-k"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("handle %q, want %q", tc.got, tc.want)
		}
	}
	if id, ok := h.open(kindTask, "alice", tests[0].want); !ok || id != "task-1" {
		t.Errorf("open = %q, %v", id, ok)
	}
}
