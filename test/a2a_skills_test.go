package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestA2ASkillPolicy runs the example operator policy of deploy/policies
// (only these A2A skills) through bin/warden, as the A2A sidecar and as
// ext_authz, in front of the a2a-go v2.3.1 server: a message naming an
// allowed skill (params.message.metadata.skill) reaches the agent, one
// naming another skill or none is refused with the operator's message, at
// both doors, over SendMessage and SendStreamingMessage; another principal
// is not restricted. Before input.a2a the policy sees no skill and refuses
// nothing: the other skill and no skill reach the agent at both doors.
func TestA2ASkillPolicy(t *testing.T) {
	base := startA2AGo(t)
	policy := []string{"--policy", filepath.Join(repoRoot(t), "deploy/policies/a2a-skills.rego")}
	bot, ops := "agent://support-bot", "agent://ops"

	// The sidecar: tok-alice is agent://support-bot to Warden, tok-bob is
	// agent://ops; the server authenticates the same tokens itself.
	b, err := json.Marshal([]map[string]any{{"token": aliceToken, "sender": bot}, {"token": bobToken, "sender": ops}})
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, b, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	start(t, "warden", addr, nil, wardenBinary(t), append([]string{"serve", "--a2a-listen", addr, "--a2a-upstream", base + "/jsonrpc",
		"--plaintext", "--auth", "static", "--static-tokens", tokens}, policy...)...)
	sidecar := &a2aAttackEnv{url: "http://" + addr + "/jsonrpc"}
	token := map[string]string{bot: aliceToken, ops: bobToken}

	// ext_authz (dev authentication: the bearer is the principal): what
	// Warden allows goes to the server as Envoy would send it.
	check := extAuthzCheck(t, append([]string{"--extauthz-a2a", "--extauthz-a2a-path", "/jsonrpc"}, policy...)...)
	direct := &a2aAttackEnv{url: base + "/jsonrpc"}

	doors := map[string]func(t *testing.T, principal, method string, params map[string]any) *a2aAnswer{
		"sidecar": func(t *testing.T, principal, method string, params map[string]any) *a2aAnswer {
			return sidecar.call(t, token[principal], method, params)
		},
		"ext_authz": func(t *testing.T, principal, method string, params map[string]any) *a2aAnswer {
			body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
			if err != nil {
				t.Fatal(err)
			}
			resp := check("/jsonrpc", map[string]string{"authorization": "Bearer " + principal, "content-type": "application/json", "a2a-version": "1.0"}, string(body))
			if dr := resp.GetDeniedResponse(); dr != nil {
				a := &a2aAnswer{raw: dr.GetBody()}
				if err := json.Unmarshal([]byte(dr.GetBody()), a); err != nil {
					t.Fatalf("refusal %q: %v", dr.GetBody(), err)
				}
				return a
			}
			return direct.call(t, token[principal], method, params)
		},
	}
	refusal := "agent://support-bot may ask only for these skills: faq, weather"
	for name, send := range doors {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name, principal, method string
				metadata                map[string]any
				refused                 bool
			}{
				{"allowed skill", bot, "SendMessage", map[string]any{"skill": "weather"}, false},
				{"allowed skill, streaming", bot, "SendStreamingMessage", map[string]any{"skill": "faq"}, false},
				{"other skill", bot, "SendMessage", map[string]any{"skill": "admin"}, true},
				{"other skill, streaming", bot, "SendStreamingMessage", map[string]any{"skill": "admin"}, true},
				{"no skill", bot, "SendMessage", nil, true},
				{"unlisted principal", ops, "SendMessage", map[string]any{"skill": "admin"}, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					fields := map[string]any{}
					if tc.metadata != nil {
						fields["metadata"] = tc.metadata
					}
					a := send(t, tc.principal, tc.method, map[string]any{"message": a2aMessage("hello", fields)})
					switch {
					case tc.refused && (a.Error == nil || !strings.Contains(a.Error.Message, refusal)):
						t.Fatalf("want the operator's refusal %q, got %s", refusal, a)
					case !tc.refused && (a.Error != nil || a.Result == nil):
						t.Fatalf("want the agent's answer, got %s", a)
					}
				})
			}
		})
	}
}
