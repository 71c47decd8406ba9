package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGRPCDoorOnlyInOracle (issue 28 item 1): bin/warden, the product,
// refuses the retired grpc-go MACP front door (--transport grpc, and
// macp.transport grpc under check) with an error that names the test
// oracle; bin/warden-oracle (-tags wardenoracle) still accepts it, which
// eachTransport's grpc runs rely on. Before, the product served it.
func TestGRPCDoorOnlyInOracle(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "warden.yaml")
	if err := os.WriteFile(cfg, []byte("authn:\n  mode: dev\n  insecure: true\nmacp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n  upstream_plaintext: true\n  transport: grpc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(bin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(out), err
	}
	product, oracle := wardenBinary(t), oracleBinary(t)
	for _, args := range [][]string{
		{"serve", "--auth", "dev", "--insecure-dev-auth", "--macp-listen", freeAddr(t), "--macp-upstream", "127.0.0.1:1", "--plaintext", "--transport", "grpc"},
		{"check", "--config", cfg},
	} {
		out, err := run(product, args...)
		if err == nil || !strings.Contains(out, "the grpc-go front door was retired") || !strings.Contains(out, "wardenoracle") {
			t.Errorf("bin/warden %s: %v\n%s\nwant a refusal naming the retired door and the oracle", args[0], err, out)
		}
	}
	if out, err := run(oracle, "check", "--config", cfg); err != nil || !strings.Contains(out, "transport grpc") {
		t.Errorf("bin/warden-oracle check with transport grpc: %v\n%s", err, out)
	}
}
