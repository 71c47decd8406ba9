package macp

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agentwarden/warden/rules"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// flat is a payload read in place: its schema (strictpb.Flat). The hot
// payloads are decided without decoding them (FuzzFlat holds each reading
// to strictpb.Unmarshal).
type flat struct {
	kinds strictpb.Flat
	typ   protoreflect.MessageType // what a policy reading the payload decodes it as
}

var (
	// task_id, status, progress, message, partial_output
	taskUpdateFlat = flat{"ssdsy", (*taskv1.TaskUpdatePayload)(nil).ProtoReflect().Type()}
	// handoff_id, target_participant, scope, reason
	handoffOfferFlat = flat{"ssss", (*handoffv1.HandoffOfferPayload)(nil).ProtoReflect().Type()}
	// handoff_id, content_type, context
	handoffContextFlat = flat{"ssy", (*handoffv1.HandoffContextPayload)(nil).ProtoReflect().Type()}
	// handoff_id, accepted_by, reason, implicit
	handoffAcceptFlat = flat{"sssv", (*handoffv1.HandoffAcceptPayload)(nil).ProtoReflect().Type()}
	// handoff_id, declined_by, reason
	handoffDeclineFlat = flat{"sss", (*handoffv1.HandoffDeclinePayload)(nil).ProtoReflect().Type()}
)

// read reads b in place into vals (strictpb.Flat.Read).
func (f flat) read(b []byte, vals [][]byte) bool { return f.kinds.Read(b, vals) }

// isTrue reads a bool's varint as proto.Unmarshal does (not 0).
func isTrue(v []byte) bool {
	x, _ := protowire.ConsumeVarint(v)
	return x != 0
}

// readPayload reads the envelope's payload in place with f into vals and
// makes it the outcome's Payload, decoded only if a policy reads it. A
// payload f refuses, strictpb refuses too (FuzzFlat): it is decoded then
// only for the decoder's words.
func readPayload(c *stepCtx, f flat, vals [][]byte) (rules.Verdict, bool) {
	if f.read(c.env.GetPayload(), vals) {
		c.out.Payload = lazyPayload(c.env.GetPayload(), f.typ)
		return rules.Verdict{}, true
	}
	return unreadPayload(c, f), false
}

// unreadPayload is the verdict on a payload f refuses, in the decoder's
// words.
func unreadPayload(c *stepCtx, f flat) rules.Verdict {
	err := strictpb.Unmarshal(c.env.GetPayload(), f.typ.New().Interface())
	if err == nil {
		err = errors.New("not read in place") // not reached (FuzzFlat)
	}
	return badPayload(c, err)
}

// lazyPayload is b, a payload read in place and known to decode as typ, as
// the rules' payload: decoded only if a policy reads it.
func lazyPayload(b []byte, typ protoreflect.MessageType) Payload {
	return Payload{raw: b, typ: typ}
}
