// Package docs holds Warden's documentation; its test checks that every
// relative link in the repository's Markdown resolves.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence   = regexp.MustCompile("(?s)```.*?```")
	heading = regexp.MustCompile(`(?m)^#+ (.*)$`)
	strip   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// anchors returns the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
		a := strings.ToLower(strings.TrimSpace(m[1]))
		out[strings.ReplaceAll(strip.ReplaceAllString(a, ""), " ", "-")] = true
	}
	return out
}

// TestLinks: every relative link in README.md, the top-level Markdown files
// and docs/ names a file that exists and, for a Markdown file, a heading it has.
func TestLinks(t *testing.T) {
	files, _ := filepath.Glob("../*.md")
	more, _ := filepath.Glob("*.md")
	files = append(files, more...)
	files = append(files, "../deploy/config/README.md", "../testdata/macp/SOURCE.md", "../test/conformance/README.md")
	if len(files) < 10 {
		t.Fatalf("only %d Markdown files found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			u := m[1]
			if strings.Contains(u, "://") || strings.HasPrefix(u, "mailto:") {
				continue
			}
			p, a, _ := strings.Cut(u, "#")
			target := f
			if p != "" {
				target = filepath.Join(filepath.Dir(f), p)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", f, u, err)
				continue
			}
			if a != "" && strings.HasSuffix(target, ".md") && !anchors(t, target)[a] {
				t.Errorf("%s: link %s: %s has no heading for #%s", f, u, target, a)
			}
		}
	}
}
