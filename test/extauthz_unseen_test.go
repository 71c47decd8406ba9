package test

import (
	"testing"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestExtAuthzUnseenCalls: bin/warden's ext_authz refuses the MACP calls
// whose rules it cannot apply (StreamSession: its envelopes are never shown,
// so the rules on Send could be walked around; ListSessions and the
// watches: their answers are never shown, so they cannot be filtered) with
// FORBIDDEN (PERMISSION_DENIED), and lets each kind through only with its
// flag. GetSession is decided on the sessions ext_authz keeps: an unknown
// session is SESSION_NOT_FOUND (NOT_FOUND), unless reads are opted in.
// Before, all were allowed once authenticated.
func TestExtAuthzUnseenCalls(t *testing.T) {
	runtime := startRuntime(t)
	def, _ := startExtAuthz(t, "warden", runtime)
	streams, _ := startExtAuthz(t, "warden-streams", runtime, "--extauthz-allow-stream-session")
	reads, _ := startExtAuthz(t, "warden-reads", runtime, "--extauthz-allow-unfiltered-reads")
	for _, tc := range []struct {
		method string
		optIn  checkClient
		other  checkClient
	}{
		{"StreamSession", streams, reads},
		{"ListSessions", reads, streams},
		{"WatchSessions", reads, streams},
		{"WatchSignals", reads, streams},
	} {
		t.Run(tc.method, func(t *testing.T) {
			msg := &macpv1.GetSessionRequest{SessionId: newSession()}
			for _, c := range []checkClient{def, tc.other} {
				if got := c.call(macpService+tc.method, "mallory", msg); got != "FORBIDDEN" {
					t.Errorf("%s: %s, want FORBIDDEN", c.name, got)
				}
			}
			if got := tc.optIn.call(macpService+tc.method, "mallory", msg); got != "allow" {
				t.Errorf("%s: %s, want allow", tc.optIn.name, got)
			}
		})
	}
	msg := &macpv1.GetSessionRequest{SessionId: newSession()}
	for _, c := range []checkClient{def, streams} {
		if got := c.call(macpService+"GetSession", "mallory", msg); got != "SESSION_NOT_FOUND" {
			t.Errorf("GetSession of an unknown session, %s: %s, want SESSION_NOT_FOUND", c.name, got)
		}
	}
	if got := reads.call(macpService+"GetSession", "mallory", msg); got != "allow" {
		t.Errorf("GetSession, %s: %s, want allow", reads.name, got)
	}
}
