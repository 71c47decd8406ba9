package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentwarden/warden/internal/testcerts"
	jose "github.com/go-jose/go-jose/v4"
)

// files writes every kind of file a configuration can name into a temporary
// directory and returns the directory.
func files(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	put := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	crt, key := testcerts.Server(t, "localhost")
	put("tls.crt", testcerts.PEM(crt))
	put("tls.key", testcerts.KeyPEM(t, key))
	put("ca.pem", testcerts.PEM(crt))
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: "k1", Algorithm: "EdDSA", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	put("jwks.json", []byte(`{"keys": [`+string(jwk)+`]}`))
	put("tokens.json", []byte(`[{"token": "tok-a", "sender": "agent://a"}]`))
	put("upstream-tokens.json", []byte(`[{"token": "up-a", "sender": "spiffe://example.org/a"}]`))
	put("mcp.key", []byte(strings.Repeat("k", 32)))
	put("short.key", []byte(strings.Repeat("k", 31)))
	put("ring.key", []byte(`{"keys": [{"id": "2", "secret": "`+strings.Repeat("2", 32)+`"}, {"id": "1", "secret": "`+strings.Repeat("1", 32)+`"}]}`))
	put("dupring.key", []byte(`{"keys": [{"id": "1", "secret": "`+strings.Repeat("2", 32)+`"}, {"id": "1", "secret": "`+strings.Repeat("1", 32)+`"}]}`))
	put("operator.rego", []byte("package warden.macp\nimport rego.v1\ndeny contains \"no mallory\" if input.principal.id == \"mallory\"\n"))
	put("foo.rego", []byte("package foo\nimport rego.v1\ndeny contains \"everything\" if { true }\n"))
	put("garbage.pem", []byte("not PEM\n"))
	return dir
}

