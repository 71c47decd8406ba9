package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated tables in docs/ from this run's warden audit reports")

// auditReport is audit.json as warden audit writes it.
type auditReport struct {
	Protocol string     `json:"protocol"`
	Rows     []auditRow `json:"rows"`
}

type auditRow struct {
	ID     string        `json:"id"`
	Title  string        `json:"title"`
	Direct *auditOutcome `json:"direct"`
	Warden *auditOutcome `json:"warden"`
}

type auditOutcome struct {
	Result   string `json:"result"`
	Evidence string `json:"evidence"`
	Why      string `json:"why"`
}

// TestAuditMCP runs `warden audit --protocol mcp` against two real MCP
// servers, alone and through Warden: the TypeScript SDK 1.32.2 task server
// with a task store that ignores sessions (LEAKY=1, the SDK before PR #1486)
// and the SEP-2669 fixture in -lax -list mode. Direct, the ownership attacks
// succeed; through Warden every attack is blocked or skipped with a reason,
// the same reason as direct; the report's table is the one in docs/mcp.md
// (-update rewrites it); the HTML report renders in headless Chromium with
// its table and every row.
func TestAuditMCP(t *testing.T) {
	for _, tc := range []struct {
		name, marker string
		start        func(t *testing.T) string
		mustSucceed  []string // attacks that must work against the server alone
	}{
		{"typescript-sdk", "audit:mcp", func(t *testing.T) string { return startNodeMCP(t, "LEAKY=1") },
			[]string{"mcp-foreign-tasks-get", "mcp-foreign-tasks-result", "mcp-foreign-tasks-cancel", "mcp-tasks-list-foreign", "mcp-foreign-session"}},
		{"sep2669-fixture", "audit:mcp-sep2669", func(t *testing.T) string { return startFixtureMCP(t, "-lax", "-list") },
			[]string{"mcp-foreign-tasks-get", "mcp-foreign-tasks-cancel", "mcp-foreign-tasks-update", "mcp-foreign-tasks-steer",
				"mcp-foreign-tasks-pause", "mcp-foreign-tasks-resume", "mcp-tasks-list-foreign", "mcp-steer-completed", "mcp-resume-working", "mcp-steer-flood"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upstream := tc.start(t)
			warden, _ := startMCPWarden(t, upstream)
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, wardenBinary(t), "audit", "--protocol", "mcp",
				"--direct", upstream+"/mcp", "--warden", warden+"/mcp",
				"--principal", "alice=alice", "--principal", "bob=bob", "--out", out)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("warden audit: %v\n%s", err, b)
			}
			var rep auditReport
			b, err := os.ReadFile(filepath.Join(out, "audit.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) == 0 {
				t.Fatal("the report has no rows")
			}
			for _, id := range tc.mustSucceed {
				if row := findRow(rep, id); row == nil || row.Direct == nil || row.Direct.Result != "succeeded" {
					t.Errorf("%s against the server alone: %+v, want succeeded (the server is the leaky one; the audit proves nothing otherwise)", id, row)
				}
			}
			for _, row := range rep.Rows {
				d, w := row.Direct, row.Warden
				switch {
				case w == nil || d == nil:
					t.Errorf("%s: an endpoint was not audited", row.ID)
				case w.Result == "succeeded":
					t.Errorf("%s through Warden: succeeded (%s)", row.ID, w.Evidence)
				case w.Result == "skipped" && w.Why == "":
					t.Errorf("%s through Warden: skipped without a reason", row.ID)
				case w.Result == "skipped" && (d.Result != "skipped" || d.Why != w.Why):
					t.Errorf("%s: skipped through Warden (%s) but %s alone (%s): Warden hid what the server offers", row.ID, w.Why, d.Result, d.Why)
				case w.Result == "blocked" && w.Evidence == "":
					t.Errorf("%s through Warden: blocked without evidence", row.ID)
				}
			}
			checkDocTable(t, filepath.Join(out, "audit.md"), "docs/mcp.md", tc.marker)
			checkHTMLReport(t, filepath.Join(out, "audit.html"), rep)

			// A small budget: the attacks past it are not tested, and say so.
			cmd = exec.CommandContext(ctx, wardenBinary(t), "audit", "--protocol", "mcp", "--direct", upstream+"/mcp",
				"--principal", "alice=alice", "--principal", "bob=bob", "--max-requests", "12", "--format", "json")
			small, err := cmd.Output()
			if err != nil {
				t.Fatalf("warden audit --max-requests 12: %v", err)
			}
			// A "Warden" that lets an attack through: exit 1, the report written.
			cmd = exec.CommandContext(ctx, wardenBinary(t), "audit", "--protocol", "mcp", "--warden", upstream+"/mcp",
				"--principal", "alice=alice", "--principal", "bob=bob", "--max-requests", "12")
			md, err := cmd.Output()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !bytes.Contains(md, []byte("| **succeeded** |")) {
				t.Errorf("audit of a leaky server as Warden: %v, want exit 1 with the report:\n%s", err, md)
			}
			var budgeted auditReport
			if err := json.Unmarshal(small, &budgeted); err != nil {
				t.Fatal(err)
			}
			last := budgeted.Rows[len(budgeted.Rows)-1].Direct
			if first := budgeted.Rows[0].Direct; first.Result != "succeeded" || last.Result != "skipped" || !strings.Contains(last.Why, "request budget spent (12 requests)") {
				t.Errorf("with 12 requests: first attack %+v, last %+v; want the first to run and the last not tested for the budget", first, last)
			}
		})
	}
}

