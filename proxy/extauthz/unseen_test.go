package extauthz

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/code"

	"github.com/agentwarden/warden/rules"
)

// TestUnseenCalls: a MACP call whose rule ext_authz cannot apply, because
// what the rule decides on never reaches Check, is refused by default with
// PERMISSION_DENIED naming the setting, and let through after
// authentication only when the operator opts in (the other opt-in does not
// let it through). StreamSession would walk around every rule on Send (its
// envelopes are never shown); the session reads would show every session
// (their answers are never shown). Before, all five were allowed once
// authenticated.
func TestUnseenCalls(t *testing.T) {
	ctx := context.Background()
	streams := Config{Listen: "unused", AllowStreamSession: true}
	reads := Config{Listen: "unused", AllowUnfilteredReads: true}
	tests := []struct {
		method, key  string
		optIn, other Config
	}{
		{"StreamSession", "extauthz.allow_stream_session", streams, reads},
		{"GetSession", "extauthz.allow_unfiltered_reads", reads, streams},
		{"ListSessions", "extauthz.allow_unfiltered_reads", reads, streams},
		{"WatchSessions", "extauthz.allow_unfiltered_reads", reads, streams},
		{"WatchSignals", "extauthz.allow_unfiltered_reads", reads, streams},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			for _, cfg := range []Config{{Listen: "unused"}, tc.other} {
				resp, err := newServer(t, cfg).Check(ctx, checkRequest(service+tc.method, "alice", frame(nil)))
				if err != nil {
					t.Fatal(err)
				}
				d := decision(resp)
				if d.Allow || code.Code(resp.GetStatus().GetCode()) != code.Code_PERMISSION_DENIED || d.Code != rules.CodeForbidden {
					t.Fatalf("allow_stream_session=%v allow_unfiltered_reads=%v: allow=%v status %v code %q, want PERMISSION_DENIED FORBIDDEN", cfg.AllowStreamSession, cfg.AllowUnfilteredReads, d.Allow, resp.GetStatus().GetCode(), d.Code)
				}
				if !strings.Contains(d.Message, tc.key) || !strings.Contains(d.Message, "warden decision ") {
					t.Errorf("message %q names neither %s nor the decision", d.Message, tc.key)
				}
			}
			resp, err := newServer(t, tc.optIn).Check(ctx, checkRequest(service+tc.method, "alice", frame(nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !decision(resp).Allow {
				t.Fatalf("with %s: %s", tc.key, resp.GetStatus().GetMessage())
			}
			// still authenticated first
			resp, err = newServer(t, tc.optIn).Check(ctx, checkRequest(service+tc.method, "", frame(nil)))
			if err != nil {
				t.Fatal(err)
			}
			if d := decision(resp); d.Allow || d.Code != rules.CodeUnauthenticated {
				t.Fatalf("with %s, no credentials: allow=%v code %q", tc.key, d.Allow, d.Code)
			}
		})
	}
}