// TestCheckConfig: warden check --config refuses exactly what serve refuses,
// in every section and for every file the configuration names.
func TestCheckConfig(t *testing.T) {
	dir := files(t)
	const dev = "authn:\n  mode: dev\n  insecure: true\n"
	const macpPlain = "macp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n  upstream_plaintext: true\n"
	const mcpPlain = "mcp:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:1/mcp\n  plaintext: true\n"
	const ext = "extauthz:\n  listen: 127.0.0.1:0\n"
	const a2aPlain = "a2a:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:1/jsonrpc\n  plaintext: true\n"
	for _, tc := range []struct {
		name, yaml string
		err        string // "" when valid
	}{
		{"macp sidecar", dev + macpPlain, ""},
		{"mcp sidecar", dev + mcpPlain + "  handle_key_file: D/mcp.key\n", ""},
		{"mcp sidecar with a handle keyring", dev + mcpPlain + "  handle_key_file: D/ring.key\n", ""},
		{"ext_authz", dev + ext + "  mcp: true\n", ""},
		{"ext_authz replicas on redis", dev + ext + "state:\n  url: redis://127.0.0.1:6379/0\n", ""},
		{"a2a sidecar", dev + a2aPlain + "  handle_key_file: D/mcp.key\n  webhook_allow: [10.1.0.0/16, hooks.internal]\n", ""},
		{"a2a missing handle key", dev + a2aPlain + "  handle_key_file: D/none.key\n", "a2a.handle_key_file"},
		{"a2a bad webhook allowlist", dev + a2aPlain + "  webhook_allow: [\"http://x/\"]\n", "a2a.webhook_allow"},
		{"a2a allow-only without a list", dev + a2aPlain + "  webhook_allow_only: true\n", "a2a.webhook_allow_only"},
		{"a2a push relay listen", dev + a2aPlain + "  push_relay:\n    listen: nowhere\n", "a2a.push_relay.listen"},
		{"a2a push relay url", dev + a2aPlain + "  push_relay:\n    url: ftp://x/\n", "a2a.push_relay.url"},
		{"a2a push relay", dev + a2aPlain + "  webhook_allow: [hooks.internal]\n  webhook_allow_only: true\n  push_relay:\n    listen: 127.0.0.1:0\n    url: http://warden.internal:9099\n    timeout: 5s\n", ""},
		{"a2a upstream not http", dev + "a2a:\n  listen: 127.0.0.1:0\n  upstream: grpc://x\n  plaintext: true\n", "a2a.upstream"},
		{"all three with files", "authn:\n  mode: [jwt, static, mtls]\n  jwt:\n    jwks_file: D/jwks.json\n    issuer: i\n    audience: a\n  static:\n    tokens_file: D/tokens.json\n" +
			"macp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  cert_file: D/tls.crt\n  key_file: D/tls.key\n  client_ca_file: D/ca.pem\n  upstream_ca_file: D/ca.pem\n  upstream_tokens_file: D/upstream-tokens.json\n" +
			"mcp:\n  listen: 127.0.0.1:0\n  upstream: https://127.0.0.1:1/mcp\n  cert_file: D/tls.crt\n  key_file: D/tls.key\n  handle_key_file: D/mcp.key\n" +
			ext + "  upstream_tokens_file: D/upstream-tokens.json\npolicies:\n  files: [D/operator.rego]\n", ""},

		{"no authentication", macpPlain, "choose an authentication method"},
		{"nothing to serve", dev, "nothing to serve"},
		{"missing static tokens file", "authn:\n  mode: static\n  static:\n    tokens_file: D/none.json\n" + macpPlain, "static.tokens_file"},
		{"missing JWKS file", "authn:\n  mode: jwt\n  jwt:\n    jwks_file: D/none.json\n    issuer: i\n    audience: a\n" + macpPlain, "jwt.jwks_file"},
		{"handle key under 32 bytes", dev + mcpPlain + "  handle_key_file: D/short.key\n", "31 bytes, need at least 32"},
		{"missing handle key", dev + mcpPlain + "  handle_key_file: D/none.key\n", "mcp.handle_key_file"},
		{"handle keyring with an id twice", dev + mcpPlain + "  handle_key_file: D/dupring.key\n", `id "1" listed twice`},
		{"macp without upstream", dev + "macp:\n  listen: 127.0.0.1:0\n  plaintext: true\n", "macp.upstream: required"},
		{"macp without TLS", dev + "macp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  upstream_plaintext: true\n", "cert_file and key_file are required"},
		{"macp missing certificate", dev + "macp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  upstream_plaintext: true\n  cert_file: D/none.crt\n  key_file: D/tls.key\n", "macp tls"},
		{"macp client CA not PEM", dev + "macp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  upstream_plaintext: true\n  cert_file: D/tls.crt\n  key_file: D/tls.key\n  client_ca_file: D/garbage.pem\n", "holds no PEM certificate"},
		{"macp missing upstream CA", dev + "macp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n  upstream_ca_file: D/none.pem\n", "macp upstream tls"},
		{"macp missing upstream tokens", dev + macpPlain + "  upstream_tokens_file: D/none.json\n", "macp.upstream_tokens_file"},
		{"macp negative limit", dev + macpPlain + "  credential_check: -1s\n", "macp.credential_check: negative"},
		{"macp streams above the pool", dev + macpPlain + "  streams:\n    max: 800\n", "macp.streams: max 800 is above 700"},
		{"macp negative streams", dev + macpPlain + "  streams:\n    per_principal: -1\n", "macp.streams: negative"},
		{"macp negative queued bytes", dev + macpPlain + "  streams:\n    queued_bytes: -1\n", "macp.streams: negative"},
		{"mcp missing certificate", dev + "mcp:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:1/mcp\n  cert_file: D/tls.crt\n  key_file: D/none.key\n", "mcp tls"},
		{"mcp bad upstream", dev + "mcp:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\n  plaintext: true\n", "is not an http(s) URL"},
		{"ext_authz negative unconfirmed starts", dev + ext + "  max_unconfirmed_starts: -1\n", "extauthz.max_unconfirmed_starts: negative"},
		{"ext_authz missing upstream tokens", dev + ext + "  upstream_tokens_file: D/none.json\n", "extauthz.upstream_tokens_file"},
		{"ext_authz rebuild upstream CA missing", dev + ext + "macp:\n  upstream: 127.0.0.1:1\n  upstream_ca_file: D/none.pem\n", "macp upstream tls"},
		{"missing policy file", dev + macpPlain + "policies:\n  files: [D/none.rego]\n", "read policy file"},
		{"policy in the wrong package", dev + macpPlain + "policies:\n  files: [D/foo.rego]\n", "package foo is not consulted"},
		{"bad log level", dev + macpPlain + "log:\n  level: loud\n", "log.level"},
		{"bad admin address", dev + macpPlain + "admin:\n  listen: 9090\n", "admin.listen"},
		{"bad tracing endpoint", dev + macpPlain + "tracing:\n  otlp_endpoint: collector\n", "tracing.otlp_endpoint"},
		{"state not a redis URL", dev + macpPlain + "state:\n  url: http://127.0.0.1:6379\n", "state.url"},
		{"state ttl too short", dev + macpPlain + "state:\n  url: redis://127.0.0.1:6379/0\n  ttl: 10ms\n", "state.ttl"},
		{"state shared by the sidecar and ext_authz", dev + macpPlain + ext + "state:\n  url: redis://127.0.0.1:6379/0\n", "run the sidecar (one per runtime instance) and the ext_authz fleet as separate processes"},
		{"decision log inputs sampled", dev + macpPlain + "decision_log:\n  path: D/out.log\n  include_input: true\n  sample_allowed: 0.5\n", "decision_log.include_input needs every decision recorded"},
		{"state unknown key", dev + macpPlain + "state:\n  addr: 127.0.0.1:6379\n", "field addr not found"},
		{"decision log shipped", dev + macpPlain + "decision_log:\n  service:\n    url: https://logs.example/opa\n    bearer_token_file: D/mcp.key\n    ca_file: D/ca.pem\n    headers: {X-Tenant: blue}\n", ""},
		{"decision log service not a URL", dev + macpPlain + "decision_log:\n  service:\n    url: logs.example\n", "decision_log.service.url"},
		{"decision log service buffer under a batch", dev + macpPlain + "decision_log:\n  service:\n    url: http://logs\n    batch_bytes: 65536\n    buffer_bytes: 4096\n", "decision_log.service.buffer_bytes"},
		{"decision log service token missing", dev + macpPlain + "decision_log:\n  service:\n    url: http://logs\n    bearer_token_file: D/none\n", "decision_log.service.bearer_token_file"},
		{"decision log service CA not PEM", dev + macpPlain + "decision_log:\n  service:\n    url: https://logs\n    ca_file: D/garbage.pem\n", "decision_log.service.ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := write(t, "warden.yaml", strings.ReplaceAll(tc.yaml, "D/", dir+"/"))
			code, out, errOut := runCmd(t, "check", "--config", cfg)
			if tc.err == "" {
				if code != 0 || !strings.Contains(out, "config: ok") || !strings.Contains(out, "serves:") {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
				return
			}
			if code != 1 || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tc.err)
			}
			// serve refuses the same configuration before serving anything.
			code, _, serveErr := runCmd(t, "serve", "--config", cfg)
			if code != 1 || !strings.Contains(serveErr, tc.err) {
				t.Fatalf("serve: exit %d, stderr %q, want %q", code, serveErr, tc.err)
			}
		})
	}
}

