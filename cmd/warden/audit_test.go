package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditCommand: bad command lines exit 2 with a message naming the
// flag; a run writes the report to stdout or the three files into --out.
func TestAuditCommand(t *testing.T) {
	two := []string{"--principal", "alice=a", "--principal", "bob=b"}
	target := []string{"--direct", "http://127.0.0.1:1/mcp"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no protocol", append([]string{"audit"}, append(target, two...)...), 2, "--protocol"},
		{"unknown protocol", append([]string{"audit", "--protocol", "smtp"}, append(target, two...)...), 2, `"smtp"`},
		{"no endpoint", append([]string{"audit", "--protocol", "a2a"}, two...), 2, "nothing to audit"},
		{"one principal", []string{"audit", "--protocol", "a2a", "--direct", "http://127.0.0.1:1", "--principal", "alice=a"}, 2, "1 principal(s)"},
		{"bad principal", []string{"audit", "--protocol", "a2a", "--principal", "alice"}, 2, "want name=token"},
		{"bad URL", append([]string{"audit", "--protocol", "a2a", "--warden", "127.0.0.1:1"}, two...), 2, "want an http:// or https:// URL"},
		{"bad format", append([]string{"audit", "--protocol", "a2a", "--format", "pdf"}, append(target, two...)...), 2, `--format "pdf"`},
		{"no budget", append([]string{"audit", "--protocol", "a2a", "--max-requests", "0"}, append(target, two...)...), 2, "--max-requests 0"},
		{"warden principals alone", []string{"audit", "--protocol", "a2a", "--direct", "http://127.0.0.1:1", "--warden-principal", "a=1", "--warden-principal", "b=2"}, 2, "--direct: 0 principal(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d, stderr %q (stdout %q); want %d and %q", code, errOut, out, tc.code, tc.msg)
			}
		})
	}
	t.Run("usage", func(t *testing.T) {
		code, out, _ := runCmd(t, "audit", "-h")
		if code != 0 || !strings.Contains(out, "Safe by default") || !strings.Contains(out, "--max-requests") {
			t.Errorf("exit %d, usage %q", code, out)
		}
	})
	t.Run("out", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "report")
		code, _, errOut := runCmd(t, append([]string{"audit", "--protocol", "a2a", "--out", dir}, append(target, two...)...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, f := range []string{"audit.md", "audit.json", "audit.html"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || !strings.Contains(string(b), "http://127.0.0.1:1/mcp") {
				t.Errorf("%s: %v %q", f, err, b)
			}
		}
	})
	t.Run("stdout", func(t *testing.T) {
		code, out, errOut := runCmd(t, append([]string{"audit", "--protocol", "a2a", "--format", "json"}, append(target, two...)...)...)
		if code != 0 || !strings.Contains(out, `"protocol": "a2a"`) {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}
