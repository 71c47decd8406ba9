package mcp

import (
	"sync"
	"time"
)

// implicitCalls remembers the plain tools/call requests (no params.task) of
// tools whose taskSupport is optional: a server may run such a call as a
// task of its own (the TypeScript SDK does), and its answer does not name
// the task. The task shows up later, unknown to Warden, in tasks/list; it
// belongs to the principal whose plain call was under way when the server
// created it. A task is given to a principal only when exactly one
// principal had such a call under way at its createdAt (within skew, for
// clocks that differ); otherwise it stays unknown, so no caller sees it.
type implicitCalls struct {
	mu    sync.Mutex
	calls []implicitCall // oldest first, at most max
	max   int
	keep  time.Duration // how long a call can still claim its task
	skew  time.Duration
}

type implicitCall struct {
	principal  string
	start, end time.Time
	claimed    bool
}

func newImplicitCalls() *implicitCalls {
	return &implicitCalls{max: 4096, keep: time.Hour, skew: time.Second}
}

// add records a plain call of principal that ran from start to end.
func (c *implicitCalls) add(principal string, start, end time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := 0
	for cut < len(c.calls) && (len(c.calls)-cut >= c.max || end.Sub(c.calls[cut].end) > c.keep) {
		cut++
	}
	c.calls = append(c.calls[cut:], implicitCall{principal: principal, start: start, end: end})
}

// owner returns the principal whose plain call was under way when a task
// was created, and claims that call; ok is false when none was, or calls of
// several principals were.
func (c *implicitCalls) owner(created time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	found := -1
	for i := range c.calls {
		k := &c.calls[i]
		if k.claimed || created.Before(k.start.Add(-c.skew)) || created.After(k.end.Add(c.skew)) {
			continue
		}
		if found >= 0 && c.calls[found].principal != k.principal {
			return "", false
		}
		if found < 0 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	c.calls[found].claimed = true
	return c.calls[found].principal, true
}
