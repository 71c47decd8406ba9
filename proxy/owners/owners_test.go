package owners

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/owners/ownerstest"
)

func task(id string) Key { return Key{Kind: MCPTask, ID: id} }

// TestLearn is the owner rule: an id becomes a principal's only from an
// answer to that principal's own request, and only while nobody owns it;
// an owner never changes; what this replica knew and forgot stays nobody's
// (unless recalled); statuses are recorded for known ids only; a store
// that cannot be written or read is an error, never a guess.
func TestLearn(t *testing.T) {
	type step struct {
		requester string // whose request the answer answers
		facts     []Fact
		want      string // owners after, comma separated; "error" for an error
	}
	tests := []struct {
		name   string
		size   int
		shared bool
		down   bool // the store fails from the last step on
		steps  []step
	}{
		{name: "created for the requester", steps: []step{
			{"alice", []Fact{{Key: task("a"), Created: true, Status: "working"}}, "alice"},
		}},
		{name: "an owner never changes", steps: []step{
			{"alice", []Fact{{Key: task("a"), Created: true}}, "alice"},
			{"bob", []Fact{{Key: task("a"), Created: true}}, "alice"},
		}},
		{name: "no requester creates nothing", steps: []step{
			{"", []Fact{{Key: task("a"), Created: true, Status: "working"}}, ""},
		}},
		{name: "a status names no owner", steps: []step{
			{"", []Fact{{Key: task("a"), Status: "working"}}, ""},
			{"bob", []Fact{{Key: task("a"), Created: true}}, "bob"},
		}},
		{name: "kinds are apart", steps: []step{
			{"alice", []Fact{{Key: Key{Kind: A2ATask, ID: "x"}, Created: true}}, "alice"},
			{"", []Fact{{Key: Key{Kind: A2AContext, ID: "x"}}, {Key: task("x")}}, ","},
		}},
		{name: "forgotten stays nobody's", size: 1, steps: []step{
			{"alice", []Fact{{Key: task("a"), Created: true}}, "alice"},
			{"carol", []Fact{{Key: task("b"), Created: true}}, "carol"}, // a evicted
			{"bob", []Fact{{Key: task("a"), Created: true}}, ""},
			{"alice", []Fact{{Key: task("a"), Created: true, Recall: true}}, "alice"},
		}},
		{name: "shared: another replica's owner stays", shared: true, steps: []step{
			{"alice", []Fact{{Key: task("a"), Created: true}}, "alice"},
			{"bob", []Fact{{Key: task("a"), Created: true}}, "alice"},
		}},
		{name: "shared: the store down on a new id", shared: true, down: true, steps: []step{
			{"alice", []Fact{{Key: task("a"), Created: true}}, "error"},
		}},
		{name: "shared: the store down on a status", shared: true, down: true, steps: []step{
			{"alice", []Fact{{Key: task("a"), Created: true, Status: "working"}}, "alice"},
			{"", []Fact{{Key: task("a"), Status: "completed"}}, "error"},
		}},
		{name: "shared: the store down on an unknown id", shared: true, down: true, steps: []step{
			{"", []Fact{{Key: task("a")}}, "error"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st *ownerstest.Store
			var s Store
			if tc.shared {
				st = ownerstest.New()
				s = st
			}
			size := tc.size
			if size == 0 {
				size = 8
			}
			tb, err := New(size, 0, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range tc.steps {
				if tc.down && i == len(tc.steps)-1 {
					st.Set(true)
				}
				got, err := tb.Learn(context.Background(), step.requester, step.facts...)
				out := strings.Join(got, ",")
				if err != nil {
					out = "error"
				}
				if out != step.want {
					t.Fatalf("step %d: owners %q (%v), want %q", i, out, err, step.want)
				}
			}
		})
	}
}

// TestClaimAndSteer: a proven handle claims an entry nobody owns and not
// another's; the steer count restarts at a new mark.
func TestClaimAndSteer(t *testing.T) {
	tb, err := New(8, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, ok, _ := tb.Claim(ctx, task("a"), "alice"); !ok {
		t.Fatal("alice's claim of a new entry")
	}
	if _, _, ok, _ := tb.Claim(ctx, task("a"), "bob"); ok {
		t.Fatal("bob claimed alice's entry")
	}
	for i, tc := range []struct {
		mark     string
		reserved bool
	}{{"t1", true}, {"t1", true}, {"t1", false}, {"t2", true}, {"", true}, {"", false}} {
		if ok, _, err := tb.Steer(ctx, task("a"), 2, tc.mark); err != nil || ok != tc.reserved {
			t.Fatalf("steer %d (mark %q): reserved %v %v, want %v", i, tc.mark, ok, err, tc.reserved)
		}
	}
}

// TestKeysShareByName: two keys name one entry exactly when their Names are
// equal (what the shared store holds them under), so this replica's table
// and the store agree; the table finds an entry without building its name.
func TestKeysShareByName(t *testing.T) {
	ctx := context.Background()
	keys := []Key{
		{Kind: MCPTask, ID: "x"}, {Kind: A2ATask, ID: "x"}, {Kind: A2AContext, ID: "x"},
		{Kind: MCPTask, ID: "a2a:t:x"}, {Kind: MCPTask, ID: "a2a:c:x"}, {Kind: Kind(9), ID: "x"},
		{Kind: A2ATask, ID: "a2a:t:x"}, {Kind: MCPTask, ID: "a2a:t:a2a:t:x"}, {Kind: MCPTask, ID: "a2a:x"},
		{Kind: MCPSession, ID: "x"}, {Kind: MCPTask, ID: "mcp:s:x"}, {Kind: MCPSession, ID: "a2a:t:x"}, {Kind: MCPTask, ID: "mcp:s:a2a:t:x"},
	}
	for _, a := range keys {
		tb, err := New(16, 0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Learn(ctx, "alice", Fact{Key: a, Created: true}); err != nil {
			t.Fatal(err)
		}
		for _, b := range keys {
			o, err := tb.Owners(ctx, "", b)
			if err != nil {
				t.Fatal(err)
			}
			if shared := o[0] == "alice"; shared != (a.Name() == b.Name()) {
				t.Errorf("%v and %v: one entry %v, names %q %q", a, b, shared, a.Name(), b.Name())
			}
		}
	}
	tb, _ := New(16, 0, nil, nil)
	k := Key{Kind: A2ATask, ID: "task-1"}
	_, _ = tb.Learn(ctx, "alice", Fact{Key: k, Created: true})
	if n := testing.AllocsPerRun(100, func() { _, _ = tb.Owners(ctx, "", k) }); n > 1 {
		t.Errorf("Owners of an A2A task allocates %v times, want the answer's slice only", n)
	}
}

// TestShare: a principal that fills the table loses its own least recently
// used entries, never another principal's, whether it creates them
// (Learn) or claims them with handles (Claim), with or without a shared
// store; with no share (the table's one LRU alone, the old table) its
// flood evicts everyone's.
func TestShare(t *testing.T) {
	const size, share = 16, 4
	for _, tc := range []struct {
		name   string
		share  int
		claim  bool // alice claims with handles instead of creating
		store  bool
		bobs   bool // bob's entries survive alice's flood
		alices int  // entries alice holds after it
	}{
		{name: "learn", share: share, bobs: true, alices: share},
		{name: "claim", share: share, claim: true, bobs: true, alices: share},
		{name: "learn, store", share: share, store: true, bobs: true, alices: share},
		{name: "claim, store", share: share, claim: true, store: true, bobs: true, alices: share},
		{name: "no share", share: 0, bobs: false, alices: size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Store
			if tc.store {
				s = ownerstest.New()
			}
			tb, err := New(size, tc.share, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			add := func(who, id string) {
				t.Helper()
				if tc.claim && who == "alice" {
					if _, _, ok, err := tb.Claim(ctx, task(id), who); !ok || err != nil {
						t.Fatalf("%s claims %s: %v %v", who, id, ok, err)
					}
					return
				}
				if o, err := tb.Learn(ctx, who, Fact{Key: task(id), Created: true}); err != nil || o[0] != who {
					t.Fatalf("%s creates %s: %v %v", who, id, o, err)
				}
			}
			add("bob", "b1")
			add("bob", "b2")
			for i := range 101 {
				if i == 100 {
					_, _ = tb.Owners(ctx, "alice", task("a96")) // alice uses a96, her oldest, again
				}
				add("alice", fmt.Sprintf("a%d", i))
			}
			for _, id := range []string{"b1", "b2"} {
				if o, _, _, ok := tb.Peek(task(id)); ok != tc.bobs || ok && o != "bob" {
					t.Errorf("bob's %s held %v (owner %q) after alice's 101, want %v", id, ok, o, tc.bobs)
				}
			}
			held := 0
			for i := range 101 {
				if o, _, _, ok := tb.Peek(task(fmt.Sprintf("a%d", i))); ok && o == "alice" {
					held++
				}
			}
			if held != tc.alices {
				t.Errorf("alice holds %d entries, want %d", held, tc.alices)
			}
			if tc.share == 0 {
				return
			}
			if n := tb.cache.count("alice"); n != share {
				t.Errorf("alice's share counts %d, want %d", n, share)
			}
			// Her own least recently used went first: a96, used again
			// when it was her oldest, outlives a97.
			for id, want := range map[string]bool{"a0": false, "a96": true, "a97": false, "a100": true} {
				if _, _, _, ok := tb.Peek(task(id)); ok != want {
					t.Errorf("alice's %s held %v, want %v", id, ok, want)
				}
			}
		})
	}
}

// BenchmarkShare is the cost of a principal's new entry in a table it
// fills: its own oldest evicted.
func BenchmarkShare(b *testing.B) {
	tb, _ := New(1024, 128, nil, nil)
	ctx := context.Background()
	ids := make([]Key, 4096)
	for i := range ids {
		ids[i] = task(fmt.Sprintf("t%d", i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = tb.Learn(ctx, "alice", Fact{Key: ids[i%len(ids)], Created: true, Recall: true})
	}
}

// BenchmarkOwners is a lookup the table answers itself, by the entry's
// owner (its use: the owner's order moves), in a full table of 16
// principals' entries.
func BenchmarkOwners(b *testing.B) {
	tb, _ := New(1024, 128, nil, nil)
	ctx := context.Background()
	keys, whose := make([]Key, 1024), make([]string, 1024)
	for i := range keys {
		keys[i], whose[i] = task(fmt.Sprint("t", i)), fmt.Sprint("p", i%16)
		if _, err := tb.Learn(ctx, whose[i], Fact{Key: keys[i], Created: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = tb.Owners(ctx, whose[i%len(keys)], keys[i%len(keys)])
	}
}

// TestUseIsTheOwners: only an entry's owner's use keeps it from being its
// owner's next to go. Bob, who knows alice's oldest id (a0), looks it up
// again and again; when alice passes her share it is still a0 she loses,
// not a1; her own lookup of a1 keeps a1. Before, any principal's lookup
// made the entry its owner's most recently used: bob kept a0 and alice lost
// a1, the entry she was using.
func TestUseIsTheOwners(t *testing.T) {
	tb, err := New(16, 4, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 4 {
		learn(t, tb, "alice", fmt.Sprint("a", i))
	}
	for range 3 {
		if o, err := tb.Owners(ctx, "bob", task("a0")); err != nil || o[0] != "alice" {
			t.Fatal(o, err)
		}
	}
	learn(t, tb, "alice", "a4")
	if o, err := tb.Owners(ctx, "alice", task("a1")); err != nil || o[0] != "alice" {
		t.Fatalf("alice's a1 after her a4: owner %q (%v), want alice: bob's reads of a0 cost her a1", o[0], err)
	}
	learn(t, tb, "alice", "a5")
	for id, want := range map[string]bool{"a0": false, "a1": true, "a2": false, "a3": true, "a4": true, "a5": true} {
		if _, _, _, ok := tb.Peek(task(id)); ok != want {
			t.Errorf("alice's %s held %v, want %v", id, ok, want)
		}
	}
}

// TestShareFullTable: a principal at its share adding to a full table
// loses its own least recently used entry only, whether it creates the
// entry or claims it. Before, the table made room first (its least
// recently used entry, bob's b0) and only then charged the new entry to
// alice, who lost her own a0 as well: bob lost an entry to alice's.
func TestShareFullTable(t *testing.T) {
	for _, claim := range []bool{false, true} {
		t.Run(fmt.Sprint("claim ", claim), func(t *testing.T) {
			tb, err := New(8, 4, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				learn(t, tb, "bob", fmt.Sprint("b", i))
			}
			for i := range 5 {
				id := fmt.Sprint("a", i)
				if !claim {
					learn(t, tb, "alice", id)
				} else if _, _, ok, err := tb.Claim(context.Background(), task(id), "alice"); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			for id, want := range map[string]string{"b0": "bob", "b3": "bob", "a0": "", "a1": "alice", "a4": "alice"} {
				if o, _, _, _ := tb.Peek(task(id)); o != want {
					t.Errorf("%s owned by %q, want %q", id, o, want)
				}
			}
			if n := tb.cache.Len(); n != 8 {
				t.Errorf("%d entries, want the table's 8", n)
			}
		})
	}
}
