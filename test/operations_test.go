package test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestOperatorSeesWhy runs bin/warden (ext_authz, static tokens, a decision
// log file, the admin port) as an operator would: a refused credential is
// recorded with why (auth_reason) in the decision record and the metrics;
// logrotate moves the decision log and sends SIGHUP, and the next record
// goes to a new file while the moved one keeps the first, each exactly
// once; the reload is counted and the build is named on /metrics.
func TestOperatorSeesWhy(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	logPath := filepath.Join(dir, "decisions.log")
	cfg := filepath.Join(dir, "warden.yaml")
	addr, admin := freeAddr(t), freeAddr(t)
	for name, content := range map[string]string{
		tokens: `[{"token": "tok-a", "sender": "agent://a"}]`,
		cfg: "authn:\n  mode: static\n  static:\n    tokens_file: " + tokens + "\nextauthz:\n  listen: " + addr +
			"\nadmin:\n  listen: " + admin + "\ndecision_log:\n  path: " + logPath + "\n  flush_interval: 10ms\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	proc := start(t, "warden", addr, nil, wardenBinary(t), "serve", "--config", cfg)
	c := dialCheck(t, "warden", addr)
	refuse := func() {
		t.Helper()
		env := &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: "SessionStart", MessageId: "m1",
			SessionId: "7a1c2a4e-9b7d-4c1e-8a2b-5d6e7f809101", Sender: "agent://a"}
		if got := c.call(macpService+"Send", "tok-revoked", &macpv1.SendRequest{Envelope: env}); got == "allow" {
			t.Fatal("an unknown token was allowed")
		}
	}
	records := func(path string, want int) string {
		t.Helper()
		var b []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, _ = os.ReadFile(path)
			if strings.Count(string(b), "\n") >= want {
				break
			}
		}
		if n := strings.Count(string(b), "\n"); n != want {
			t.Fatalf("%s holds %d records, want %d:\n%s", path, n, want, b)
		}
		return string(b)
	}

	refuse()
	if first := records(logPath, 1); !strings.Contains(first, `"auth_reason":"unknown_token"`) || !strings.Contains(first, `"reason":"unauthenticated"`) {
		t.Fatalf("the record does not say why: %s", first)
	}
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(logPath); err == nil {
			break
		}
	}
	refuse()
	records(logPath, 1)
	records(logPath+".1", 1)

	// The reload runs after the reopen (it compiles the policies): wait for it.
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if body, _ = httpGet(t, "http://"+admin+"/metrics"); strings.Contains(body, `warden_reload_total{result="success"} 1`) {
			break
		}
	}
	for _, want := range []string{
		`warden_decisions_total{auth_reason="unknown_token",decision="deny",`,
		`warden_reload_total{result="success"} 1`,
		`warden_build_info{goversion="go`,
		"warden_last_reload_success_timestamp_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