// TestCheckPolicyPackages: check names the package each operator file
// extends and refuses one outside warden.macp / warden.mcp.
func TestCheckPolicyPackages(t *testing.T) {
	dir := files(t)
	sub := write(t, "limits.rego", "package warden.mcp.limits\nimport rego.v1\nmax := 3\n")
	test := write(t, "extra_test.rego", "package warden.extra_test\nimport rego.v1\ntest_ok if true\n")
	code, out, errOut := runCmd(t, "check", "--policy", dir+"/operator.rego", "--policy", sub, "--policy", test)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		dir + "/operator.rego: extends warden.macp\n",
		sub + ": extends warden.mcp.limits (a sub-package",
		test + ": tests, package warden.extra_test\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCmd(t, "check", "--policy", dir+"/foo.rego")
	if code != 1 || !strings.Contains(errOut, "package foo is not consulted by any decision") || strings.Contains(out, "compiled") {
		t.Fatalf("wrong package: exit %d\n%s%s", code, out, errOut)
	}
	// replay refuses it too, instead of accepting every message.
	code, _, errOut = runCmd(t, "replay", "--policy", dir+"/foo.rego", "../../testdata/macp/conformance/task_happy_path.json")
	if code != 1 || !strings.Contains(errOut, "package foo") {
		t.Fatalf("replay: exit %d %q", code, errOut)
	}
}

