package policies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is the outcome of one Rego unit test.
type TestResult struct {
	Name   string // package and rule, e.g. data.warden.macp.test_forged_complete
	Passed bool
	Detail string // why it failed
}

// Test compiles the embedded policies and cfg's files and runs every Rego
// unit test among them (rules named test_*), embedded ones included.
func Test(ctx context.Context, cfg Config) ([]TestResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mods, tests, err := load(cfg.Files)
	if err != nil {
		return nil, err
	}
	parsed := map[string]*ast.Module{}
	for _, m := range append(mods, tests...) {
		pm, err := ast.ParseModuleWithOpts(m.Name, m.Source, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("parse policy: %w", err)
		}
		parsed[m.Name] = pm
	}
	data, err := matrixData()
	if err != nil {
		return nil, err
	}
	ch, err := tester.NewRunner().
		SetStore(inmem.NewFromObject(data)).
		SetTimeout(30*time.Second).
		SetModules(parsed).
		RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("run policy tests: %w", err)
	}
	var out []TestResult
	for r := range ch {
		res := TestResult{Name: r.Package + "." + r.Name, Passed: r.Pass()}
		switch {
		case r.Error != nil:
			res.Detail = r.Error.Error()
		case r.Fail:
			res.Detail = "test rule evaluated to false or undefined"
		case r.Skip:
			res.Passed, res.Detail = true, "skipped"
		}
		out = append(out, res)
	}
	return out, nil
}

// Summary is a one-line account of test results.
func Summary(results []TestResult) string {
	passed := 0
	var failed []string
	for _, r := range results {
		if r.Passed {
			passed++
		} else {
			failed = append(failed, r.Name)
		}
	}
	s := fmt.Sprintf("%d Rego tests ok, %d failing", passed, len(failed))
	if len(failed) > 0 {
		s += ": " + strings.Join(failed, ", ")
	}
	return s
}

// The packages operator policies may extend. The decisions are
// data.warden.macp.deny, data.warden.mcp.deny and data.warden.a2a.deny, so a deny rule in any other
// package would never be consulted; such a file is refused, not ignored.
var operatorRoots = []string{"warden.macp", "warden.mcp", "warden.a2a"}

// FilePackage is the package one operator file declares.
type FilePackage struct {
	File    string
	Package string // e.g. warden.macp
	Test    bool   // a _test.rego file
	// Sub is set for a sub-package (warden.macp.limits): its rules count
	// only where warden.macp or warden.mcp refers to them.
	Sub bool
}

// Packages parses cfg's operator files and returns the package each one
// extends, or an error for a file outside warden.macp and warden.mcp (and
// their sub-packages; test files may also be in a package ending in _test).
func Packages(cfg Config) ([]FilePackage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var out []FilePackage
	for _, f := range cfg.Files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read policy file: %w", err)
		}
		fp, err := operatorPackage(Module{Name: f, Source: string(b)}, isTest(f))
		if err != nil {
			return nil, err
		}
		out = append(out, fp)
	}
	return out, nil
}

// isTest reports whether an operator file holds Rego unit tests.
func isTest(file string) bool { return strings.HasSuffix(filepath.Base(file), "_test.rego") }

// operatorPackage checks the package of one operator module.
func operatorPackage(m Module, test bool) (FilePackage, error) {
	pm, err := ast.ParseModuleWithOpts(m.Name, m.Source, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return FilePackage{}, fmt.Errorf("parse policy: %w", err)
	}
	// The package path is data.a.b.c; drop "data".
	pkg := strings.TrimPrefix(pm.Package.Path.String(), "data.")
	fp := FilePackage{File: m.Name, Package: pkg, Test: test}
	for _, root := range operatorRoots {
		if pkg == root {
			return fp, nil
		}
		if strings.HasPrefix(pkg, root+".") {
			fp.Sub = true
			return fp, nil
		}
	}
	if test && strings.HasSuffix(pkg, "_test") {
		return fp, nil
	}
	want := "package warden.macp, warden.mcp or warden.a2a (or a sub-package)"
	if test {
		want += ", or a package ending in _test"
	}
	return fp, fmt.Errorf("policy file %s: package %s is not consulted by any decision (data.warden.macp.deny, data.warden.mcp.deny, data.warden.a2a.deny): use %s", m.Name, pkg, want)
}
