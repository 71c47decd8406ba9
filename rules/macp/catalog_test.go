package macp

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/agentwarden/warden/rules"
)

// TestCatalogDecoded: every type of the catalog is a type its mode decodes
// (an empty payload is malformed, never an unknown type).
func TestCatalogDecoded(t *testing.T) {
	for mode, types := range ModeTypes {
		s, _ := setup{mode: mode, initiator: "lead", participants: []string{"lead", "alice"}}.start()
		for _, ty := range types {
			out := Step(s, envelope(mode, ty, "m-"+ty, "lead", nil), "lead", t0+1)
			if out.Verdict.Reason == rules.ReasonUnknownMessageType {
				t.Errorf("%s %s: %v", mode, ty, out.Verdict)
			}
		}
		out := Step(s, envelope(mode, "NoSuchType", "m-x", "lead", nil), "lead", t0+1)
		if out.Verdict.Reason != rules.ReasonUnknownMessageType {
			t.Errorf("%s: an unknown type gives %v", mode, out.Verdict)
		}
	}
}

// TestFakeMatrixAgrees: the tests' fake of the authority matrices (written
// from the RFCs) says what policies/rego/matrix.json says: a sender's
// deciding roles are the entry's fine roles, else its coarse roles.
func TestFakeMatrixAgrees(t *testing.T) {
	b, err := os.ReadFile("../../policies/rego/matrix.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]json.RawMessage
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	m = map[string]map[string]json.RawMessage{}
	for mode, v := range raw {
		if mode == "_comment" {
			continue
		}
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(v, &entries); err != nil {
			t.Fatal(err)
		}
		m[mode] = entries
	}
	for mode, types := range matrices {
		for typ, want := range types {
			var e struct{ Coarse, Fine []string }
			if err := json.Unmarshal(m[mode][typ], &e); err != nil {
				t.Fatalf("matrix[%s][%s]: %v", mode, typ, err)
			}
			got := e.Fine
			if got == nil {
				got = e.Coarse
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("%s %s: matrix.json %v, the tests' fake %v", mode, typ, got, want)
			}
		}
	}
}
