package policies

import (
	"context"
	"testing"
)

// TestRego runs the Rego unit tests shipped with the policies.
func TestRego(t *testing.T) {
	results, err := Test(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < 20 {
		t.Fatalf("found %d Rego tests, want at least 20", len(results))
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
	}
}
