package policies

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

// TestMatrixCoversCatalog: the authority matrix names exactly the modes and
// message types of rules' catalog, so a type added on one side only fails
// here instead of falling to the default entry.
func TestMatrixCoversCatalog(t *testing.T) {
	b, err := embedded.ReadFile("rego/matrix.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	types := func(mode string) []string {
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(m[mode], &entries); err != nil {
			t.Fatalf("matrix[%q]: %v", mode, err)
		}
		var out []string
		for k := range entries {
			if k != "_comment" {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	var modes []string
	for k := range m {
		if k != "_comment" && k != "*" && k != "" {
			modes = append(modes, k)
		}
	}
	slices.Sort(modes)
	if want := slices.Sorted(maps.Keys(macp.ModeTypes)); !slices.Equal(modes, want) {
		t.Errorf("matrix modes %v, catalog %v", modes, want)
	}
	for mode, want := range macp.ModeTypes {
		got := slices.DeleteFunc(types(mode), func(s string) bool { return s == macp.TypeCommitment }) // a mode may override the shared Commitment entry
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Errorf("matrix[%s] types %v, catalog %v", mode, got, w)
		}
	}
	shared := types("*")
	for _, ty := range append(slices.Clone(macp.CoreTypes), macp.OpCancel, macp.OpSuspend, macp.OpResume) {
		if !slices.Contains(shared, ty) {
			t.Errorf("matrix[*] lacks %s", ty)
		}
	}
	if got := types(""); !slices.Equal(got, []string{macp.TypeProgress, macp.TypeSignal}) {
		t.Errorf("ambient entries %v", got)
	}
}

// TestRanksFromGo: the policies read their ranks from data filled from
// macp.RankNames; a denial's rank is the Go constant.
func TestRanksFromGo(t *testing.T) {
	d, err := matrixData()
	if err != nil {
		t.Fatal(err)
	}
	ranks := d["warden"].(map[string]any)["ranks"].(map[string]any)
	for name, r := range macp.RankNames {
		if got := ranks[name]; got != json.Number(string(rune('0'+int(r)))) {
			t.Errorf("ranks[%s] = %v, want %d", name, got, r)
		}
	}
	e, err := New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	in := &Input{Protocol: "macp", Message: Message{Mode: macp.ModeTask, Type: "TaskUpdate"}, Roles: []string{macp.RoleParticipant}}
	denials, err := e.Evaluate(t.Context(), in)
	if err != nil || len(denials) == 0 {
		t.Fatalf("a participant's TaskUpdate: %v %v", denials, err)
	}
	if denials[0].Rank != rules.RankFineAuthority {
		t.Errorf("fine authority denial has rank %d, want %d", denials[0].Rank, rules.RankFineAuthority)
	}
}
