package owners

import (
	"context"
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
			tb, err := New(size, s)
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
	tb, err := New(8, nil)
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
