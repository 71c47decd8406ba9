// Package policies holds Warden's Rego policies, built from the MACP authority
// matrices and governance rules, and the engine that embeds and evaluates them.
//
// The query is prepared once per policy set and shared. Because a policy that
// calls no non-deterministic built-in is a pure function of the input fields
// it reads, the engine finds those fields by walking the compiled modules and
// memoizes decisions on exactly their values: a hit returns what a fresh
// evaluation would, at a fraction of its cost.
package policies

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

//go:embed rego
var embedded embed.FS

// Query is the MACP decision every MACP policy contributes to.
const Query = "data.warden.macp.deny"

// QueryMCP is the MCP tasks decision.
const QueryMCP = "data.warden.mcp.deny"

// QueryA2A is the A2A decision.
const QueryA2A = "data.warden.a2a.deny"

// queries maps Input.Protocol to its decision.
var queries = [...]struct{ protocol, query string }{{"macp", Query}, {"mcp", QueryMCP}, {"a2a", QueryA2A}}

// DefaultMemoSize is the number of memoized decisions kept by default.
const DefaultMemoSize = 8192

// Config selects the policies to load.
type Config struct {
	// Files are operator Rego modules compiled together with the defaults,
	// adding deny rules to package warden.macp, warden.mcp or warden.a2a (or helpers in
	// their sub-packages); a file in any other package is an error. Files
	// ending in _test.rego are tests, run by `warden check`; they may also be
	// in a package ending in _test.
	Files []string `yaml:"files" json:"files"`
	// MemoSize bounds the decision memo; 0 means DefaultMemoSize, a negative
	// value turns memoization off.
	MemoSize int `yaml:"memo_size" json:"memo_size"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	for _, f := range c.Files {
		if !strings.HasSuffix(f, ".rego") {
			return fmt.Errorf("policies.files: %q is not a .rego file", f)
		}
	}
	return nil
}

// Engine evaluates the prepared policy query. It is safe for concurrent use.
type Engine struct {
	query rego.PreparedEvalQuery // MACP
	mcp   rego.PreparedEvalQuery
	a2a   rego.PreparedEvalQuery
	reads [][]string
	// payload: a policy reads input.macp.payload, converted and bounded
	// only then.
	payload bool
	// memo maps a hash of the memo key to the key and its decision, so a
	// hit is a lookup and a comparison with no allocation; a key that
	// collides with another is a miss.
	memo   *lru.Cache[uint64, memoized]
	seed   maphash.Seed
	whyNot string // why decisions are not memoized, when they are not
}

// memoized is one memo entry: the key it was made for and the decision.
type memoized struct {
	key     string
	denials []rules.Verdict
}

// Module is one Rego source file.
type Module struct {
	Name   string
	Source string
}

// New compiles the embedded policies and cfg's files and prepares the query.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mods, _, err := load(cfg.Files) // test modules run only in Test
	if err != nil {
		return nil, err
	}
	return compile(ctx, mods, cfg.MemoSize)
}

// load reads the embedded modules and the operator files, split into policy
// modules and test modules.
func load(files []string) (mods, tests []Module, err error) {
	err = fs.WalkDir(embedded, "rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return err
		}
		b, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		m := Module{Name: "embedded/" + p, Source: string(b)}
		if strings.HasSuffix(p, "_test.rego") {
			tests = append(tests, m)
		} else {
			mods = append(mods, m)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read embedded policies: %w", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("read policy file: %w", err)
		}
		m := Module{Name: f, Source: string(b)}
		if _, err := operatorPackage(m, isTest(f)); err != nil {
			return nil, nil, err
		}
		if isTest(f) {
			tests = append(tests, m)
		} else {
			mods = append(mods, m)
		}
	}
	return mods, tests, nil
}

// matrixData returns the authority matrices as the data document.
func matrixData() (map[string]any, error) {
	b, err := embedded.ReadFile("rego/matrix.json")
	if err != nil {
		return nil, fmt.Errorf("read matrix: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode matrix: %w", err)
	}
	delete(m, "_comment")
	b, err = embedded.ReadFile("rego/mcp_matrix.json")
	if err != nil {
		return nil, fmt.Errorf("read MCP matrix: %w", err)
	}
	var mm map[string]any
	if err := json.Unmarshal(b, &mm); err != nil {
		return nil, fmt.Errorf("decode MCP matrix: %w", err)
	}
	delete(mm, "_comment")
	b, err = embedded.ReadFile("rego/a2a_matrix.json")
	if err != nil {
		return nil, fmt.Errorf("read A2A matrix: %w", err)
	}
	var am map[string]any
	if err := json.Unmarshal(b, &am); err != nil {
		return nil, fmt.Errorf("decode A2A matrix: %w", err)
	}
	delete(am, "_comment")
	ranks := make(map[string]any, len(macp.RankNames))
	for name, r := range macp.RankNames {
		ranks[name] = json.Number(strconv.Itoa(int(r)))
	}
	return map[string]any{"warden": map[string]any{"matrix": m, "mcp_matrix": mm, "a2a_matrix": am, "ranks": ranks}}, nil
}

func compile(ctx context.Context, mods []Module, memoSize int) (*Engine, error) {
	data, err := matrixData()
	if err != nil {
		return nil, err
	}
	parsed := make(map[string]*ast.Module, len(mods))
	for _, m := range mods {
		pm, err := ast.ParseModuleWithOpts(m.Name, m.Source, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("parse policy: %w", err)
		}
		parsed[m.Name] = pm
	}
	store := inmem.NewFromObject(data)
	var prepared [len(queries)]rego.PreparedEvalQuery
	for i, q := range queries {
		opts := []func(*rego.Rego){rego.Query(q.query), rego.Store(store)}
		for _, pm := range parsed {
			opts = append(opts, rego.ParsedModule(pm))
		}
		pq, err := rego.New(opts...).PrepareForEval(ctx)
		if err != nil {
			return nil, fmt.Errorf("compile policies: %w", err)
		}
		prepared[i] = pq
	}
	e := &Engine{query: prepared[0], mcp: prepared[1], a2a: prepared[2]}
	reads, whyNot := analyze(parsed)
	e.reads, e.whyNot = reads, whyNot
	for _, p := range reads {
		e.payload = e.payload || p[0] == "macp" && (len(p) == 1 || p[1] == "payload")
	}
	if memoSize == 0 {
		memoSize = DefaultMemoSize
	}
	if memoSize > 0 && whyNot == "" {
		e.memo, err = lru.New[uint64, memoized](memoSize)
		e.seed = maphash.MakeSeed()
		if err != nil {
			return nil, fmt.Errorf("create decision memo: %w", err)
		}
	} else if whyNot == "" {
		e.whyNot = "memoization disabled by configuration"
	}
	return e, nil
}

// analyze returns the input paths the modules read, and a reason why
// decisions cannot be memoized ("" when they can).
func analyze(mods map[string]*ast.Module) ([][]string, string) {
	var paths [][]string
	whyNot := ""
	for _, m := range mods {
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if !r[0].Equal(ast.InputRootDocument) {
				return false
			}
			var p []string
			for _, t := range r[1:] {
				s, ok := t.Value.(ast.String)
				if !ok {
					break
				}
				p = append(p, string(s))
			}
			paths = append(paths, p)
			return false
		})
		check := func(name string) {
			if b, ok := ast.BuiltinMap[name]; ok && b.IsNondeterministic() && whyNot == "" {
				whyNot = "policy calls non-deterministic built-in " + name
			}
		}
		ast.NewGenericVisitor(func(x any) bool {
			switch x := x.(type) {
			case *ast.Expr:
				if x.IsCall() {
					check(x.Operator().String())
				}
			case ast.Call:
				check(x[0].String())
			}
			return false
		}).Walk(m)
	}
	return normalizePaths(paths), whyNot
}

// Reads returns the input paths the policies read, the memo's key.
func (e *Engine) Reads() []string {
	out := make([]string, len(e.reads))
	for i, p := range e.reads {
		out[i] = "input." + strings.Join(p, ".")
	}
	return out
}

// Memoized reports whether decisions are memoized and, if not, why.
func (e *Engine) Memoized() (bool, string) { return e.memo != nil, e.whyNot }

// Evaluate returns the policy's denials for in, sorted by rank; none means
// allow. An error means the policy could not decide.
func (e *Engine) Evaluate(ctx context.Context, in *Input) ([]rules.Verdict, error) {
	if v := e.bound(in); !v.OK() {
		return []rules.Verdict{v}, nil
	}
	if e.memo == nil {
		return e.fresh(ctx, in)
	}
	buf := make([]byte, 0, 256)
	buf = appendStr(buf, in.Protocol)
	for _, p := range e.reads {
		buf = in.appendKey(buf, p)
	}
	h := maphash.Bytes(e.seed, buf)
	if m, ok := e.memo.Get(h); ok && m.key == string(buf) {
		return m.denials, nil
	}
	d, err := e.fresh(ctx, in)
	if err != nil {
		return nil, err
	}
	e.memo.Add(h, memoized{key: string(buf), denials: d})
	return d, nil
}

// bound refuses a MACP payload over MaxPayloadBytes when a policy reads it
// (the payload is nil when the rules did not read it: nothing to bound).
func (e *Engine) bound(in *Input) rules.Verdict {
	if !e.payload || !in.MACP.Present || !in.MACP.Payload.Read() || in.MACP.Size <= MaxPayloadBytes {
		return rules.Verdict{}
	}
	return rules.Verdict{Code: rules.CodePayloadTooLarge, Reason: rules.ReasonPayloadTooLarge, Rank: rules.RankOperator,
		Detail: fmt.Sprintf("payload of %d bytes exceeds the limit of %d an operator policy reads", in.MACP.Size, MaxPayloadBytes)}
}

// Fresh evaluates the query without the memo.
func (e *Engine) Fresh(ctx context.Context, in *Input) ([]rules.Verdict, error) {
	if v := e.bound(in); !v.OK() {
		return []rules.Verdict{v}, nil
	}
	return e.fresh(ctx, in)
}

func (e *Engine) fresh(ctx context.Context, in *Input) ([]rules.Verdict, error) {
	q, name := &e.query, Query
	switch in.Protocol {
	case "mcp":
		q, name = &e.mcp, QueryMCP
	case "a2a":
		q, name = &e.a2a, QueryA2A
	}
	rs, err := q.Eval(ctx, rego.EvalInput(in.value(e.payload)))
	if err != nil {
		return nil, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil // no deny rule defined: nothing denies
	}
	set, ok := rs[0].Expressions[0].Value.([]any)
	if !ok {
		return nil, fmt.Errorf("evaluate policy: %s is %T, want a set", name, rs[0].Expressions[0].Value)
	}
	out := make([]rules.Verdict, 0, len(set))
	for _, x := range set {
		out = append(out, toDenial(x))
	}
	slices.SortFunc(out, func(a, b rules.Verdict) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Code, b.Code), cmp.Compare(a.Detail, b.Detail))
	})
	return out, nil
}

// toDenial reads one deny entry as the verdict it is; missing fields
// default to an operator's FORBIDDEN, so a hand-written `deny contains "no"`
// still denies.
func toDenial(x any) rules.Verdict {
	d := rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonOperatorPolicy, Rank: rules.RankOperator}
	obj, ok := x.(map[string]any)
	if !ok {
		d.Detail = fmt.Sprint(x)
		return d
	}
	if s, ok := obj["code"].(string); ok && s != "" {
		d.Code = rules.Code(s)
	}
	if s, ok := obj["reason"].(string); ok && knownReason(rules.Reason(s)) {
		d.Reason = rules.Reason(s)
	}
	if n, ok := obj["rank"].(json.Number); ok {
		if r, err := n.Int64(); err == nil && r >= 0 && r <= int64(rules.RankOperator) {
			d.Rank = rules.Rank(r)
		}
	}
	if s, ok := obj["msg"].(string); ok {
		d.Detail = s
	}
	return d
}

// policyReasons are the reasons the embedded policies use; any other reason
// from an operator's policy becomes operator_policy.
func knownReason(r rules.Reason) bool {
	switch r {
	case rules.ReasonNotAuthorized, rules.ReasonGovernance, rules.ReasonOutcomeMismatch, rules.ReasonNotEligible,
		rules.ReasonNotOwner, rules.ReasonTaskState:
		return true
	}
	return false
}
