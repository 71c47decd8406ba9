package proxy_test

import (
	"context"
	"encoding/base32"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a/tenancy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/mcp/tasks"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/macp"
	"github.com/agentwarden/warden/rules/mcp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestDecisionIDs: every way a decision is made (a MACP message, a refusal
// at a front door before authentication, an MCP and an A2A request) gives an
// id of 128 random bits: no two alike, none sharing a prefix or a counter
// with the others, so a client that collects ids (a 401 names one) learns
// nothing of other principals' traffic. The old ids were a per-process
// prefix and a base-36 counter ("1a2b3c4d-7", "1a2b3c4d-8"): they do not
// decode, and consecutive ones share their prefix.
func TestDecisionIDs(t *testing.T) {
	e := idsEnforcer(t)
	a2aDecider, mcpDecider := tenancy.New(e), tasks.New(e)
	macpDecider, err := sessions.New(e, sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bob := authn.Principal{ID: "bob", Method: string(authn.MethodDev)}
	mint := []struct {
		name string
		id   func() string
	}{
		{"macp", func() string {
			d, err := macpDecider.Enforce(ctx, sessions.Request{Credentials: authn.Credentials{Bearer: "agent://planner"}, Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "TaskUpdate", MessageId: "m", SessionId: "00000000-0000-4000-8000-000000000001", Sender: "agent://planner"}})
			if err != nil {
				t.Fatal(err)
			}
			d.Settle(false)
			return d.ID
		}},
		{"front door 401", func() string {
			return e.Refuse(context.Background(), "mcp", "", "", rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated}).ID
		}},
		{"mcp", func() string {
			d, err := mcpDecider.Enforce(ctx, tasks.Request{Principal: bob, Call: mcp.Call{Method: mcp.MethodGet}, TaskID: "t", Owner: true})
			if err != nil {
				t.Fatal(err)
			}
			d.Settle(false)
			return d.ID
		}},
		{"a2a", func() string {
			d, err := a2aDecider.Enforce(ctx, tenancy.Request{Principal: bob, Method: a2a.MethodGetTask, TaskID: "t", Owner: true})
			if err != nil {
				t.Fatal(err)
			}
			d.Settle(false)
			return d.ID
		}},
	}
	seen := map[string]string{}
	prefixes := map[string]int{}
	const rounds = 200
	for range rounds {
		for _, m := range mint {
			id := m.id()
			raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(id)
			if err != nil || len(raw) < 12 {
				t.Fatalf("%s: decision id %q is not 96+ random bits (%d bytes, %v)", m.name, id, len(raw), err)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("%s: decision id %q given twice (first by %s)", m.name, id, prev)
			}
			seen[id] = m.name
			prefixes[id[:4]]++
		}
	}
	// 800 ids of 20 random bits each in their first 4 characters: a shared
	// prefix more than a handful of times means the ids are not random.
	for p, n := range prefixes {
		if n > 5 {
			t.Errorf("%d of %d decision ids start with %q: not random", n, rounds*len(mint), p)
		}
	}
}

// idsEnforcer is an Enforcer with the dev authenticator and the default
// policies.
func idsEnforcer(t testing.TB) *proxy.Enforcer { return loggedEnforcer(t, nil) }
