//go:build !wardenoracle

package main

import (
	"strings"
	"testing"
)

// TestGRPCDoorRetired (issue 28 item 1): the product's check and serve
// refuse macp.transport grpc and --transport grpc, saying that the grpc-go
// front door was retired and is built only into the test oracle. Before,
// both accepted it and serve ran a grpc-go server.
func TestGRPCDoorRetired(t *testing.T) {
	const want = "the grpc-go front door was retired"
	cfg := write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nmacp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n  upstream_plaintext: true\n  transport: grpc\n")
	for _, args := range [][]string{
		{"check", "--config", cfg},
		{"serve", "--config", cfg},
		{"serve", "--auth", "dev", "--insecure-dev-auth", "--macp-listen", "127.0.0.1:0", "--macp-upstream", "127.0.0.1:1", "--plaintext", "--transport", "grpc"},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "wardenoracle") {
			t.Errorf("%v: exit %d, stderr %q, want exit 1 and %q", args, code, errOut, want)
		}
	}
	cfg = write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nmacp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n  upstream_plaintext: true\n  transport: relay\n")
	if code, out, errOut := runCmd(t, "check", "--config", cfg); code != 0 || !strings.Contains(out, "transport relay") {
		t.Errorf("transport relay: exit %d\n%s%s", code, out, errOut)
	}
}
