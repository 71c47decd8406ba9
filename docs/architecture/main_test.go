package main

import (
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

// TestCommittedSVG: docs/architecture.svg is what draw writes (regenerate
// with go run ./docs/architecture > docs/architecture.svg) and is
// well-formed XML.
func TestCommittedSVG(t *testing.T) {
	got, err := os.ReadFile("../architecture.svg")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != draw() {
		t.Fatal("docs/architecture.svg is stale: go run ./docs/architecture > docs/architecture.svg")
	}
	d := xml.NewDecoder(strings.NewReader(string(got)))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed: %v", err)
		}
	}
}
