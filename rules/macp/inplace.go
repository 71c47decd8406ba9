package macp

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agentwarden/warden/rules"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// flat is the schema of a payload whose fields are all scalars, numbered
// from 1 without a gap, for reading it in place: its i-th byte is field
// i+1's kind, 's' a string, 'y' bytes, 'd' a double, 'v' a varint (a bool).
// The hot payloads are decided without decoding them (FuzzFlat holds each
// reading to strictpb.Unmarshal).
type flat struct {
	kinds string
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

// read reads b in place into vals, one per field (a string's or bytes'
// contents, a double's or a varint's encoding; nil for a field not sent),
// reporting whether strictpb.Unmarshal would accept b: every field one the
// schema defines, with its wire type, strings valid UTF-8. A field sent
// twice is read by its last value, as proto.Unmarshal reads it.
func (f flat) read(b []byte, vals [][]byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || int(num) > len(f.kinds) {
			return false
		}
		b = b[n:]
		var v []byte
		switch k := f.kinds[num-1]; {
		case k == 's' || k == 'y': // the common case first
			if typ != protowire.BytesType {
				return false
			}
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 && k == 's' && !utf8.Valid(v) {
				return false
			}
		case k == 'd':
			if typ != protowire.Fixed64Type {
				return false
			}
			_, n = protowire.ConsumeFixed64(b)
			v = b[:max(n, 0)]
		default:
			if typ != protowire.VarintType {
				return false
			}
			_, n = protowire.ConsumeVarint(b)
			v = b[:max(n, 0)]
		}
		if n < 0 {
			return false
		}
		vals[num-1] = v
		b = b[n:]
	}
	return true
}

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
