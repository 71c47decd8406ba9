package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/owners"
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
	fixture := "../../testdata/macp/conformance/task_happy_path.json"
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
	// authn.insecure is dev mode's switch, not a plain-http JWKS's.
	cfg = write(t, "warden.yaml", "authn:\n  mode: jwt\n  insecure: true\n  jwt:\n    jwks_url: http://auth.example/jwks.json\n    issuer: https://auth.example\n    audience: warden\nextauthz:\n  listen: 127.0.0.1:0\n")
	code, _, errOut = runCmd(t, "check", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "authn: jwt.jwks_url: plain http") || !strings.Contains(errOut, "use https, or jwt.jwks_file") {
		t.Fatalf("plain-http jwks with insecure: exit %d, stderr %q", code, errOut)
	}
	cfg = write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nenforcer:\n  sessions: 10\nextauthz:\n  listen: 127.0.0.1:0\n")
	if code, out, errOut := runCmd(t, "check", "--config", cfg); code != 0 || !strings.Contains(out, "pipelining: up to 16 ") {
		t.Fatalf("valid config: exit %d\n%s%s", code, out, errOut)
	}
	cfg = write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nenforcer:\n  pipeline_depth: 0\nextauthz:\n  listen: 127.0.0.1:0\n")
	if code, out, errOut := runCmd(t, "check", "--config", cfg); code != 0 || !strings.Contains(out, "pipelining: off (pipeline_depth 0)") {
		t.Fatalf("serial config: exit %d\n%s%s", code, out, errOut)
	}
	cfg = write(t, "warden.yaml", "enforcer:\n  pipeline_depth: -1\n")
	if code, _, errOut := runCmd(t, "check", "--config", cfg); code != 1 || !strings.Contains(errOut, "pipeline_depth: -1 is outside 0..1024") {
		t.Fatalf("negative depth: exit %d, stderr %q", code, errOut)
	}
}

// TestCLI: -h exits 0 everywhere and prints to stdout; a bad flag or
// command prints one error line and a pointer to -h, exit 2.
func TestCLI(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stdout  []string // substrings
		stderr  string   // exact, when not ""
		noUsage bool     // stdout must stay empty
	}{
		{name: "warden -h", args: []string{"-h"}, stdout: []string{"MACP sidecar", "MCP sidecar", "ext_authz", "\n  serve ", "\n  check ", "\n  replay ", "\n  version "}},
		{name: "warden --help", args: []string{"--help"}, stdout: []string{"MCP sidecar"}},
		{name: "warden help", args: []string{"help"}, stdout: []string{"MCP sidecar"}},
		{name: "serve -h", args: []string{"serve", "-h"}, stdout: []string{"usage: warden serve", "MCP sidecar", "-mcp-upstream", "-extauthz-listen"}},
		{name: "serve --help", args: []string{"serve", "--help"}, stdout: []string{"usage: warden serve"}},
		{name: "check -h", args: []string{"check", "-h"}, stdout: []string{"usage: warden check", "-config"}},
		{name: "replay -h", args: []string{"replay", "-h"}, stdout: []string{"usage: warden replay", "-json"}},
		{name: "version -h", args: []string{"version", "-h"}, stdout: []string{"usage: warden version\n"}},
		{name: "bad flag value", args: []string{"serve", "--sessions", "many"}, code: 2, noUsage: true,
			stderr: "warden serve: invalid value \"many\" for flag -sessions: parse error\nRun 'warden serve -h' for usage.\n"},
		{name: "unknown flag", args: []string{"serve", "--frob"}, code: 2, noUsage: true,
			stderr: "warden serve: flag provided but not defined: -frob\nRun 'warden serve -h' for usage.\n"},
		{name: "check unknown flag", args: []string{"check", "--polcy", "x.rego"}, code: 2, noUsage: true,
			stderr: "warden check: flag provided but not defined: -polcy\nRun 'warden check -h' for usage.\n"},
		{name: "serve stray argument", args: []string{"serve", "warden.yaml"}, code: 2, noUsage: true,
			stderr: "warden serve: unexpected argument \"warden.yaml\"\nRun 'warden serve -h' for usage.\n"},
		{name: "replay without files", args: []string{"replay"}, code: 2, noUsage: true,
			stderr: "warden replay: no transcript files given\nRun 'warden replay -h' for usage.\n"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, noUsage: true,
			stderr: "warden: unknown command \"frobnicate\"\nRun 'warden -h' for usage.\n"},
		{name: "version", args: []string{"version"}, stdout: []string{"warden "}},
		{name: "serve refuses", args: []string{"serve", "--auth", "dev"}, code: 1, noUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			if tc.stderr != "" && errOut != tc.stderr {
				t.Errorf("stderr %q, want %q", errOut, tc.stderr)
			}
			if tc.noUsage && (out != "" || strings.Contains(errOut, "-admin-listen") || strings.Count(errOut, "\n") > 2) {
				t.Errorf("usage printed:\nstdout %q\nstderr %q", out, errOut)
			}
			if tc.code == 0 && errOut != "" {
				t.Errorf("stderr %q", errOut)
			}
		})
	}
	// The usage lists each mode and each command on one line.
	_, out, _ := runCmd(t, "-h")
	for _, want := range []string{"--macp-listen ADDR --macp-upstream RUNTIME", "--mcp-listen ADDR --mcp-upstream URL", "--extauthz-listen ADDR"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("usage names %q %d times", want, strings.Count(out, want))
		}
	}
}

