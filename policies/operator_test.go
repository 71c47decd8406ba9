package policies

import (
	"context"
	"strings"
	"testing"
)

// TestOperatorPackage: an operator file outside warden.macp and warden.mcp
// (and their sub-packages; test files also in *_test packages) is refused by
// New, Test and Packages instead of being silently ignored.
func TestOperatorPackage(t *testing.T) {
	const deny = "\nimport rego.v1\ndeny contains \"everything\" if { true }\n"
	for _, tc := range []struct {
		name, file, src string
		pkg             string // "" when refused
		sub             bool
	}{
		{"macp", "a.rego", "package warden.macp" + deny, "warden.macp", false},
		{"mcp", "a.rego", "package warden.mcp" + deny, "warden.mcp", false},
		{"macp sub-package", "a.rego", "package warden.macp.limits" + deny, "warden.macp.limits", true},
		{"mcp sub-package", "a.rego", "package warden.mcp.steer" + deny, "warden.mcp.steer", true},
		{"foo", "a.rego", "package foo" + deny, "", false},
		{"warden", "a.rego", "package warden" + deny, "", false},
		{"prefix but not a sub-package", "a.rego", "package warden.macpx" + deny, "", false},
		{"data document", "a.rego", "package warden.matrix" + deny, "", false},
		{"_test package outside a test file", "a.rego", "package warden.macp_test" + deny, "", false},
		{"test file in a _test package", "a_test.rego", "package warden.extra_test\nimport rego.v1\ntest_x if true\n", "warden.extra_test", false},
		{"test file in warden.macp", "a_test.rego", "package warden.macp\nimport rego.v1\ntest_x if true\n", "warden.macp", false},
		{"test file elsewhere", "a_test.rego", "package foo\nimport rego.v1\ntest_x if true\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Files: []string{writeFile(t, tc.file, tc.src)}}
			fps, perr := Packages(cfg)
			_, nerr := New(context.Background(), cfg)
			_, terr := Test(context.Background(), cfg)
			if tc.pkg == "" {
				for _, err := range []error{perr, nerr, terr} {
					if err == nil || !strings.Contains(err.Error(), "is not consulted by any decision") {
						t.Errorf("err %v, want a refusal naming the package", err)
					}
				}
				return
			}
			for _, err := range []error{perr, nerr, terr} {
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(fps) != 1 || fps[0].Package != tc.pkg || fps[0].Sub != tc.sub || fps[0].Test != strings.HasSuffix(tc.file, "_test.rego") {
				t.Errorf("packages %+v, want %s (sub %v)", fps, tc.pkg, tc.sub)
			}
		})
	}
}
