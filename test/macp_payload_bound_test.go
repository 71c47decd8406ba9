package test

import (
	"bytes"
	"testing"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPPayloadBound: macp-runtime 0.13.0 refuses an envelope whose
// payload is over MACP_MAX_PAYLOAD_BYTES (1 MiB by default)
// PAYLOAD_TOO_LARGE, while Warden's messages may be up to
// macp.max_message_bytes (4 MiB, and Envoy's max_request_bytes in
// deploy/envoy/macp.yaml). ext_authz commits what it allows: the
// assignee's TaskComplete with an output of 1 MiB and one byte was allowed
// and committed as completed while the runtime refused it, and its honest
// completion after was refused (FORBIDDEN) though the runtime accepts it.
// Each row on the runtime alone and through every door.
func TestMACPPayloadBound(t *testing.T) {
	runtimeAddr := startRuntime(t)
	runtime := dialMACP(t, runtimeAddr)
	complete := func(sid string, n int) *macpv1.Envelope {
		return envelope("worker", sid, "TaskComplete", "", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker", Output: bytes.Repeat([]byte("x"), n)})
	}
	over := len(complete("s", 1<<20).GetPayload()) - (1 << 20) // the payload's bytes beside the output
	rows := []struct {
		name  string
		sizes []int  // outputs of the worker's TaskCompletes, in turn
		want  string // the last one's answer
	}{
		{"a payload of the runtime's bound", []int{1<<20 - over}, "ok"},
		{"one byte over", []int{1<<20 - over + 1}, "PAYLOAD_TOO_LARGE"},
		{"the honest completion after one over", []int{1<<20 - over + 1, 1}, "ok"},
	}
	eachMACPDoor(t, runtimeAddr, runtime, func(t *testing.T, through macpDoor, _ bool) {
		for _, tc := range rows {
			t.Run(tc.name, func(t *testing.T) {
				sid := newSession()
				for _, m := range taskMessages(sid)[:3] {
					if got := through(t, m); got != "ok" {
						t.Fatalf("honest %s: %s", m.GetMessageType(), got)
					}
				}
				got := ""
				for _, n := range tc.sizes {
					got = through(t, complete(sid, n))
				}
				if got != tc.want {
					t.Errorf("%s, want %s", got, tc.want)
				}
			})
		}
	})
}
