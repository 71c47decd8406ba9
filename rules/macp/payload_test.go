package macp

import (
	"encoding/json"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	multiroundv1 "github.com/agentwarden/warden/wire/modes/multiround/v1"
	proposalv1 "github.com/agentwarden/warden/wire/modes/proposal/v1"
	quorumv1 "github.com/agentwarden/warden/wire/modes/quorum/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// TestPayloadSchemasShallow: no MACP payload schema nests deeper than
// three levels or refers to itself, so input.macp.payload needs no depth
// bound (MCP arguments are bounded at 16). A payload type added with
// a recursive or deep message fails here.
func TestPayloadSchemasShallow(t *testing.T) {
	var depth func(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) int
	depth = func(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) int {
		if seen[md.FullName()] {
			t.Fatalf("%s refers to itself", md.FullName())
		}
		seen[md.FullName()] = true
		defer delete(seen, md.FullName())
		d := 1
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			inner := 0
			switch {
			case fd.IsMap():
				inner = 1
				if m := fd.MapValue().Message(); m != nil {
					inner += depth(m, seen)
				}
			case fd.Message() != nil:
				inner = depth(fd.Message(), seen)
				if fd.IsList() {
					inner++
				}
			case fd.IsList():
				inner = 1
			}
			d = max(d, 1+inner)
		}
		return d
	}
	n := 0
	for _, f := range []protoreflect.FileDescriptor{macpv1.File_macp_v1_core_proto, decisionv1.File_macp_modes_decision_v1_decision_proto,
		handoffv1.File_macp_modes_handoff_v1_handoff_proto, multiroundv1.File_macp_modes_multi_round_v1_multi_round_proto,
		proposalv1.File_macp_modes_proposal_v1_proposal_proto, quorumv1.File_macp_modes_quorum_v1_quorum_proto, taskv1.File_macp_modes_task_v1_task_proto} {
		for i := range f.Messages().Len() {
			md := f.Messages().Get(i)
			if name := string(md.Name()); len(name) < 7 || name[len(name)-7:] != "Payload" {
				continue
			}
			n++
			if d := depth(md, map[protoreflect.FullName]bool{}); d > 3 {
				t.Errorf("%s nests %d levels deep", md.FullName(), d)
			}
		}
	}
	if n < len(PayloadTypes()) {
		t.Fatalf("checked %d payload messages, the catalog has %d payload types", n, len(PayloadTypes()))
	}
}

// TestPayloadValue: the JSON-shaped payload a policy reads, for the values
// protojson writes otherwise than a number or a string: 64-bit integers
// (numbers, not protojson's strings), NaN and infinities, bytes, maps,
// lists, an unset message (null) and unset scalars (present, zero).
func TestPayloadValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"unset fields present", &decisionv1.VotePayload{}, `{"proposal_id":"","reason":"","vote":""}`},
		{"int64 as a number", &taskv1.TaskRequestPayload{TaskId: "t", DeadlineUnixMs: math.MaxInt64},
			`{"deadline_unix_ms":9223372036854775807,"input":"","instructions":"","requested_assignee":"","task_id":"t","title":""}`},
		{"NaN and bytes", &taskv1.TaskUpdatePayload{Progress: math.NaN(), PartialOutput: []byte{0xff}},
			`{"message":"","partial_output":"/w==","progress":"NaN","status":"","task_id":""}`},
		{"infinity", &macpv1.SignalPayload{Confidence: math.Inf(-1)}, `{"confidence":"-Infinity","correlation_session_id":"","data":"","signal_type":""}`},
		{"uint32", &quorumv1.ApprovalRequestPayload{RequiredApprovals: math.MaxUint32},
			`{"action":"","details":"","request_id":"","required_approvals":4294967295,"summary":""}`},
		{"unset message null", &macpv1.CommitmentPayload{CommitmentId: "c"},
			`{"action":"","authority_scope":"","commitment_id":"c","configuration_version":"","mode_version":"","outcome_positive":false,"policy_version":"","reason":"","supersedes":null}`},
		{"set message, map, list of messages", &macpv1.SessionStartPayload{Participants: []string{"a"}, Roots: []*macpv1.Root{{Uri: "file:///r"}},
			Extensions: map[string][]byte{"x": []byte("y")}, Intent: "i"},
			`{"configuration_version":"","context_id":"","extensions":{"x":"eQ=="},"intent":"i","max_suspend_ms":0,"mode_version":"","participants":["a"],"policy_version":"","roots":[{"name":"","uri":"file:///r"}],"ttl_ms":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(PayloadOf(tc.msg).Value())
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}
