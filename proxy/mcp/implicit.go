package mcp

import (
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
	// created before it (plus skew) cannot be placed.
	horizon time.Time
}

// implicitCall is one recorded call.
type implicitCall struct {
	principal  string
	start, end time.Time // end is zero while the call is under way
	// plain is a plain call, a candidate owner; otherwise a task-augmented
	// call, which blocks its window unless resolved.
	plain    bool
	resolved bool // a task-augmented call whose task Warden learned
	claimed  bool // a plain call that was given a task
}

func newImplicitCalls() *implicitCalls {
	return &implicitCalls{max: 16384, keep: time.Hour, skew: time.Second, late: 5 * time.Minute}
}

// begin records a call of principal leaving at start; plain tells a plain
// call from a task-augmented one. The call must be ended with end.
func (c *implicitCalls) begin(principal string, start time.Time, plain bool) *implicitCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := 0
	for cut < len(c.calls) {
		k := c.calls[cut]
		ended := !k.end.IsZero() && start.Sub(k.end) > c.keep
		if len(c.calls)-cut < c.max && !ended {
			break
		}
		// Forgotten: what it covered can no longer be told.
		until := start
		if !k.end.IsZero() {
			until = c.until(k)
		}
		if until.After(c.horizon) {
			c.horizon = until
		}
		cut++
	}
	k := &implicitCall{principal: principal, start: start, plain: plain}
	c.calls = append(c.calls[cut:], k)
	return k
}

// end notes that Warden stopped waiting for the call at at; resolved tells
// that a task-augmented call's answer named the task it made.
func (c *implicitCalls) end(k *implicitCall, at time.Time, resolved bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k.end, k.resolved = at, resolved
}

// until is the end of an ended call's window, skew not included.
func (c *implicitCalls) until(k *implicitCall) time.Time {
	if k.plain || k.resolved {
		return k.end
	}
	return k.end.Add(c.late)
}

// owner returns the principal whose plain call was under way when a task
// was created, and claims that call; ok is false when none was, when calls
// of several principals were, when a task-augmented call whose task Warden
// never learned was, or when Warden forgot calls of that time.
func (c *implicitCalls) owner(created time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !created.After(c.horizon.Add(c.skew)) {
		return "", false
	}
	var found *implicitCall
	for _, k := range c.calls {
		if created.Before(k.start.Add(-c.skew)) || !k.end.IsZero() && created.After(c.until(k).Add(c.skew)) {
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