func findRow(rep auditReport, id string) *auditRow {
	for i := range rep.Rows {
		if rep.Rows[i].ID == id {
			return &rep.Rows[i]
		}
	}
	return nil
}

// checkDocTable compares the table of a markdown report (from its first
// table line on) with the text of doc between <!-- marker begin --> and
// <!-- marker end -->, and the rows the target alone let through with the
// README's <!-- marker summary begin --> section when the README has one;
// with -update it writes them there.
func checkDocTable(t *testing.T, report, doc, marker string) {
	t.Helper()
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(md, []byte("| attack |"))
	if i < 0 {
		t.Fatalf("%s has no table:\n%s", report, md)
	}
	table := string(md[i:])
	checkGenerated(t, doc, marker, table, true)
	checkGenerated(t, "README.md", marker+" summary", succeededAlone(table), false)
}

// succeededAlone is what the README shows of a report: the attacks the
// target alone let through, each with Warden's answer from its evidence.
func succeededAlone(table string) string {
	b := strings.Builder{}
	b.WriteString("| attack | server alone | with Warden |\n|---|---|---|\n")
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 4 || strings.TrimSpace(cells[1]) != "**succeeded**" {
			continue
		}
		_, warden, ok := strings.Cut(strings.TrimSpace(cells[3]), "Warden: ")
		if !ok {
			warden = strings.TrimSpace(cells[2])
		}
		fmt.Fprintf(&b, "| %s | **succeeded** | %s |\n", strings.TrimSpace(cells[0]), warden)
	}
	return b.String()
}

// checkGenerated compares text with the section of doc between
// <!-- marker begin --> and <!-- marker end -->, or writes it there with
// -update; a doc without the section fails when required.
func checkGenerated(t *testing.T, doc, marker, text string, required bool) {
	t.Helper()
	path := filepath.Join(repoRoot(t), doc)
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+marker+" begin -->\n", "<!-- "+marker+" end -->"
	b := strings.Index(string(page), begin)
	e := strings.Index(string(page), end)
	if b < 0 || e < b {
		if required {
			t.Fatalf("%s has no %s ... %s section", doc, strings.TrimSpace(begin), end)
		}
		return
	}
	got := string(page[b+len(begin) : e])
	if *updateDocs {
		if got != text {
			if err := os.WriteFile(path, []byte(string(page[:b+len(begin)])+text+string(page[e:])), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if got != text {
		t.Errorf("the %s section of %s is not this run's report (run go test ./test -run TestAudit -update):\n--- %s\n%s--- report\n%s", marker, doc, doc, got, text)
	}
}

// checkHTMLReport renders the HTML report in headless Chromium and checks
// the rendered DOM: the table, each attack's row with the results of the
// JSON report as cell classes, and the list of what was not tested.
func checkHTMLReport(t *testing.T, page string, rep auditReport) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("WARDEN_REQUIRE_PEERS") == "1" {
			t.Fatalf("chromium is missing (%v): run scripts/peers.sh", err)
		}
		t.Skip("chromium is not installed (run scripts/peers.sh, or make test); the HTML report was not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+page)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	if !bytes.Contains(dom, []byte(`<table id="audit">`)) {
		t.Fatalf("the rendered page has no table:\n%s", dom)
	}
	rows := regexp.MustCompile(`<tr id="([^"]+)"><td>[^<]*(?:<code>[^<]*</code>[^<]*)*</td><td class="(\w+)">\w+</td><td class="(\w+)">\w+</td>`).FindAllSubmatch(dom, -1)
	if len(rows) != len(rep.Rows) {
		t.Fatalf("the rendered table has %d attack rows, the report %d:\n%s", len(rows), len(rep.Rows), dom)
	}
	for i, m := range rows {
		want := rep.Rows[i]
		if string(m[1]) != want.ID || string(m[2]) != want.Direct.Result || string(m[3]) != want.Warden.Result {
			t.Errorf("rendered row %d: %s %s %s, want %s %s %s", i, m[1], m[2], m[3], want.ID, want.Direct.Result, want.Warden.Result)
		}
	}
	skipped := false
	for _, r := range rep.Rows {
		skipped = skipped || r.Direct.Result == "skipped" || r.Warden.Result == "skipped"
	}
	if skipped != bytes.Contains(dom, []byte(`<ul id="untested">`)) {
		t.Errorf("the rendered page's list of what was not tested: present %v, want %v", !skipped, skipped)
	}
}
