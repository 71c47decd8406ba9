package replay

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
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

// payloadTypes maps a fixture's payload_type to its protobuf message.
var payloadTypes = map[string]func() proto.Message{
	"Commitment":               func() proto.Message { return &macpv1.CommitmentPayload{} },
	"SessionStart":             func() proto.Message { return &macpv1.SessionStartPayload{} },
	"Signal":                   func() proto.Message { return &macpv1.SignalPayload{} },
	"Progress":                 func() proto.Message { return &macpv1.ProgressPayload{} },
	"task.TaskRequest":         func() proto.Message { return &taskv1.TaskRequestPayload{} },
	"task.TaskAccept":          func() proto.Message { return &taskv1.TaskAcceptPayload{} },
	"task.TaskReject":          func() proto.Message { return &taskv1.TaskRejectPayload{} },
	"task.TaskUpdate":          func() proto.Message { return &taskv1.TaskUpdatePayload{} },
	"task.TaskComplete":        func() proto.Message { return &taskv1.TaskCompletePayload{} },
	"task.TaskFail":            func() proto.Message { return &taskv1.TaskFailPayload{} },
	"handoff.HandoffOffer":     func() proto.Message { return &handoffv1.HandoffOfferPayload{} },
	"handoff.HandoffContext":   func() proto.Message { return &handoffv1.HandoffContextPayload{} },
	"handoff.HandoffAccept":    func() proto.Message { return &handoffv1.HandoffAcceptPayload{} },
	"handoff.HandoffDecline":   func() proto.Message { return &handoffv1.HandoffDeclinePayload{} },
	"decision.Proposal":        func() proto.Message { return &decisionv1.ProposalPayload{} },
	"decision.Evaluation":      func() proto.Message { return &decisionv1.EvaluationPayload{} },
	"decision.Objection":       func() proto.Message { return &decisionv1.ObjectionPayload{} },
	"decision.Vote":            func() proto.Message { return &decisionv1.VotePayload{} },
	"proposal.Proposal":        func() proto.Message { return &proposalv1.ProposalPayload{} },
	"proposal.CounterProposal": func() proto.Message { return &proposalv1.CounterProposalPayload{} },
	"proposal.Accept":          func() proto.Message { return &proposalv1.AcceptPayload{} },
	"proposal.Reject":          func() proto.Message { return &proposalv1.RejectPayload{} },
	"proposal.Withdraw":        func() proto.Message { return &proposalv1.WithdrawPayload{} },
	"quorum.ApprovalRequest":   func() proto.Message { return &quorumv1.ApprovalRequestPayload{} },
	"quorum.Approve":           func() proto.Message { return &quorumv1.ApprovePayload{} },
	"quorum.Reject":            func() proto.Message { return &quorumv1.RejectPayload{} },
	"quorum.Abstain":           func() proto.Message { return &quorumv1.AbstainPayload{} },
	"multi_round.Contribute":   func() proto.Message { return &multiroundv1.ContributePayload{} },
}

// encodePayload turns a fixture payload (JSON, proto field names, bytes
// written as plain strings or byte arrays) into protobuf bytes.
func encodePayload(payloadType string, raw json.RawMessage) ([]byte, error) {
	if payloadType == "raw" { // Warden's extension: payload is base64 of arbitrary bytes
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("raw payload must be a base64 string: %w", err)
		}
		return base64.StdEncoding.DecodeString(s)
	}
	mk, ok := payloadTypes[payloadType]
	if !ok {
		return nil, fmt.Errorf("unknown payload_type %q", payloadType)
	}
	m := mk()
	if len(raw) == 0 || string(raw) == "null" {
		return proto.Marshal(m)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	doc = fixBytes(m.ProtoReflect().Descriptor(), doc)
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("payload for %s: %w", payloadType, err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// fixBytes rewrites bytes fields written as UTF-8 strings or arrays of byte
// values into the base64 protojson expects.
func fixBytes(md protoreflect.MessageDescriptor, doc any) any {
	obj, ok := doc.(map[string]any)
	if !ok {
		return doc
	}
	for k, v := range obj {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		if fd == nil {
			continue
		}
		switch {
		case fd.Kind() == protoreflect.BytesKind && !fd.IsList() && !fd.IsMap():
			switch x := v.(type) {
			case string:
				obj[k] = base64.StdEncoding.EncodeToString([]byte(x))
			case []any:
				buf := make([]byte, 0, len(x))
				for _, n := range x {
					if f, ok := n.(float64); ok {
						buf = append(buf, byte(f))
					}
				}
				obj[k] = base64.StdEncoding.EncodeToString(buf)
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap():
			obj[k] = fixBytes(fd.Message(), v)
		}
	}
	return obj
}
