package a2a

import (
	"strings"
	"testing"
)

// TestListPagesFilled (security.md V1): in front of a server that lists
// every tenant's tasks, each principal walking ListTasks page by page, at
// every page size, gets its own tasks exactly once, in the server's order,
// at most pageSize a page, never an empty page with a nextPageToken (which
// stood for another's tasks), and a last page with no token. Before, a page
// was the server's with the others' tasks cut: alice's walk at pageSize 1
// read one empty page with a token for each of bob's tasks.
func TestListPagesFilled(t *testing.T) {
	// The server lists oldest first: a a b b b a b a a b.
	order := []string{"alice", "alice", "bob", "bob", "bob", "alice", "bob", "alice", "alice", "bob"}
	for _, tc := range []struct {
		size int
		max  int64 // a2a.max_response_bytes: the fill stops past it, nothing lost
	}{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {50, 0}, {50, 3000}, {3, 1500}, {50, -1}} {
		size := tc.size
		cfg := Config{}
		cfg.MaxResponseBytes = tc.max
		h := newHarness(t, cfg)
		own := map[string][]string{}
		for i, who := range order {
			own[who] = append(own[who], h.send(t, who, "task "+string(rune('a'+i)))["id"].(string))
		}
		for _, who := range []string{"alice", "bob"} {
			var seen []string
			params := map[string]any{"pageSize": size}
			for pages := 0; ; pages++ {
				if pages > len(order) {
					t.Fatalf("%s, pageSize %d: more pages than tasks", who, size)
				}
				_, m := h.call(t, who, "ListTasks", params)
				res := resultOf(t, m)
				tasks, _ := res["tasks"].([]any)
				if len(tasks) > size {
					t.Errorf("%s, pageSize %d: a page of %d tasks", who, size, len(tasks))
				}
				for _, task := range tasks {
					seen = append(seen, task.(map[string]any)["id"].(string))
				}
				tok, _ := res["nextPageToken"].(string)
				if tok == "" {
					break
				}
				if len(tasks) == 0 {
					t.Errorf("%s, pageSize %d: an empty page with a nextPageToken (page %d)", who, size, pages+1)
				}
				params = map[string]any{"pageSize": size, "pageToken": tok}
			}
			if strings.Join(seen, " ") != strings.Join(own[who], " ") {
				t.Errorf("%s, pageSize %d: walked %d tasks %v, want her %d %v", who, size, len(seen), seen, len(own[who]), own[who])
			}
		}
	}
}
