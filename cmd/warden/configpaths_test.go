package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfigPathsRelativeToFile: relative file paths in a configuration
// file resolve against the file's directory, whatever the working
// directory (issue 25: `warden check --config deploy/config/X.yaml` from the
// repository); absolute paths, "-" and flags stay as given.
func TestConfigPathsRelativeToFile(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "etc", "warden")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(cfgDir, "warden.yaml")
	body := `authn:
  mode: static
  static:
    tokens_file: tokens.json
policies:
  files: [operator.rego, /abs/other.rego]
decision_log:
  path: decisions/log.jsonl
mcp:
  handle_key_file: ../keys/mcp.key
`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // the working directory is not the file's
	cfg, err := loadConfig(filepath.Join("etc", "warden", "warden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("etc", "warden")
	for _, tc := range []struct{ name, got, want string }{
		{"authn.static.tokens_file", cfg.Authn.Static.TokensFile, filepath.Join(rel, "tokens.json")},
		{"policies.files[0]", cfg.Policies.Files[0], filepath.Join(rel, "operator.rego")},
		{"policies.files[1] (absolute)", cfg.Policies.Files[1], "/abs/other.rego"},
		{"decision_log.path", cfg.DecisionLog.Path, filepath.Join(rel, "decisions", "log.jsonl")},
		{"mcp.handle_key_file", cfg.MCP.HandleKeyFile, filepath.Join("etc", "keys", "mcp.key")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}

	if err := os.WriteFile(file, []byte("decision_log:\n  path: \"-\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = loadConfig(file); err != nil {
		t.Fatal(err)
	}
	if cfg.DecisionLog.Path != "-" {
		t.Errorf("decision_log.path \"-\" became %q", cfg.DecisionLog.Path)
	}
}
