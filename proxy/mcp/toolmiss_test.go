package mcp

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestToolMissRemembered: a tools/call naming a tool the server does not
// list is refused from Warden's last whole read of the session's
// tools/list, not by reading the whole list again for each call
// (security.md X2): N calls naming N made-up tools, one after another and
// then at once, cost one whole read (two pages), not 2N.
func TestToolMissRemembered(t *testing.T) {
	const n = 20
	call := func(h *harness, tool string) reply {
		return h.post(t, alice, rpc("x", "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "task": map[string]any{}}), nil)
	}
	t.Run("one after another", func(t *testing.T) {
		h := newHarness(t, Config{})
		for i := range n {
			if r := call(h, fmt.Sprintf("ghost-%d", i)); r.status != http.StatusOK || r.errCode(t) != mcp.ErrInvalidParams {
				t.Fatalf("made-up tool: HTTP %d %s", r.status, r.body)
			}
		}
		if got := len(h.up.received("tools/list")); got != 2 {
			t.Fatalf("%d calls naming made-up tools read %d tools/list pages, want 2 (one whole read)", n, got)
		}
		// a listed tool not learned yet is still learned (here: remembered)
		if r := call(h, "slow"); r.errCode(t) != 0 {
			t.Fatalf("listed tool refused: %s", r.body)
		}
	})
	t.Run("at once", func(t *testing.T) {
		h := newHarness(t, Config{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if r := call(h, fmt.Sprintf("ghost-%d", i)); r.status != http.StatusOK || r.errCode(t) != mcp.ErrInvalidParams {
					t.Errorf("made-up tool: HTTP %d %s", r.status, r.body)
				}
			})
		}
		wg.Wait()
		if got := len(h.up.received("tools/list")); got != 2 {
			t.Fatalf("%d concurrent calls naming made-up tools read %d tools/list pages, want 2 (one whole read)", n, got)
		}
	})
}

// TestToolAddedLater: a tool the server adds after Warden read its list
// whole (and refused a call naming it) becomes callable once the server
// says its list changed, once the client lists it, or once the
// remembered read is older than listedFor; a read that another principal's
// or session's entries spoil is not trusted.
func TestToolAddedLater(t *testing.T) {
	late := map[string]any{"name": "late", "execution": map[string]any{"taskSupport": "optional"}}
	tests := []struct {
		name string
		then func(t *testing.T, h *harness, skew *atomic.Int64)
	}{
		{"list_changed", func(t *testing.T, h *harness, _ *atomic.Int64) {
			x := &exchange{s: h.srv, principal: alice, sid: ""}
			if _, keep := x.fromUpstream([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)); !keep {
				t.Fatal("list_changed dropped")
			}
		}},
		{"the client's tools/list", func(t *testing.T, h *harness, _ *atomic.Int64) {
			h.post(t, alice, rpc(1, "tools/list", map[string]any{}), nil)
		}},
		{"listedFor", func(t *testing.T, h *harness, skew *atomic.Int64) { skew.Add(int64(listedFor)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			var skew atomic.Int64 // the clock moved on by hand
			h.srv.lists.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			call := func() reply {
				return h.post(t, alice, rpc("x", "tools/call", map[string]any{"name": "late", "arguments": map[string]any{}, "task": map[string]any{}}), nil)
			}
			h.up.configure(func(u *fakeUpstream) {
				u.toolsFor = map[string][]map[string]any{"Bearer alice": {{"name": "fast"}}}
			})
			if r := call(); r.errCode(t) != mcp.ErrInvalidParams {
				t.Fatalf("before: %s", r.body)
			}
			h.up.configure(func(u *fakeUpstream) {
				u.toolsFor = map[string][]map[string]any{"Bearer alice": {{"name": "fast"}, late}}
			})
			if r := call(); r.errCode(t) != mcp.ErrInvalidParams {
				t.Fatalf("within listedFor, without news: %s", r.body)
			}
			skew.Add(int64(listedFor / 2))
			tc.then(t, h, &skew)
			if r := call(); r.errCode(t) != 0 {
				t.Fatalf("after %s: %s", tc.name, r.body)
			}
		})
	}
}

// TestToolListSpoiled: a whole read whose learned tools the table has
// since dropped (evicted: a principal past its share, the table full)
// answers no miss: the tool dropped is read again, never refused.
func TestToolListSpoiled(t *testing.T) {
	s := unitServer(t)
	s.tools, s.lists = newToolTables(2, nil, s.lists.now)
	g := s.lists.begin()
	s.tools.Add(alice, toolKey{alice, "s1", "a"}, tool{})
	s.tools.Add(alice, toolKey{alice, "s1", "b"}, tool{})
	s.lists.mark(alice, "s1", g)
	if !s.lists.whole(alice, "s1") {
		t.Fatal("a whole read not remembered")
	}
	s.tools.Add(bob, toolKey{bob, "s1", "c"}, tool{}) // the table full: alice's "a" goes
	if s.tools.Contains(toolKey{alice, "s1", "a"}) {
		t.Fatal("nothing evicted")
	}
	if s.lists.whole(alice, "s1") {
		t.Fatal("a read whose tool was evicted answers misses")
	}
	// an eviction during a read: the read is not remembered
	g = s.lists.begin()
	s.tools.Add(bob, toolKey{bob, "s1", "d"}, tool{})
	s.lists.mark(alice, "s2", g)
	if s.lists.whole(alice, "s2") {
		t.Fatal("a read spoiled while read answers misses")
	}
}
