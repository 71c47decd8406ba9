package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// pythonDrive runs test/peers/mcp-py/driver.py (the official MCP Python SDK)
// against url with bearer and returns what it saw.
func pythonDrive(t *testing.T, url, bearer string) map[string]any {
	t.Helper()
	py := peer(t, ".peers/mcp-venv/bin/python")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(repoRoot(t), "test/peers/mcp-py/driver.py"), url, bearer)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("driver.py %s: %v\n%s", url, err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("driver.py output %q: %v", out, err)
	}
	return m
}

// TestMCPPythonSDKTransparent: the official MCP Python SDK (2.3.0) sees the
// go-sdk everything-server the same direct and through Warden: every tool
// listed, every argument-free tool's result, every resource read, every
// prompt listed (issue 10's differential suite, Python side).
func TestMCPPythonSDKTransparent(t *testing.T) {
	bin := peer(t, ".peers/bin/everything-server")
	// One server per side: some tools change the server's state (a
	// transient tool added by test_trigger_tool_change).
	server := func() string {
		addr := freeAddr(t)
		start(t, "everything-server", addr, nil, bin, "-http", addr, "-stateless=false")
		return "http://" + addr
	}
	warden, _ := startMCPWarden(t, server())
	direct := pythonDrive(t, server()+"/mcp", "alice")
	through := pythonDrive(t, warden+"/mcp", "alice")
	calls, _ := direct["calls"].(map[string]any)
	if len(calls) < 5 {
		t.Fatalf("the driver called only %d tools direct; the comparison proves little: %v", len(calls), direct)
	}
	for _, k := range []string{"server", "tools", "prompts", "resources"} {
		if !reflect.DeepEqual(direct[k], through[k]) {
			t.Errorf("%s differs:\n direct  %v\n through %v", k, direct[k], through[k])
		}
	}
	wcalls, _ := through["calls"].(map[string]any)
	for name, d := range calls {
		if !reflect.DeepEqual(d, wcalls[name]) {
			t.Errorf("tools/call %s differs:\n direct  %v\n through %v", name, d, wcalls[name])
		}
	}
	t.Logf("Python SDK 2.3.0: %d tools listed, %d called, %d resources read, the same direct and through Warden", len(direct["tools"].([]any)), len(calls), len(direct["resources"].(map[string]any)))
}
