package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
)

// scrape serves reg's /metrics the way the admin port does and returns the text.
func scrape(t *testing.T, a *admin) string {
	t.Helper()
	srv := httptest.NewServer(a.handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuthReasonLabel: an authentication refusal is counted with its cause
// in auth_reason; other decisions have none.
func TestAuthReasonLabel(t *testing.T) {
	reg := newRegistry()
	m := newMetrics(reg)
	m.Decided(proxy.Decision{Protocol: "mcp", Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, AuthReason: "audience"}, time.Millisecond)
	m.Decided(proxy.Decision{Protocol: "mcp", Allow: true, Reason: rules.ReasonAllowed, Type: "tools/call", Mode: "mcp"}, time.Millisecond)
	out := scrape(t, &admin{reg: reg, ready: func() error { return nil }})
	for _, want := range []string{
		`warden_decisions_total{auth_reason="audience",decision="deny",message_type="other",mode="",protocol="mcp",reason="unauthenticated"} 1`,
		`warden_decisions_total{auth_reason="",decision="allow",message_type="tools/call",mode="mcp",protocol="mcp",reason="allowed"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

// TestBuildAndReloadMetrics scrapes /metrics as Prometheus would:
// warden_build_info names the version and Go release, and each reload is
// counted by result, the last success's time kept (a failed reload leaves
// it). None of these series existed before.
func TestBuildAndReloadMetrics(t *testing.T) {
	cfgPath := write(t, "warden.yaml", "authn:\n  mode: dev\n  insecure: true\nextauthz:\n  listen: 127.0.0.1:0\n")
	p := buildFrom(t, cfgPath)
	clock := time.Unix(1_800_000_000, 0)
	p.metrics.now = func() time.Time { return clock }
	a := &admin{reg: p.reg, ready: func() error { return nil }}
	expect := func(lines ...string) {
		t.Helper()
		out := scrape(t, a)
		for _, l := range lines {
			if !strings.Contains(out, "\n"+l+"\n") {
				t.Errorf("no line %q in\n%s", l, out)
			}
		}
	}
	expect(`warden_build_info{goversion="`+runtime.Version()+`",version="`+versionString()+`"} 1`,
		`warden_reload_total{result="failure"} 0`, `warden_reload_total{result="success"} 0`)
	started := scrape(t, a)
	if !strings.Contains(started, "\nwarden_last_reload_success_timestamp_seconds ") || strings.Contains(started, "\nwarden_last_reload_success_timestamp_seconds 0\n") {
		t.Fatalf("no start-up load time:\n%s", started)
	}

	reloadFile := func(yaml string) {
		t.Helper()
		if err := writeTo(cfgPath, yaml); err != nil {
			t.Fatal(err)
		}
		_ = reload(context.Background(), cfgPath, func(*Config) {}, p, slog.New(slog.DiscardHandler))
	}
	reloadFile("authn:\n  mode: dev\n  insecure: true\nextauthz:\n  listen: 127.0.0.1:0\n")
	expect(`warden_reload_total{result="failure"} 0`, `warden_reload_total{result="success"} 1`, `warden_last_reload_success_timestamp_seconds 1.8e+09`)

	clock = clock.Add(time.Minute)
	reloadFile("authn:\n  mode: nonsense\n")
	expect(`warden_reload_total{result="failure"} 1`, `warden_reload_total{result="success"} 1`, `warden_last_reload_success_timestamp_seconds 1.8e+09`)
}
