package replay

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentwarden/warden/policies"
)

func TestConformance(t *testing.T) {
	ctx := context.Background()
	engine, err := policies.New(ctx, policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../shared/reference/macp/conformance/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
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
