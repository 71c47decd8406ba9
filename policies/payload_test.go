package policies

import (
	"context"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/macp"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
)

// TestPayloadMemo: a policy that does not read input.macp.payload keeps
// its memo hits whatever the payload (one entry for two payloads) and is
// never refused for a payload's size; one that reads it is keyed on it.
func TestPayloadMemo(t *testing.T) {
	ctx := context.Background()
	in := func(reason string, size int) *Input {
		return &Input{Protocol: "macp", Message: Message{Mode: macp.ModeDecision, Type: "Vote"}, Roles: []string{macp.RoleParticipant},
			Now:  time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC),
			MACP: MACP{Present: true, Payload: macp.PayloadOf(&decisionv1.VotePayload{ProposalId: "p1", Vote: "REJECT", Reason: reason}), Size: size}}
	}
	for _, tc := range []struct {
		files   []string
		entries int
		refused bool // the payload over the bound
	}{
		{[]string{"../deploy/policies/macp-votes-hours.rego"}, 1, false},
		{[]string{"../deploy/policies/macp-votes-hours.rego", "../deploy/policies/macp-payload.rego"}, 2, true},
	} {
		e, err := New(ctx, Config{Files: tc.files})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*Input{in("a", 10), in("b", 10)} {
			if d, err := e.Evaluate(ctx, x); err != nil || len(d) != 0 {
				t.Fatalf("%v: denials %+v, %v", tc.files, d, err)
			}
		}
		if got := e.memo.Len(); got != tc.entries {
			t.Errorf("%v: %d memo entries for two payloads, want %d", tc.files, got, tc.entries)
		}
		d, err := e.Evaluate(ctx, in("c", MaxPayloadBytes+1))
		if err != nil || (len(d) > 0) != tc.refused {
			t.Errorf("%v: a payload over the bound: denials %+v, %v; want refused %v", tc.files, d, err, tc.refused)
		}
	}
}
