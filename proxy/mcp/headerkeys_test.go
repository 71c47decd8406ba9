package mcp

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHeaderKeysCanonical: the sidecar names every header it reads or
// writes by the key http.Header holds it under; another spelling is the same
// header, canonicalized into a new string on every request.
func TestHeaderKeysCanonical(t *testing.T) {
	call := regexp.MustCompile(`Header(\(\))?\.(Get|Values|Set|Del|Add)\("([^"]+)"`)
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if k := m[3]; http.CanonicalHeaderKey(k) != k {
				t.Errorf("%s: header %q, held as %q", f, k, http.CanonicalHeaderKey(k))
			}
		}
	}
}
