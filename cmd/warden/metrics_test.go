package main

import (
	"io"
	"net/http/httptest"
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
