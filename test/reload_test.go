package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestReloadOnSIGHUP changes an operator policy under a running Warden: a
// SIGHUP installs it, and a broken policy on the next SIGHUP leaves the
// previous one in force.
func TestReloadOnSIGHUP(t *testing.T) { eachTransport(t, testReloadOnSIGHUP) }

func testReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "operator.rego")
	write := func(src string) {
		if err := os.WriteFile(policy, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("package warden.macp\n")
	cfg := filepath.Join(dir, "warden.yaml")
	if err := os.WriteFile(cfg, []byte("policies:\n  files: ["+policy+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	direct := startRuntime(t)
	addr, proc := startWardenProcess(t, direct, "--auth", "dev", "--insecure-dev-auth", "--config", cfg)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload, err := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"mallory", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	start := func() *macpv1.Ack {
		n++
		ack, err := sendStartIn(ctx, conn, "7a1c2a4e-9b7d-4c1e-8a2b-5d6e7f80910"+string(rune('0'+n)), "mallory", payload)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	hup := func() { proc.reload(t) }
	if ack := start(); !ack.GetOk() {
		t.Fatalf("before the reload: %v", ack.GetError())
	}
	write("package warden.macp\nimport rego.v1\ndeny contains {\"code\": \"FORBIDDEN\", \"msg\": \"mallory may not start sessions\"} if input.principal.id == \"mallory\"\n")
	hup()
	if ack := start(); ack.GetOk() || ack.GetError().GetCode() != "FORBIDDEN" || !strings.Contains(ack.GetError().GetMessage(), "mallory may not") {
		t.Fatalf("after reloading the deny rule: %v", ack)
	}
	write("package warden.macp\ndeny contains x if {") // does not compile
	hup()
	if ack := start(); ack.GetOk() || ack.GetError().GetCode() != "FORBIDDEN" {
		t.Fatalf("after a broken reload the previous policy must stay: %v", ack)
	}
	logs := proc.output()
	if !strings.Contains(logs, "reload: keeping the current policies") {
		t.Errorf("the failed reload was not logged:\n%s", logs)
	}
}

// reloadDone is what Warden logs once a SIGHUP's reload has ended, replaced
// or kept.
var reloadDone = []string{"reload: authentication, policies and handle keys replaced", "reload: keeping the current policies"}

// reload sends Warden SIGHUP and returns once it logged the reload's end:
// the reload compiles the policies, which on a loaded machine took longer
// than the half second the tests slept for it.
func (p *process) reload(t testing.TB) {
	t.Helper()
	ended := func() (n int) {
		out := p.output()
		for _, s := range reloadDone {
			n += strings.Count(out, s)
		}
		return n
	}
	before := ended()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ended() == before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged 30 s after SIGHUP:\n%s", p.output())
		}
	}
}
