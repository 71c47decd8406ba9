package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/replay/whatif"
)

// TestWhatIfCommand: exit 1 with the golden report when decisions change,
// 0 when none does, 2 on errors (a malformed line named by its number, no
// candidate, a log recorded without include_input).
func TestWhatIfCommand(t *testing.T) {
	dir := "../../testdata/whatif"
	transcripts := []string{"../../test/attacks/macp/task_forged_complete.json", "../../test/attacks/macp/task_late_report.json"}
	cand := t.TempDir()
	b, err := os.ReadFile(dir + "/worker-no-complete.rego")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cand+"/p.rego", b, 0o600); err != nil {
		t.Fatal(err)
	}
	same := t.TempDir()
	if err := os.WriteFile(same+"/p.rego", []byte("package warden.macp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A decision log, as serve writes it with include_input.
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var logText bytes.Buffer
	for _, f := range transcripts {
		s, err := whatif.Record(context.Background(), engine, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := whatif.WriteLog(&logText, s); err != nil {
			t.Fatal(err)
		}
	}
	log := write(t, "decisions.jsonl", logText.String())
	first, _, _ := strings.Cut(logText.String(), "\n")
	bad := write(t, "bad.jsonl", first+"\nnot json\n")
	noInput := write(t, "old.jsonl", `{"decision_id":"x-1","timestamp":"2026-01-01T00:00:00Z","labels":{},"path":"warden/macp","input":{"protocol":"macp","principal":"agent://a","type":"TaskRequest"},"result":{"allow":true,"reason":"allowed"},"metrics":{}}`+"\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"changes", []string{"what-if", "--policies", cand, log}, 1, "changed: 3 (allow→deny 3, deny→allow 0, reason changed 0)\n  3 now FORBIDDEN operator_policy: worker may not complete\n" + log + ":9 "},
		{"transcripts", append([]string{"what-if", "--policies", cand}, transcripts...), 1, "task_late_report.json:6 "},
		{"no change", []string{"what-if", "--policies", same, log}, 0, "changed: 0 (allow→deny 0, deny→allow 0, reason changed 0)\n"},
		{"json", []string{"what-if", "--policies", cand, "--format", "json", log}, 1, `"allow_to_deny": 3`},
		{"malformed line", []string{"what-if", "--policies", cand, bad}, 2, "bad.jsonl:2: not a decision-log record"},
		{"no input", []string{"what-if", "--policies", cand, noInput}, 2, "old.jsonl:1: decision x-1: recorded without decision_log.include_input"},
		{"no candidate", []string{"what-if", log}, 2, "no candidate"},
		{"bad format", []string{"what-if", "--policies", cand, "--format", "xml", log}, 2, "want text or json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.out) {
				t.Fatalf("exit %d, want %d; output %q, want %q", code, tc.code, out+errOut, tc.out)
			}
		})
	}
}

// TestCheckIncludeInput: warden check says that a decision log records
// message content, and its bound.
func TestCheckIncludeInput(t *testing.T) {
	cfg := write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nmacp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n  upstream_plaintext: true\n"+
		"decision_log:\n  path: "+t.TempDir()+"/d.log\n  include_input: true\n  max_input_bytes: 1000\n")
	code, out, errOut := runCmd(t, "check", "--config", cfg)
	if code != 0 || !strings.Contains(out, "include_input on") || !strings.Contains(out, "sensitive), up to 1000 bytes a decision") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}