func TestLimitsConfig(t *testing.T) {
	for _, tc := range []struct {
		name          string
		yaml          string
		flags         listener.Limits
		macp, mcp, ex listener.Limits // the fields compared: header, idle, max connections
		err           string
	}{
		{name: "none", yaml: "", macp: listener.Limits{}, mcp: listener.Limits{}, ex: listener.Limits{}},
		{name: "top level for every listener",
			yaml: "limits:\n  header_timeout: 5s\n  max_connections: 100\n",
			macp: listener.Limits{HeaderTimeout: 5 * time.Second, MaxConnections: 100},
			mcp:  listener.Limits{HeaderTimeout: 5 * time.Second, MaxConnections: 100},
			ex:   listener.Limits{HeaderTimeout: 5 * time.Second, MaxConnections: 100}},
		{name: "a listener's own keys win",
			yaml: "limits:\n  header_timeout: 5s\n  idle_timeout: 30s\nmcp:\n  limits:\n    idle_timeout: 10m\n",
			macp: listener.Limits{HeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second},
			mcp:  listener.Limits{HeaderTimeout: 5 * time.Second, IdleTimeout: 10 * time.Minute},
			ex:   listener.Limits{HeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second}},
		{name: "flags win over both",
			yaml:  "limits:\n  header_timeout: 5s\nmacp:\n  limits:\n    header_timeout: 7s\n",
			flags: listener.Limits{HeaderTimeout: time.Second},
			macp:  listener.Limits{HeaderTimeout: time.Second},
			mcp:   listener.Limits{HeaderTimeout: time.Second},
			ex:    listener.Limits{HeaderTimeout: time.Second}},
		{name: "negative", yaml: "extauthz:\n  limits:\n    idle_timeout: -1s\n", err: "extauthz.limits: idle_timeout: negative"},
		{name: "unknown key", yaml: "limits:\n  idle: 1s\n", err: "field idle not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(write(t, "warden.yaml", tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg.inheritLimits(tc.flags)
			pick := func(l listener.Limits) listener.Limits {
				return listener.Limits{HeaderTimeout: l.HeaderTimeout, IdleTimeout: l.IdleTimeout, MaxConnections: l.MaxConnections}
			}
			if pick(cfg.MACP.Limits) != tc.macp || pick(cfg.MCP.Limits) != tc.mcp || pick(cfg.ExtAuthz.Limits) != tc.ex {
				t.Errorf("macp %+v\nmcp %+v\nextauthz %+v", cfg.MACP.Limits, cfg.MCP.Limits, cfg.ExtAuthz.Limits)
			}
		})
	}
}

func writeTo(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// TestEventMetrics: upstream failures, rebuilds, shared-session conflicts
// and share drops are counted, through the observer chain the Enforcer is
// given (share drops: every table and store at 0 from the start).
func TestEventMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var o proxy.Observer = observers{newMetrics(reg)}
	e, ok := o.(proxy.EventObserver)
	if !ok {
		t.Fatal("the observer chain does not count events")
	}
	e.UpstreamFailed("macp")
	e.UpstreamFailed("mcp")
	e.UpstreamFailed("a2a")
	e.UpstreamFailed("weird")
	e.Rebuilt(true)
	e.Rebuilt(false)
	e.Rebuilt(false)
	o.(sessions.ConflictObserver).SessionConflict()
	o.(owners.ShareObserver).ShareDropped(owners.TableOwners, owners.StoreRedis, 3)
	o.(owners.ShareObserver).ShareDropped(owners.TableOwners, owners.StoreRedis, 2)
	o.(owners.ShareObserver).ShareDropped(owners.TableTools, owners.StoreMemory, 1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"warden_upstream_errors_total,macp": 1, "warden_upstream_errors_total,mcp": 1, "warden_upstream_errors_total,a2a": 1, "warden_upstream_errors_total,other": 1,
		"warden_rebuilds_total,ok": 1, "warden_rebuilds_total,failed": 2, "warden_state_conflicts_total": 1,
		"warden_share_drops_total,redis,owners": 5, "warden_share_drops_total,memory,tools": 1, "warden_share_drops_total,redis,macp_sessions": 0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// TestA2ALabels: A2A decisions keep their mode and method as metric labels
// (closed sets), anything else reads "other".
func TestA2ALabels(t *testing.T) {
	l := newLabelSets()
	for _, tc := range []struct {
		set     map[string]bool
		v, want string
	}{
		{l.modes, "a2a", "a2a"},
		{l.types, "GetTask", "GetTask"},
		{l.types, "SendMessage:continue", "SendMessage:continue"},
		{l.types, "message/send", "other"},
	} {
		if got := label(tc.set, tc.v); got != tc.want {
			t.Errorf("label(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
