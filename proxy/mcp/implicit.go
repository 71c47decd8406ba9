package mcp

import (
	"sort"
	"sync"
	"time"
)

// implicitCalls remembers the tools/call requests that may have made a task
// Warden never saw named: a server may run a plain call (no params.task) of
// a tool whose taskSupport is optional as a task of its own (the TypeScript
// SDK does), and its answer does not name the task; and a task-augmented
// call whose answer Warden never read (the caller went away, a timeout, an
// answer over the limit) made a task nobody was told about. Such tasks show
// up later, unknown to Warden, in tasks/list.
//
// Every tools/call is recorded when it leaves for the upstream, whatever
// becomes of it, and its window ends when Warden stops waiting for it. A
// task is given to a principal only when the calls under way at its
// createdAt (within skew, for clocks that differ) are all plain calls of
// that principal; an unanswered task-augmented call under way then (its
// window stretched by late, as the server may still have been creating the
// task after Warden stopped waiting) makes the task nobody's, and so does
// any time Warden no longer remembers (calls forgotten to stay within max
// or keep). Tasks it cannot place stay unknown, so no caller sees them.
//
// It assumes what a sidecar gives: every call to the server passes through
// this Warden (no shared store, no other way in), and the server's clock,
// which writes createdAt, is within skew of Warden's.
type implicitCalls struct {
	mu    sync.Mutex
	calls []*implicitCall // in the order they started, at most max
	max   int
	keep  time.Duration // how long an ended call is remembered
	skew  time.Duration
	late  time.Duration
	// horizon is the latest time a forgotten call may have covered: a task
	// created before it (plus skew) cannot be placed. open counts the
	// forgotten calls still under way, whose windows have no end yet: while
	// there are any, no task is placed.
	horizon int64
	open    int
}

// implicitCall is one recorded call; times are Unix nanoseconds (wall
// clock, as createdAt), compared as integers.
type implicitCall struct {
	principal  string
	start, end int64 // end is 0 while the call is under way
	// plain is a plain call, a candidate owner; otherwise a task-augmented
	// call, which blocks its window unless resolved.
	plain     bool
	resolved  bool // a task-augmented call whose task Warden learned
	claimed   bool // a plain call that was given a task
	forgotten bool // dropped from calls while under way (implicitCalls.open)
}

func newImplicitCalls() *implicitCalls {
	return &implicitCalls{max: 16384, keep: time.Hour, skew: time.Second, late: 5 * time.Minute}
}

// begin records a call of principal leaving at start; plain tells a plain
// call from a task-augmented one. The call must be ended with end. Calls
// are kept in the order of their starts: a start before the last one's
// (another call began in between) is taken as that one's, still before the
// call leaves.
func (c *implicitCalls) begin(principal string, start time.Time, plain bool) *implicitCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := start.UnixNano()
	if n := len(c.calls); n > 0 && at < c.calls[n-1].start {
		at = c.calls[n-1].start
	}
	cut := 0
	for cut < len(c.calls) {
		k := c.calls[cut]
		ended := k.end != 0 && at-k.end > int64(c.keep)
		if len(c.calls)-cut < c.max && !ended {
			break
		}
		// Forgotten: what it covered can no longer be told.
		if k.end == 0 {
			k.forgotten = true
			c.open++
		} else {
			c.horizon = max(c.horizon, c.until(k))
		}
		cut++
	}
	k := &implicitCall{principal: principal, start: at, plain: plain}
	c.calls = append(c.calls[cut:], k)
	return k
}

// end notes that Warden stopped waiting for the call at at; resolved tells
// that a task-augmented call's answer named the task it made.
func (c *implicitCalls) end(k *implicitCall, at time.Time, resolved bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k.end, k.resolved = max(at.UnixNano(), k.start), resolved
	if k.forgotten {
		k.forgotten = false
		c.open--
		c.horizon = max(c.horizon, c.until(k))
	}
}

// until is the end of an ended call's window, skew not included.
func (c *implicitCalls) until(k *implicitCall) int64 {
	if k.plain || k.resolved {
		return k.end
	}
	return k.end + int64(c.late)
}

// owner returns the principal whose plain call was under way when a task
// was created, and claims that call; ok is false when none was, when calls
// of several principals were, when a task-augmented call whose task Warden
// never learned was, or when Warden forgot calls of that time.
func (c *implicitCalls) owner(createdAt time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	created, skew := createdAt.UnixNano(), int64(c.skew)
	if created <= c.horizon+skew || c.open > 0 {
		return "", false
	}
	var found *implicitCall
	// Calls that began after created (and skew) cannot have made the task.
	last := sort.Search(len(c.calls), func(i int) bool { return c.calls[i].start-skew > created })
	for _, k := range c.calls[:last] {
		if k.end != 0 && created > c.until(k)+skew {
			continue
		}
		switch {
		case !k.plain && k.resolved:
			continue // its task is known
		case !k.plain:
			return "", false // it may have made this task
		case found != nil && found.principal != k.principal:
			return "", false
		case k.claimed:
			continue
		case found == nil:
			found = k
		}
	}
	if found == nil {
		return "", false
	}
	found.claimed = true
	return found.principal, true
}
