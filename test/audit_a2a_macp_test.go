package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/replay/audit"
)

// auditTime bounds one `warden audit` run (its requests are bounded by
// the command's default --max-requests).
const auditTime = 3 * time.Minute

// auditCase is one attack set played against a real peer direct and through
// bin/warden in front of it.
type auditCase struct {
	protocol   string
	doc        string // the page whose table between markers is the report's ("" for none)
	principals []audit.Principal
	// succeeds lists the attacks that work against the peer alone (the
	// docs' bold rows); every other attack is refused there too.
	succeeds []string
	html     bool // also render the HTML report in headless Chromium
}

// runAudit runs `bin/warden audit` with the protocol's attack set against
// direct and warden, bounded in time (auditTime) and in requests (the
// command's default --max-requests), and checks its report: direct,
// exactly the attacks c.succeeds work; through Warden none does (exit 0),
// and anything skipped says why; the markdown table is the one in c.doc
// between its markers (rewritten there with -update).
func runAudit(t *testing.T, c auditCase, direct, warden string) {
	t.Helper()
	out := t.TempDir()
	args := []string{"audit", "--protocol", c.protocol, "--direct", direct, "--warden", warden, "--out", out}
	for _, p := range c.principals {
		args = append(args, "--principal", p.Name+"="+p.Token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditTime)
	defer cancel()
	cmd := exec.CommandContext(ctx, wardenBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("warden audit: %v\n%s", err, stderr.String())
	}
	var rep auditReport
	b, err := os.ReadFile(filepath.Join(out, "audit.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("audit.json: %v\n%s", err, b)
	}
	attacks, err := audit.Catalogue(c.protocol)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(attacks) || len(attacks) == 0 {
		t.Fatalf("%d rows for %d attacks", len(rep.Rows), len(attacks))
	}
	want := map[string]bool{}
	for _, id := range c.succeeds {
		want[id] = true
	}
	for _, row := range rep.Rows {
		if row.Direct == nil || row.Warden == nil {
			t.Fatalf("%s: an endpoint was not audited: %+v", row.ID, row)
		}
		if row.Direct.Result == "skipped" || (row.Direct.Result == "succeeded") != want[row.ID] {
			t.Errorf("%s (%s) against the peer alone: %s %s%s, want succeeded=%v", row.ID, row.Title, row.Direct.Result, row.Direct.Evidence, row.Direct.Why, want[row.ID])
		}
		switch o := row.Warden; {
		case o.Result == "succeeded":
			t.Errorf("%s (%s) through Warden: succeeded (%s)", row.ID, row.Title, o.Evidence)
		case o.Result == "skipped" && o.Why == "":
			t.Errorf("%s through Warden: skipped without a reason", row.ID)
		case o.Result == "skipped":
			t.Logf("%s through Warden: skipped: %s", row.ID, o.Why)
		}
	}
	t.Logf("warden audit: %d attacks direct and through Warden in %v", len(rep.Rows), time.Since(began).Round(time.Millisecond))
	if c.doc != "" {
		checkDocTable(t, filepath.Join(out, "audit.md"), c.doc, "audit:"+c.protocol)
	}
	if c.html {
		checkHTMLReport(t, filepath.Join(out, "audit.html"), rep)
	}
}

// TestAuditA2A plays the A2A attack set against the a2a-go v2.3.1 server
// alone and through bin/warden in front of it (static tokens for alice and
// bob; alice's webhooks on localhost allowed, as an operator allows an
// internal receiver): its report is docs/a2a.md's table. The Python a2a-sdk
// 1.3.0 server, whose stores are scoped by owner, is the control: alone, only
// the attacks it does not scope succeed (its own contexts, webhooks, the
// card), so the audit tells a refusal from a success.
func TestAuditA2A(t *testing.T) {
	alice, bob := audit.Principal{Name: "alice", Token: aliceToken}, audit.Principal{Name: "bob", Token: bobToken}
	t.Run("a2a-go", func(t *testing.T) {
		base := startA2AGo(t)
		warden := startA2AWarden(t, base, "--a2a-webhook-allow", "localhost")
		runAudit(t, auditCase{
			protocol:   "a2a",
			doc:        "docs/a2a.md",
			principals: []audit.Principal{alice, bob},
			html:       true,
			succeeds: []string{"a2a-get-task", "a2a-cancel-task", "a2a-continue-task", "a2a-continue-context", "a2a-subscribe",
				"a2a-push-create", "a2a-push-get", "a2a-push-list", "a2a-push-delete", "a2a-reference-task", "a2a-agent-cites-task",
				"a2a-agent-shares-context", "a2a-agent-shares-context-in-flight", "a2a-webhook-loopback", "a2a-webhook-private", "a2a-webhook-link-local", "a2a-webhook-inline",
				"a2a-extended-card-anonymous", "a2a-message-terminal-task", "a2a-probe-cancel-terminal"},
		}, base+"/jsonrpc", warden+"/jsonrpc")
	})
	t.Run("a2a-sdk-python", func(t *testing.T) {
		base := startA2APy(t)
		warden := startA2AWarden(t, base, "--a2a-webhook-allow", "localhost")
		runAudit(t, auditCase{
			protocol:   "a2a",
			principals: []audit.Principal{alice, bob},
			succeeds: []string{"a2a-continue-context", "a2a-webhook-loopback", "a2a-webhook-private", "a2a-webhook-link-local",
				"a2a-webhook-inline", "a2a-extended-card-anonymous"},
		}, base+"/jsonrpc", warden+"/jsonrpc")
	})
}

// TestAuditMACP plays the MACP attack set against the reference runtime
// 0.13.0 alone and through bin/warden in front of it (each MACP front door),
// both in dev authentication (the bearer is the agent's name) and both with
// the same static tokens: the same report. With two principals and a small
// budget, what it could not test is skipped with the reason.
func TestAuditMACP(t *testing.T) {
	eachTransport(t, func(t *testing.T) {
		t.Run("dev", func(t *testing.T) {
			runtime := startRuntime(t)
			warden := startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth")
			testAuditMACP(t, runtime, warden, []audit.Principal{{Name: "alice", Token: "alice"}, {Name: "bob", Token: "bob"}, {Name: "carol", Token: "carol"}}, wardenTransport == "grpc")
		})
		t.Run("static", func(t *testing.T) {
			tokens := filepath.Join(t.TempDir(), "tokens.json")
			var file []map[string]any
			var ps []audit.Principal
			for _, name := range []string{"alice", "bob", "carol"} {
				ps = append(ps, audit.Principal{Name: name, Token: "tok-" + name + "-" + newSession()})
				file = append(file, map[string]any{"token": ps[len(ps)-1].Token, "sender": name, "can_start_sessions": true})
			}
			b, err := json.Marshal(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tokens, b, 0o600); err != nil {
				t.Fatal(err)
			}
			runtime := startRuntime(t, "MACP_AUTH_TOKENS_FILE="+tokens)
			warden := startWarden(t, runtime, "--auth", "static", "--static-tokens", tokens)
			testAuditMACP(t, runtime, warden, ps, false)
		})
	})
	// Two principals and 20 requests: the attacks that need a third party
	// and those past the budget are not tested, and say why.
	t.Run("limits", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), auditTime)
		defer cancel()
		out, err := exec.CommandContext(ctx, wardenBinary(t), "audit", "--protocol", "macp", "--direct", "http://"+startRuntime(t),
			"--principal", "alice=alice", "--principal", "bob=bob", "--max-requests", "20", "--format", "json").Output()
		if err != nil {
			t.Fatalf("warden audit: %v", err)
		}
		var rep auditReport
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatal(err)
		}
		third, budget := 0, 0
		for _, row := range rep.Rows {
			switch why := row.Direct.Why; {
			case row.Direct.Result != "skipped":
			case why == "needs 3 principals, 2 given":
				third++
			case strings.Contains(why, "request budget spent (20 requests)"):
				budget++
			default:
				t.Errorf("%s: skipped for %q", row.ID, why)
			}
		}
		if last := rep.Rows[len(rep.Rows)-1].Direct; third != 4 || budget == 0 || last.Result != "skipped" {
			t.Errorf("%d skipped for a third principal (want 4), %d for the budget (want some, the last one included: %+v)", third, budget, last)
		}
	})
}

func testAuditMACP(t *testing.T, runtime, warden string, principals []audit.Principal, html bool) {
	runAudit(t, auditCase{
		html:       html,
		protocol:   "macp",
		doc:        "docs/macp.md",
		principals: principals,
		succeeds: []string{"macp-commitment-after-fail", "macp-duplicate-other-sender", "macp-list-sessions-outsider",
			"macp-timestamp-ahead", "macp-path-query"},
	}, "http://"+runtime, "http://"+warden)
}