// TestCheckExamplePolicies runs `warden check` on every example policy of
// deploy/policies with its Rego tests: they compile together with the
// embedded defaults, and every test passes (a test file's rules fail
// without the policy it tests, so they are run, not skipped).
func TestCheckExamplePolicies(t *testing.T) {
	files, err := filepath.Glob("../../deploy/policies/*.rego")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example policies: %v", err)
	}
	var args, tests []string
	for _, f := range files {
		args = append(args, "--policy", f)
		if strings.HasSuffix(f, "_test.rego") {
			tests = append(tests, "--policy", f)
		}
	}
	code, out, errOut := runCmd(t, append([]string{"check"}, args...)...)
	if code != 0 || !strings.Contains(out, " 0 failing") || strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "input.mcp.arguments") || !strings.Contains(out, "input.mcp.tool") || !strings.Contains(out, "input.a2a.skill") ||
		!strings.Contains(out, "input.macp.payload") || !strings.Contains(out, "input.time.now_ns") || !strings.Contains(out, "memoization: on") {
		t.Fatalf("the memo is not keyed on what the examples read:\n%s", out)
	}
	if code, out, _ := runCmd(t, append([]string{"check"}, tests...)...); code == 0 {
		t.Fatalf("the example tests pass without their policies:\n%s", out)
	}
}

// TestCheckTrustDomains: warden check says which CA may issue which trust
// domain's SPIFFE IDs (authn.mtls.trust_domain_ca_files), or that one
// bundle issues every domain; serve refuses a bundle it cannot read.
func TestCheckTrustDomains(t *testing.T) {
	dir := files(t)
	const mcpTLS = "mcp:\n  listen: 127.0.0.1:0\n  upstream: http://127.0.0.1:1/mcp\n  cert_file: D/tls.crt\n  key_file: D/tls.key\n  client_ca_file: D/ca.pem\n  handle_key_file: D/mcp.key\n"
	for _, tc := range []struct {
		name, authn string
		out, err    string
	}{
		{"bound", "authn:\n  mode: mtls\n  mtls:\n    trust_domain_ca_files:\n      a.example: D/ca.pem\n", "mtls: SPIFFE IDs issued per trust domain (a.example by " + dir + "/ca.pem); any other trust domain is refused", ""},
		{"one bundle", "authn:\n  mode: mtls\n", "mtls: any CA the client CA bundle (or Envoy) trusts may issue a SPIFFE ID in any trust domain", ""},
		{"a bundle missing", "authn:\n  mode: mtls\n  mtls:\n    trust_domain_ca_files:\n      a.example: D/none.pem\n", "", "mtls.trust_domain_ca_files"},
		{"not a trust domain", "authn:\n  mode: mtls\n  mtls:\n    trust_domain_ca_files:\n      A.example: D/ca.pem\n", "", "mtls.trust_domain_ca_files"},
		{"without mtls", "authn:\n  mode: dev\n  insecure: true\n  mtls:\n    trust_domain_ca_files:\n      a.example: D/ca.pem\n", "", "set, but mode has no mtls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := write(t, "warden.yaml", strings.ReplaceAll(tc.authn+mcpTLS, "D/", dir+"/"))
			code, out, errOut := runCmd(t, "check", "--config", cfg)
			if tc.err != "" {
				if code != 1 || !strings.Contains(errOut, tc.err) {
					t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tc.err)
				}
				return
			}
			if code != 0 || !strings.Contains(out, tc.out) {
				t.Fatalf("exit %d\n%s%s\nwant %q", code, out, errOut, tc.out)
			}
		})
	}
}
