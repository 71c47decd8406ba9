package tenancy

import (
	"context"
	"strings"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/proxytest"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// TestEnforceA2AInput decides A2A messages through the Enforcer with the
// example operator policy of deploy/policies (only these A2A skills) and a
// policy on part kinds and metadata: what a message carries reaches the
// operator policy (input.a2a), and metadata over the bounds, or with names
// a server could read otherwise, is refused before it. On the old code
// input.a2a does not exist (Request.Content neither): no row is refused.
func TestEnforceA2AInput(t *testing.T) {
	ctx := context.Background()
	extra := proxytest.WriteRego(t, "parts.rego", `package warden.a2a
import rego.v1
deny contains {"code": "FORBIDDEN", "msg": "no files from ops"} if {
	input.principal.id == "agent://ops"
	"file" in input.a2a.parts
}
deny contains {"code": "FORBIDDEN", "msg": "no urgent messages"} if input.a2a.metadata.priority == "urgent"
`)
	eng, err := policies.New(ctx, policies.Config{Files: []string{"../../../deploy/policies/a2a-skills.rego", extra}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := eng.Memoized(); !ok {
		t.Fatalf("not memoized: %s", why)
	}
	e := newDecider(t)
	e.e.Swap(devAuth(t), eng)

	deep := strings.Repeat(`{"a":`, jsonrpc.MaxPolicyDepth) + `1` + strings.Repeat(`}`, jsonrpc.MaxPolicyDepth)
	big := `"` + strings.Repeat("x", jsonrpc.MaxPolicyBytes) + `"`
	bot, ops := "agent://support-bot", "agent://ops"
	const skillsMsg = "agent://support-bot may ask only for these skills: faq, weather"
	text := `"parts":[{"text":"hi"}]`
	for _, tc := range []struct {
		name, principal, method, message string
		reason                           rules.Reason
		detail                           string // in the refusal's detail
	}{
		{"allowed skill", bot, a2a.MethodSend, `"metadata":{"skill":"weather"},` + text, "", ""},
		{"allowed skill, streaming", bot, a2a.MethodSendStreaming, `"metadata":{"skill":"faq"},` + text, "", ""},
		{"other skill", bot, a2a.MethodSend, `"metadata":{"skill":"admin"},` + text, rules.ReasonOperatorPolicy, skillsMsg},
		{"other skill, streaming", bot, a2a.MethodSendStreaming, `"metadata":{"skill":"admin"},` + text, rules.ReasonOperatorPolicy, skillsMsg},
		{"no skill", bot, a2a.MethodSend, text, rules.ReasonOperatorPolicy, skillsMsg},
		{"skill elsewhere in metadata", bot, a2a.MethodSend, `"metadata":{"x":{"skill":"weather"}},` + text, rules.ReasonOperatorPolicy, skillsMsg},
		{"unlisted principal", ops, a2a.MethodSend, `"metadata":{"skill":"admin"},` + text, "", ""},
		{"file part", ops, a2a.MethodSend, `"parts":[{"text":"hi"},{"url":"http://x/f"}]`, rules.ReasonOperatorPolicy, "no files from ops"},
		{"raw part", ops, a2a.MethodSend, `"parts":[{"raw":"AA=="}]`, rules.ReasonOperatorPolicy, "no files from ops"},
		{"data part", ops, a2a.MethodSend, `"parts":[{"data":{"a":1}}]`, "", ""},
		{"metadata member", ops, a2a.MethodSend, `"metadata":{"priority":"urgent"},` + text, rules.ReasonOperatorPolicy, "no urgent messages"},
		{"metadata at the depth limit", ops, a2a.MethodSend, `"metadata":{"d":` + strings.Repeat(`[`, jsonrpc.MaxPolicyDepth-1) + strings.Repeat(`]`, jsonrpc.MaxPolicyDepth-1) + `},` + text, "", ""},
		{"metadata too deep", ops, a2a.MethodSend, `"metadata":{"d":` + deep + `},` + text, rules.ReasonArgumentsTooLarge, "params.message.metadata nested deeper than the limit of 16"},
		{"metadata too large", ops, a2a.MethodSend, `"metadata":{"d":` + big + `},` + text, rules.ReasonArgumentsTooLarge, "params.message.metadata of"},
		{"metadata member twice", ops, a2a.MethodSend, `"metadata":{"x":{"priority":"urgent","priority":"low"}},` + text, rules.ReasonMalformedRequest, "given twice"},
		{"metadata members folding alike", ops, a2a.MethodSend, `"metadata":{"x":{"priority":"low","PRIORITY":"urgent"}},` + text, rules.ReasonMalformedRequest, "differ only in case"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a2a.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":{"message":{"messageId":"m","role":"ROLE_USER",` + tc.message + `}}}`))
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Enforce(ctx, Request{Principal: authn.Principal{ID: tc.principal, Method: "dev"}, Method: c.Method, New: true, Content: c.Content})
			if err != nil {
				t.Fatal(err)
			}
			d.Settle(d.Allow)
			if d.Allow != (tc.reason == "") || (!d.Allow && d.Reason != tc.reason) || !strings.Contains(d.Message, tc.detail) {
				t.Fatalf("allow=%v reason=%q detail=%q, want reason %q detail %q", d.Allow, d.Reason, d.Message, tc.reason, tc.detail)
			}
		})
	}
}
