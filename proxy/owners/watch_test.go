package owners

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/redistest"
)

// counted is a ShareObserver and a log handler: what a Watch counted, by
// table and store, and the warnings it logged.
type counted struct {
	mu    sync.Mutex
	drops map[[2]string]int
	warns []string // "principal table"
}

func (c *counted) ShareDropped(table, store string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drops[[2]string{table, store}] += n
}

func (c *counted) Enabled(context.Context, slog.Level) bool { return true }
func (c *counted) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn {
		return nil
	}
	var who, table string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "principal":
			who = a.Value.String()
		case "table":
			table = a.Value.String()
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warns = append(c.warns, who+" "+table)
	return nil
}
func (c *counted) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *counted) WithGroup(string) slog.Handler      { return c }

func newCounted() (*counted, *Watch) {
	c := &counted{drops: map[[2]string]int{}}
	return c, NewWatch(c, slog.New(c), nil)
}

// TestShareDrops: a principal flooding a table past its share (4 of it)
// with 10 entries loses 6 of its own, and each table counts them under its
// name and store (in Redis too: b's table held 6, Redis 10), and warns
// once naming the principal and the table; bob,
// within his share, is neither counted nor named. Before, the drops were
// silent: every count stayed 0 and nothing was logged.
func TestShareDrops(t *testing.T) {
	const share, flood = 4, 10
	ctx := context.Background()
	cache := func(table string) func(*testing.T, *Watch) {
		return func(t *testing.T, w *Watch) {
			c := NewCache[string, int](64, share, w, table)
			c.Add("bob", "b", 0)
			for i := range flood {
				c.Add("alice", fmt.Sprint("a", i), i)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		redis bool
		fill  func(*testing.T, *Watch)
		want  map[[2]string]int
	}{
		{name: "owners, created", fill: func(t *testing.T, w *Watch) {
			tb, _ := New(64, share, nil, w)
			learn(t, tb, "bob", "b")
			for i := range flood {
				learn(t, tb, "alice", fmt.Sprint("a", i))
			}
		}, want: map[[2]string]int{{TableOwners, StoreMemory}: flood - share}},
		{name: "owners, claimed", fill: func(t *testing.T, w *Watch) {
			tb, _ := New(64, share, nil, w)
			for i := range flood {
				if _, _, ok, err := tb.Claim(ctx, task(fmt.Sprint("a", i)), "alice"); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
		}, want: map[[2]string]int{{TableOwners, StoreMemory}: flood - share}},
		{name: "owners in redis, created", redis: true, fill: func(t *testing.T, w *Watch) {
			_, a, _ := replicasWatched(t, "drops:create:", 64, share, w)
			for i := range flood {
				learn(t, a, "alice", fmt.Sprint("a", i))
			}
		}, want: map[[2]string]int{{TableOwners, StoreMemory}: flood - share, {TableOwners, StoreRedis}: flood - share}},
		{name: "owners in redis, claimed on another replica", redis: true, fill: func(t *testing.T, w *Watch) {
			_, a, b := replicasWatched(t, "drops:claim:", 64, share, w)
			for i := range share {
				learn(t, a, "alice", fmt.Sprint("a", i))
			}
			for i := share; i < flood; i++ { // handles proven at b: Claim's trim
				if _, _, ok, err := b.Claim(ctx, task(fmt.Sprint("a", i)), "alice"); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
		}, want: map[[2]string]int{{TableOwners, StoreMemory}: flood - 2*share, {TableOwners, StoreRedis}: flood - share}},
		{name: "client tasks", fill: cache(TableClientTasks), want: map[[2]string]int{{TableClientTasks, StoreMemory}: flood - share}},
		{name: "tools", fill: cache(TableTools), want: map[[2]string]int{{TableTools, StoreMemory}: flood - share}},
		{name: "bindings", fill: cache(TableBindings), want: map[[2]string]int{{TableBindings, StoreMemory}: flood - share}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := newCounted()
			tc.fill(t, w)
			if fmt.Sprint(c.drops) != fmt.Sprint(tc.want) {
				t.Errorf("counted %v, want %v", c.drops, tc.want)
			}
			table := ""
			for k := range tc.want {
				table = k[0]
			}
			if len(c.warns) != 1 || c.warns[0] != "alice "+table {
				t.Errorf("warned %q, want alice %s once", c.warns, table)
			}
		})
	}
}

// learn records that the upstream created id for who.
func learn(t *testing.T, tb *Table, who, id string) {
	t.Helper()
	if _, err := tb.Learn(context.Background(), who, Fact{Key: task(id), Created: true}); err != nil {
		t.Fatal(err)
	}
}

// TestWatchWarnsOnce: however many entries a principal loses, one warning
// per principal and table per WarnEvery; a pair forgotten (more principals
// than warnedMax) may be warned about again, and the memory stays bounded.
func TestWatchWarnsOnce(t *testing.T) {
	c := &counted{drops: map[[2]string]int{}}
	now := time.Unix(0, 0)
	w := NewWatch(c, slog.New(c), func() time.Time { return now })
	for range 100 {
		w.Dropped(TableOwners, StoreMemory, "alice", 1)
		w.Dropped(TableTools, StoreMemory, "alice", 1)
		w.Dropped(TableOwners, StoreMemory, "bob", 1)
	}
	now = now.Add(WarnEvery - time.Second)
	w.Dropped(TableOwners, StoreMemory, "alice", 1)
	if fmt.Sprint(c.warns) != "[alice owners alice tools bob owners]" {
		t.Errorf("warned %q within WarnEvery", c.warns)
	}
	now = now.Add(time.Second)
	w.Dropped(TableOwners, StoreMemory, "alice", 1)
	if len(c.warns) != 4 || c.warns[3] != "alice owners" {
		t.Errorf("warned %q after WarnEvery, want alice owners again", c.warns)
	}
	if got := c.drops[[2]string{TableOwners, StoreMemory}]; got != 202 {
		t.Errorf("counted %d drops, want every one (202)", got)
	}
	for i := range 2 * warnedMax {
		w.Dropped(TableOwners, StoreMemory, fmt.Sprint("p", i), 1)
	}
	if n := w.warned.Len(); n > warnedMax {
		t.Errorf("remembers %d principals, want at most %d", n, warnedMax)
	}
	var none *Watch
	none.Dropped(TableOwners, StoreMemory, "alice", 1) // no watch: nothing, no panic
}

func replicasWatched(t *testing.T, prefix string, size, share int, w *Watch) (store any, a, b *Table) {
	t.Helper()
	addr, _, _ := redistest.Start(t)
	return replicas(t, addr, prefix, size, share, w)
}
