package test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestMACPUnlistedRuntimeMethods holds the allow-list to the runtime's
// methods Warden knows: macp-runtime 0.13.0 also serves WhatIfReplay (a
// session's history replayed under a candidate policy, authorized as
// GetSession, so an observer reads it), GetDecisionReceipt (a session's
// receipt) and GetReceiptKeys, which Warden neither decides nor filters.
// Through Warden each is UNIMPLEMENTED on both MACP sidecar doors, for a
// participant and an outsider alike, whatever the runtime answers alone.
func TestMACPUnlistedRuntimeMethods(t *testing.T) { eachTransport(t, testMACPUnlistedRuntimeMethods) }

func testMACPUnlistedRuntimeMethods(t *testing.T) {
	runtime := startRuntime(t)
	direct, warden := dialMACP(t, runtime), dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth"))
	s := failedTask(direct)
	// each request's field 1 is the session id, as GetSessionRequest's
	for _, m := range []string{"WhatIfReplay", "GetDecisionReceipt", "GetReceiptKeys"} {
		for _, who := range []string{"planner", "outsider"} {
			path := "/macp.v1.MACPRuntimeService/" + m
			ctx, cancel := as(who)
			var out macpv1.GetSessionResponse
			err := direct.conn.Invoke(ctx, path, &macpv1.GetSessionRequest{SessionId: s}, &out)
			t.Logf("runtime alone, %s as %s: %v", m, who, err)
			err = warden.conn.Invoke(ctx, path, &macpv1.GetSessionRequest{SessionId: s}, &out)
			cancel()
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("through Warden, %s as %s: %v, want UNIMPLEMENTED", m, who, err)
			}
		}
	}
}
