package macp

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agentwarden/warden/wire/strictpb"
)

// Payload is an envelope's payload as the rules read it: the one reading
// Warden makes of the bytes (strictpb, or a Contribute's contributeValue),
// with the values the runtime compares without regard to case as the rules
// compare them. The zero Payload is none: the rules did not read the
// payload.
type Payload struct {
	msg proto.Message
	// raw and typ are a payload read in place (lazyPayload): bytes known
	// to decode as typ under strictpb, decoded by Value.
	raw []byte
	typ protoreflect.MessageType
}

// PayloadOf is m as a payload read by the rules.
func PayloadOf(m proto.Message) Payload { return Payload{msg: m} }

// Read reports whether the rules read the payload.
func (p Payload) Read() bool { return p.msg != nil || p.typ != nil }

// Value is the payload as an operator policy reads it
// (input.macp.payload), nil for none: see payloadValue.
func (p Payload) Value() any {
	m := p.msg
	if m == nil && p.typ != nil {
		m = p.typ.New().Interface()
		if strictpb.Unmarshal(p.raw, m) != nil {
			return nil // not reached: lazyPayload's bytes decode
		}
	}
	if m == nil {
		return nil
	}
	return payloadValue(m.ProtoReflect())
}

// payloadValue is a decoded message as JSON-shaped data, protojson's
// mapping with its proto field names, every field present (unset scalars
// as their zero value, unset messages null, empty lists [] and maps {}):
// a closed rule needs no default for a field the sender left out, which
// proto3 cannot tell from its zero value anyway. Numbers are json.Number,
// 64-bit integers included (protojson writes those as strings; a rule
// compares them with <); NaN and infinities are protojson's "NaN",
// "Infinity", "-Infinity"; bytes are standard base64; enums their names.
func payloadValue(m protoreflect.Message) map[string]any {
	fields := m.Descriptor().Fields()
	out := make(map[string]any, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() && !m.Has(fd) {
			continue // protojson leaves the unset members of a oneof out
		}
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			list := make([]any, l.Len())
			for j := range list {
				list[j] = scalar(fd, l.Get(j))
			}
			out[string(fd.Name())] = list
		case fd.IsMap():
			mv := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
				mv[k.String()] = scalar(fd.MapValue(), e)
				return true
			})
			out[string(fd.Name())] = mv
		case fd.Message() != nil && !m.Has(fd):
			out[string(fd.Name())] = nil
		default:
			out[string(fd.Name())] = scalar(fd, v)
		}
	}
	return out
}

// scalar converts one singular value of field fd.
func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return json.Number(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return json.Number(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		bits := 64
		if fd.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, bits))
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return json.Number(strconv.FormatInt(int64(v.Enum()), 10))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return payloadValue(v.Message())
	}
	return nil
}
