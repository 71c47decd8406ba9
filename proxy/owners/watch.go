package owners

import (
	"log/slog"
	"sync"
	"time"
)

// The tables a principal's share bounds (Watch.Dropped's table), and where
// the entries were dropped (its store): this replica's memory, or the store
// replicas share.
const (
	TableOwners       = "owners"        // MCP and A2A tasks and contexts (Table)
	TableClientTasks  = "client_tasks"  // the MCP sidecar's client-side tasks
	TableTools        = "tools"         // the tools the MCP sidecar learned
	TableBindings     = "bindings"      // MACP sessions' policy bindings
	TableMACPSessions = "macp_sessions" // MACP sessions in the shared store
	StoreMemory       = "memory"
	StoreRedis        = "redis"
)

// ShareObserver is what an Observer may also implement to count the entries
// dropped because a principal went past its share of a table (label values
// table and store from the constants above; never the principal: a client
// could grow the series).
type ShareObserver interface {
	ShareDropped(table, store string, n int)
}

// WarnEvery is how often at most Watch logs that one principal went past
// its share of one table.
const WarnEvery = time.Minute

// warnedMax bounds the (table, principal) pairs Watch remembers having
// warned about: past it the least recently warned is forgotten (and may be
// warned about again within WarnEvery), so a flood of principals cannot
// grow it.
const warnedMax = 4096

// Watch is told of every entry a table drops because its principal went
// past its share (the entry is then "not found", its MACP session
// SESSION_NOT_FOUND): it counts them (ShareObserver) and logs a warning
// naming the principal and the table at most once per WarnEvery per
// principal and table, so an operator can find the agent. A nil *Watch
// does nothing. It is safe for concurrent use and starts no goroutine.
type Watch struct {
	obs    ShareObserver // nil: none
	log    *slog.Logger  // nil: none
	now    func() time.Time
	mu     sync.Mutex
	warned *Cache[[2]string, time.Time] // (table, principal): when last warned; no share
}

// NewWatch returns a Watch counting with obs (nil: none) and warning on log
// (nil: none); now is its clock (nil: time.Now).
func NewWatch(obs ShareObserver, log *slog.Logger, now func() time.Time) *Watch {
	if now == nil {
		now = time.Now
	}
	return &Watch{obs: obs, log: log, now: now, warned: NewCache[[2]string, time.Time](warnedMax, 0, nil, "")}
}

// Dropped tells w that principal, past its share of table, lost n (> 0) of
// its own least recently used entries from store.
func (w *Watch) Dropped(table, store, principal string, n int) {
	if w == nil || n <= 0 {
		return
	}
	if w.obs != nil {
		w.obs.ShareDropped(table, store, n)
	}
	if w.log == nil {
		return
	}
	now, k := w.now(), [2]string{table, principal}
	w.mu.Lock()
	last, ok := w.warned.Get(k)
	warn := !ok || now.Sub(last) >= WarnEvery
	if warn {
		w.warned.Add(principal, k, now)
	}
	w.mu.Unlock()
	if warn {
		w.log.Warn("principal over its share: its least recently used entries are dropped (then not found)",
			"principal", principal, "table", table, "store", store, "dropped", n,
			"again_after", WarnEvery.String())
	}
}
