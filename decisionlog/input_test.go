package decisionlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestIncludeInput: with include_input a decision's input is recorded (the
// envelope reads back as the same message, the policy input as the same
// input), bounded by max_input_bytes; without it nothing of the message is.
func TestIncludeInput(t *testing.T) {
	env := &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "TaskRequest", MessageId: "m1", SessionId: "s", Sender: "agent://a", Payload: []byte("secret payload")}
	pin := &policies.Input{Protocol: "mcp", Principal: policies.Principal{ID: "agent://a", Method: "jwt"}, Message: policies.Message{Type: "tasks/get", SessionID: "t1"}, Roles: []string{"owner"}}
	macp := proxy.Decision{ID: "a-1", Protocol: "macp", Allow: true, Recorded: &proxy.Recorded{Envelope: env, Claims: map[string]any{"macp_scopes": map[string]any{"can_start_sessions": true}}}}
	mcp := proxy.Decision{ID: "a-2", Protocol: "mcp", Allow: true, Recorded: &proxy.Recorded{Policy: pin}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		d       proxy.Decision
		omitted string
	}{
		{"off", Config{}, macp, ""},
		{"macp", Config{IncludeInput: true}, macp, ""},
		{"mcp", Config{IncludeInput: true}, mcp, ""},
		{"over the bound", Config{IncludeInput: true, MaxInputBytes: 40}, macp, "over decision_log.max_input_bytes (40)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			tc.cfg.Path = "-"
			l, err := New(tc.cfg, &out, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.Decided(tc.d, time.Microsecond)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			var r Record
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			in := r.Input
			switch {
			case !tc.cfg.IncludeInput:
				if in.Recorded || in.Envelope != nil || in.Claims != nil || strings.Contains(out.String(), "c2VjcmV0") {
					t.Fatalf("input recorded without include_input: %s", out.String())
				}
			case tc.omitted != "":
				if !in.Recorded || in.Envelope != nil || in.Claims != nil || !strings.Contains(in.Omitted, tc.omitted) {
					t.Fatalf("record %+v", in)
				}
			case tc.d.Protocol == "macp":
				got := &macpv1.Envelope{}
				if err := protojson.Unmarshal(in.Envelope, got); err != nil || !proto.Equal(got, env) || in.Claims["macp_scopes"] == nil {
					t.Fatalf("envelope %s (%v), claims %v", in.Envelope, err, in.Claims)
				}
			default:
				var got policies.Input
				if err := json.Unmarshal(in.Policy, &got); err != nil || got.Message != pin.Message || got.Roles[0] != "owner" || got.Principal.ID != pin.Principal.ID {
					t.Fatalf("policy input %s (%v)", in.Policy, err)
				}
			}
		})
	}
}

func TestIncludeInputConfig(t *testing.T) {
	half := 0.5
	for _, tc := range []struct {
		cfg Config
		err string
	}{
		{Config{IncludeInput: true, SampleAllowed: &half}, "include_input needs every decision recorded"},
		{Config{MaxInputBytes: -1}, "max_input_bytes: negative"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.err)
		}
	}
}
