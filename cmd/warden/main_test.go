package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayCommand(t *testing.T) {
	fixture := "../../../shared/reference/macp/conformance/task_happy_path.json"
	code, out, _ := runCmd(t, "replay", fixture)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := "task_happy_path.json:2 agent://worker TaskComplete accept - allowed"
	if !strings.Contains(out, want+"\n") {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}

	// The same transcript with one expectation flipped must fail, naming the message.
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	flipped := strings.Replace(string(b), `"summary": "done" },
      "expect": "accept"`, `"summary": "done" },
      "expect": "reject"`, 1)
	if flipped == string(b) {
		t.Fatal("could not flip an expectation")
	}
	code, _, errOut := runCmd(t, "replay", write(t, "flipped.json", flipped))
	if code != 1 || !strings.Contains(errOut, "flipped.json:2: expected reject, got accept") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}

	code, out, _ = runCmd(t, "replay", "--json", fixture)
	if code != 0 || !strings.Contains(out, `"message_type":"TaskComplete"`) {
		t.Fatalf("exit %d, json output %q", code, out)
	}
	if code, _, _ := runCmd(t, "replay"); code != 2 {
		t.Fatalf("replay without files: exit %d, want 2", code)
	}
	if code, _, _ := runCmd(t, "replay", write(t, "broken.json", "{")); code != 1 {
		t.Fatalf("broken transcript: exit %d, want 1", code)
	}
}

func TestCheckCommand(t *testing.T) {
	code, out, errOut := runCmd(t, "check")
	if code != 0 || !strings.Contains(out, "memoization: on") || !strings.Contains(out, "0 failing") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	cfg := write(t, "warden.yaml", "enforcer:\n  sessions: 10\n  dry_runn: true\n")
	code, _, errOut = runCmd(t, "check", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "dry_runn") {
		t.Fatalf("unknown key: exit %d, stderr %q", code, errOut)
	}
	cfg = write(t, "warden.yaml", "authn:\n  mode: dev\n")
	code, _, errOut = runCmd(t, "check", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "insecure") {
		t.Fatalf("dev without insecure: exit %d, stderr %q", code, errOut)
	}
	cfg = write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nenforcer:\n  sessions: 10\n")
	if code, out, errOut := runCmd(t, "check", "--config", cfg); code != 0 {
		t.Fatalf("valid config: exit %d\n%s%s", code, out, errOut)
	}
}

func TestVersionAndUsage(t *testing.T) {
	if code, out, _ := runCmd(t, "version"); code != 0 || !strings.HasPrefix(out, "warden ") {
		t.Fatalf("version: exit %d %q", code, out)
	}
	if code, _, errOut := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: exit %d %q", code, errOut)
	}
}
