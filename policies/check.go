package policies

import (
	"context"
	"fmt"
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
