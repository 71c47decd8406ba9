package owners

import (
	"fmt"
	"strings"
	"testing"
)

// TestCache: a principal adding past its share loses its own least
// recently used entry; only a full table drops the table's oldest; no
// share is a plain LRU (the "no share" row is the tables the MCP sidecar
// had: bob's flood evicted alice's entry).
func TestCache(t *testing.T) {
	owner := func(k string) string { o, _, _ := strings.Cut(k, "/"); return o }
	for _, c := range []struct {
		name        string
		size, share int
		setup       func(c *Cache[string, int])
		held        []string
		gone        []string
	}{
		{"bob's flood keeps alice's entry", 16, 4, func(c *Cache[string, int]) {
			c.Add(owner("alice/1"), "alice/1", 1)
			for i := range 100 {
				c.Add("bob", fmt.Sprintf("bob/%d", i), i)
			}
		}, []string{"alice/1", "bob/99", "bob/96"}, []string{"bob/95", "bob/0"}},
		{"no share: bob's flood evicts alice's entry", 16, 0, func(c *Cache[string, int]) {
			c.Add(owner("alice/1"), "alice/1", 1)
			for i := range 100 {
				c.Add("bob", fmt.Sprintf("bob/%d", i), i)
			}
		}, []string{"bob/99", "bob/84"}, []string{"alice/1", "bob/83"}},
		{"a used entry is the owner's newest", 16, 2, func(c *Cache[string, int]) {
			c.Add(owner("bob/a"), "bob/a", 1)
			c.Add(owner("bob/b"), "bob/b", 2)
			c.Get("bob/a")
			c.Add(owner("bob/c"), "bob/c", 3)
		}, []string{"bob/a", "bob/c"}, []string{"bob/b"}},
		{"a full table drops its oldest", 4, 2, func(c *Cache[string, int]) {
			for _, k := range []string{"a/1", "b/1", "c/1", "d/1", "e/1"} {
				c.Add(owner(k), k, 0)
			}
		}, []string{"b/1", "e/1"}, []string{"a/1"}},
		{"added again is updated, not counted twice", 4, 2, func(c *Cache[string, int]) {
			c.Add(owner("bob/a"), "bob/a", 1)
			c.Add(owner("bob/a"), "bob/a", 2)
			c.Add(owner("bob/b"), "bob/b", 3)
		}, []string{"bob/a", "bob/b"}, nil},
		{"removed", 4, 2, func(c *Cache[string, int]) {
			c.Add(owner("bob/a"), "bob/a", 1)
			c.Add(owner("bob/b"), "bob/b", 1)
			c.Add(owner("alice/a"), "alice/a", 1)
			c.Remove("bob/a")
			c.RemoveIf(func(k string) bool { return owner(k) == "alice" })
			c.Add(owner("bob/c"), "bob/c", 1)
		}, []string{"bob/b", "bob/c"}, []string{"bob/a", "alice/a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache := NewCache[string, int](c.size, c.share, nil, TableTools)
			c.setup(cache)
			for _, k := range c.held {
				if !cache.Contains(k) {
					t.Errorf("%s is gone, want held", k)
				}
			}
			for _, k := range c.gone {
				if cache.Contains(k) {
					t.Errorf("%s is held, want gone", k)
				}
			}
			if n := cache.Len(); n > c.size {
				t.Errorf("%d entries, over the size %d", n, c.size)
			}
		})
	}
	c := NewCache[string, int](4, 2, nil, TableTools)
	c.Add(owner("bob/a"), "bob/a", 7)
	if v, ok := c.Get("bob/a"); !ok || v != 7 {
		t.Errorf("Get = %d, %v; want 7, true", v, ok)
	}
	var keys []string
	c.Add(owner("bob/b"), "bob/b", 8)
	c.Each(func(k string, _ int) { keys = append(keys, k) })
	if strings.Join(keys, ",") != "bob/b,bob/a" {
		t.Errorf("Each = %v, want most recent first", keys)
	}
}

// BenchmarkCache is the cost of a principal's new entry in a cache it
// fills (its own least recently used dropped) and of a lookup.
func BenchmarkCache(b *testing.B) {
	c := NewCache[int, int](1024, 128, nil, TableTools)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Add("alice", i, i)
		_, _ = c.Get(i - 64)
	}
}
