package replay

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/rules"
)

// TestConformance replays the spec's conformance fixtures.
func TestConformance(t *testing.T) {
	runDir(t, "../../shared/reference/macp/conformance/*.json", 13)
}

// TestAttacks replays Warden's attack transcripts: each attack must be
// refused with its expected code, and the honest traffic around it accepted.
func TestAttacks(t *testing.T) {
	runDir(t, "../test/attacks/macp/*.json", 20)
}

func runDir(t *testing.T, glob string, min int) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(glob)
	if err != nil || len(files) < min {
		t.Fatalf("want at least %d transcripts in %s, found %d (%v)", min, glob, len(files), err)
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
