package replay

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/rules"
)

// TestConformance replays the spec's conformance fixtures (Warden's
// corrected copies in test/conformance replacing the ones that disagree with
// the runtime).
func TestConformance(t *testing.T) {
	files, err := Conformance("../../shared/reference/macp/conformance", "../test/conformance")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f string) bool { return filepath.Dir(f) == "../test/conformance" }) {
		t.Fatal("no override was applied")
	}
	runFiles(t, files, 13)
}

// TestAttacks replays Warden's attack transcripts: each attack must be
// refused with its expected code, and the honest traffic around it accepted.
func TestAttacks(t *testing.T) {
	runDir(t, "../test/attacks/macp/*.json", 20)
}

func runDir(t *testing.T, glob string, min int) {
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	runFiles(t, files, min)
}

func runFiles(t *testing.T, files []string, min int) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil || len(files) < min {
		t.Fatalf("want at least %d transcripts, found %d (%v)", min, len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			res, err := Run(ctx, engine, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range res.Lines {
				t.Log(l.String(), l.Detail)
			}
			for _, f := range res.Failures {
				t.Error(f)
			}
		})
	}
}

// TestPayloadTypesCoverCatalog: replay encodes exactly the catalog's payload
// types.
func TestPayloadTypesCoverCatalog(t *testing.T) {
	want := rules.PayloadTypes()
	var got []string
	for k := range payloadTypes {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("replay payload types %v, catalog %v", got, want)
	}
}
