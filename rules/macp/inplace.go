package macp

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// taskUpdateType is the type a TaskUpdate's payload is decoded as when a
// policy reads it (Payload.Value).
var taskUpdateType = (*taskv1.TaskUpdatePayload)(nil).ProtoReflect().Type()

// taskUpdateID reads a TaskUpdatePayload's task_id in place, reporting
// whether strictpb.Unmarshal would accept b: every field one the schema
// defines, with its wire type, strings valid UTF-8 (task_id 1, status 2,
// progress 3 a double, message 4, partial_output 5 bytes). A field sent
// twice is read by its last value, as proto.Unmarshal reads it. The TaskUpdate,
// the hot message of a task, is decided without decoding it
// (FuzzTaskUpdateID holds this to strictpb.Unmarshal); ok false is handed to
// the decoding path, which words the refusal.
func taskUpdateID(b []byte) (id []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && num >= 1 && num <= 5 && num != 3:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || num != 5 && !utf8.Valid(v) {
				return nil, false
			}
			if num == 1 {
				id = v
			}
			b = b[n:]
		case typ == protowire.Fixed64Type && num == 3:
			_, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
		default:
			return nil, false
		}
	}
	return id, true
}

// lazyPayload is b, a payload read in place and known to decode as typ, as
// the rules' payload: decoded only if a policy reads it.
func lazyPayload(b []byte, typ protoreflect.MessageType) Payload {
	return Payload{raw: b, typ: typ}
}
