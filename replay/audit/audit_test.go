package audit

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		limit, takes, ok int
	}{
		{0, 3, 0},
		{1, 3, 1},
		{5, 5, 5},
		{5, 9, 5},
	} {
		b := NewBudget(tc.limit)
		ok := 0
		for range tc.takes {
			err := b.Take()
			if err == nil {
				ok++
			} else if !errors.Is(err, ErrBudget) {
				t.Fatalf("limit %d: %v, want ErrBudget", tc.limit, err)
			}
		}
		if ok != tc.ok || b.Used() != tc.ok {
			t.Errorf("limit %d, %d takes: %d granted (used %d), want %d", tc.limit, tc.takes, ok, b.Used(), tc.ok)
		}
	}
	// Concurrent takers never get more than the limit between them.
	b := NewBudget(50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if b.Take() == nil {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if granted != 50 {
		t.Errorf("concurrent: %d granted, want 50", granted)
	}
	if err := (*Budget)(nil).Take(); err != nil {
		t.Errorf("nil budget: %v", err)
	}
}

// sample is a report with every kind of cell: succeeded alone and blocked
// through Warden, skipped on both for one reason, skipped on one side only,
// text that needs escaping in markdown and HTML.
func sample() Report {
	return Report{
		Protocol: "mcp",
		Direct:   "http://127.0.0.1:3901/mcp",
		Warden:   "http://127.0.0.1:8443/mcp",
		Rows: []Row{
			{ID: "mcp-foreign-tasks-get", Title: "another principal's `tasks/get`",
				Direct: &Outcome{Result: Succeeded, Evidence: "HTTP 200, task working"},
				Warden: &Outcome{Result: Blocked, Evidence: "HTTP 200, -32602 Task not found"}},
			{ID: "mcp-foreign-tasks-steer", Title: "another principal's `tasks/steer`",
				Direct: &Outcome{Result: Skipped, Why: "the server does not offer tasks/steer (-32601)"},
				Warden: &Outcome{Result: Skipped, Why: "the server does not offer tasks/steer (-32601)"}},
			{ID: "x-escape", Title: "a <script> | pipe & amp",
				Direct: &Outcome{Result: Skipped, Why: "no tool with taskSupport forbidden"},
				Warden: &Outcome{Result: Blocked, Evidence: "HTTP 403 <forbidden> | x"}},
			{ID: "x-warden-only", Title: "only through Warden",
				Warden: &Outcome{Result: Succeeded, Evidence: "HTTP 200"}},
		},
	}
}

func TestReportWriters(t *testing.T) {
	rep := sample()
	for _, tc := range []struct {
		golden string
		write  func(*bytes.Buffer) error
	}{
		{"report.md", func(b *bytes.Buffer) error { return rep.WriteMarkdown(b) }},
		{"table.md", func(b *bytes.Buffer) error { return rep.WriteTable(b) }},
		{"report.json", func(b *bytes.Buffer) error { return rep.WriteJSON(b) }},
		{"report.html", func(b *bytes.Buffer) error { return rep.WriteHTML(b) }},
		{"empty.md", func(b *bytes.Buffer) error { return Report{Protocol: "a2a", Direct: "http://x"}.WriteMarkdown(b) }},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs from the golden file:\n%s", tc.golden, b.String())
			}
		})
	}
}

// TestHTMLSelfContained: the page loads nothing and runs nothing.
func TestHTMLSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "<link", "src=", "http-equiv", "@import", "url("} {
		if bytes.Contains(bytes.ToLower(b.Bytes()), []byte(bad)) {
			t.Errorf("the page holds %q", bad)
		}
	}
}

func TestRun(t *testing.T) {
	seen := map[string]int{}
	attacks := []Attack{{ID: "a", Protocol: "mcp", Title: "a", Run: func(_ context.Context, e Endpoint) Outcome {
		seen[e.Name]++
		if err := e.Budget.Take(); err != nil {
			return Failed(err)
		}
		if e.Name == "direct" {
			return Succeed("worked")
		}
		return Block("refused")
	}}}
	two := []Principal{{"alice", "a"}, {"bob", "b"}}
	direct := &Endpoint{Name: "direct", URL: "http://d", Principals: two, Budget: NewBudget(1)}
	warden := &Endpoint{Name: "warden", URL: "http://w", Principals: two, Budget: NewBudget(0)}
	rep, err := Run(context.Background(), "mcp", attacks, direct, warden)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Direct.Result != Succeeded || rep.Rows[0].Warden.Result != Skipped {
		t.Fatalf("rows %+v", rep.Rows)
	}
	if seen["direct"] != 1 || seen["warden"] != 1 {
		t.Errorf("runs %v, want one per endpoint", seen)
	}
	if _, err := Run(context.Background(), "mcp", attacks, &Endpoint{Name: "direct", Principals: two[:1]}, nil); err == nil {
		t.Error("one principal: no error")
	}
	if _, err := Run(context.Background(), "mcp", attacks, nil, nil); err == nil {
		t.Error("no endpoint: no error")
	}
	if _, err := Catalogue("smtp"); err == nil {
		t.Error("Catalogue(smtp): no error")
	}
}
