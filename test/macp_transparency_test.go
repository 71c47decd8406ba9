package test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestMACPTransparency sends TaskComplete with large outputs to the real
// runtime, direct and through bin/warden (macp.max_message_bytes at its
// default, 4 MiB, and raised), and compares: within Warden's bound, what
// the runtime accepts direct passes through Warden and what it refuses is
// refused the same way; over it, Warden answers RESOURCE_EXHAUSTED naming
// the size. The runtime's own payload bound (MACP_MAX_PAYLOAD_BYTES, 1 MiB
// by default) is met first at default settings. Outcomes and times are
// logged.
func TestMACPTransparency(t *testing.T) { eachTransport(t, testMACPTransparency) }

func testMACPTransparency(t *testing.T) {
	const mb = 1 << 20
	// complete runs a task to its TaskComplete with an output of n bytes and
	// returns whether it was accepted, and how long the TaskComplete took.
	complete := func(c macpClient, n int) (bool, string, time.Duration) {
		s := newSession()
		c.mustAccept(envelope("planner", s, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "t", Participants: []string{"planner", "worker"},
			ModeVersion: "1.0.0", ConfigurationVersion: "cfg-1", TtlMs: 60_000}))
		c.mustAccept(envelope("planner", s, "TaskRequest", "", &taskv1.TaskRequestPayload{TaskId: "t1", Title: "x", RequestedAssignee: "worker"}))
		c.mustAccept(envelope("worker", s, "TaskAccept", "", &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "worker"}))
		out := bytes.Repeat([]byte{'o'}, n)
		t0 := time.Now()
		ack, err := c.sendOn("/macp.v1.MACPRuntimeService/Send",
			envelope("worker", s, "TaskComplete", "", &taskv1.TaskCompletePayload{TaskId: "t1", Assignee: "worker", Output: out, Summary: "done"}))
		d := time.Since(t0)
		if err != nil {
			return false, status.Code(err).String() + ": " + status.Convert(err).Message(), d
		}
		if !ack.GetOk() {
			return false, ack.GetError().GetCode() + ": " + ack.GetError().GetMessage(), d
		}
		return true, "", d
	}
	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		sizes []int
		must  int // direct must accept outputs up to this size
		bound int // Warden's macp.max_message_bytes: larger messages are refused (RESOURCE_EXHAUSTED)
	}{
		// The runtime's own payload bound is 1 MiB (MACP_MAX_PAYLOAD_BYTES).
		{"runtime defaults", nil, nil, []int{512 << 10, 1*mb - 1<<10, 1*mb + 1<<10}, 512 << 10, 4 * mb},
		// Raised: what passes is bounded by gRPC message sizes (4 MiB by
		// default on both sides).
		// Warden's macp_max_payload_bytes follows the runtime's.
		{"MACP_MAX_PAYLOAD_BYTES=16MiB", []string{"MACP_MAX_PAYLOAD_BYTES=16777216"}, []string{"--macp-max-payload-bytes", "16777216"}, []int{3 * mb, 4*mb - 64<<10, 5 * mb}, 3 * mb, 4 * mb},
		{"MACP_MAX_PAYLOAD_BYTES=16MiB, --max-message-bytes 8MiB", []string{"MACP_MAX_PAYLOAD_BYTES=16777216"}, []string{"--macp-max-payload-bytes", "16777216", "--max-message-bytes", "8388608"},
			[]int{5 * mb, 8*mb - 64<<10}, 5 * mb, 8 * mb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime := startRuntime(t, tc.env...)
			direct, warden := dialMACP(t, runtime), dialMACP(t, startWarden(t, runtime, append([]string{"--auth", "dev", "--insecure-dev-auth"}, tc.args...)...))
			for _, n := range tc.sizes {
				dOK, dWhy, dT := complete(direct, n)
				wOK, wWhy, wT := complete(warden, n)
				t.Logf("TaskComplete output %d bytes: direct ok=%v %s (%v); through Warden ok=%v %s (%v)", n, dOK, dWhy, dT.Round(time.Millisecond), wOK, wWhy, wT.Round(time.Millisecond))
				if n <= tc.must && !dOK {
					t.Fatalf("the runtime refused a %d-byte output direct: %s", n, dWhy)
				}
				if n > tc.bound-256 { // the envelope around the output
					if wOK || !strings.HasPrefix(wWhy, "ResourceExhausted") {
						t.Errorf("%d-byte output over macp.max_message_bytes %d: ok=%v %s, want RESOURCE_EXHAUSTED", n, tc.bound, wOK, wWhy)
					}
					continue
				}
				if dOK && !wOK {
					t.Errorf("%d-byte output: accepted direct, refused through Warden: %s", n, wWhy)
				}
				if !dOK && wOK {
					t.Errorf("%d-byte output: refused direct (%s), accepted through Warden", n, dWhy)
				}
			}
		})
	}
}
