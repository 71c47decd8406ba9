package mcp

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestListMemory: a large tasks/list answer (4 MB, one task in a hundred
// alice's, the last page) costs Warden about its size in allocations
// (issue 24 item 22: the objects read, and the owner look-up of every task),
// not the decoded maps' (the decoding path allocated 6.4x its size).
func TestListMemory(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tasks":[`)
	text := strings.Repeat("lorem ipsum ", 80)
	for i := 0; b.Len() < 4<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		id := "t-b"
		if i%100 == 0 {
			id = "t-a"
		}
		fmt.Fprintf(&b, `{"taskId":"%s","status":"working","statusMessage":"%s","createdAt":"2026-01-01T00:00:00Z","ttl":60000}`, id, text)
	}
	b.WriteString(`]}}`)
	data := b.Bytes()
	s := unitServer(t)
	taskCreated(s.enforcer, "t-a", alice, mcp.StatusWorking)
	taskCreated(s.enforcer, "t-b", bob, mcp.StatusWorking)
	x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, keep := x.fromUpstream(data)
	runtime.ReadMemStats(&after)
	if !keep || bytes.Contains(out, []byte(`"t-b"`)) || bytes.Contains(out, []byte(`"t-a"`)) {
		t.Fatalf("the page was not filtered: %.300s", out)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte tasks/list answer: %d bytes allocated (%.1fx), %d bytes out", len(data), alloc, float64(alloc)/float64(len(data)), len(out))
	if alloc > 3*uint64(len(data))/2 {
		t.Fatalf("a %d-byte answer allocated %d bytes (%.1fx)", len(data), alloc, float64(alloc)/float64(len(data)))
	}
}
