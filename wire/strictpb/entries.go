package strictpb

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// entries refuses, in the wire bytes b of a message of type md, a map
// entry holding its key or value with another wire type than the schema's:
// protobuf-go skips such a field as it skips an unknown one, so the entry
// reads as its default key or value and nothing is left among the unknown
// fields for known to find; prost refuses the whole message (its map
// merge checks each field's wire type). The unknown fields of an entry are
// skipped by both. Only the messages holding maps, at any depth, are
// walked; b was decoded already, so it is well formed.
func entries(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth > MaxDepth {
		return nil
	}
	for len(b) > 0 {
		num, typ, v, rest, err := next(b)
		if err != nil {
			return err
		}
		b = rest
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue // unknown, or another wire type: known refuses it
		}
		inner, _ := protowire.ConsumeBytes(v)
		switch {
		case fd.IsMap():
			if err := entry(inner, fd, depth); err != nil {
				return err
			}
		case fd.Message() != nil && hasMaps(fd.Message(), nil):
			if err := entries(inner, fd.Message(), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// entry checks one entry of the map field fd.
func entry(b []byte, fd protoreflect.FieldDescriptor, depth int) error {
	for len(b) > 0 {
		num, typ, v, rest, err := next(b)
		if err != nil {
			return err
		}
		b = rest
		var want protoreflect.FieldDescriptor
		switch num {
		case 1:
			want = fd.MapKey()
		case 2:
			want = fd.MapValue()
		default:
			continue
		}
		if typ != wireType(want.Kind()) {
			return fmt.Errorf("%s: a map entry's field %d has wire type %d: %w", fd.FullName(), num, typ, ErrOutsideSchema)
		}
		if m := want.Message(); m != nil && hasMaps(m, nil) {
			inner, _ := protowire.ConsumeBytes(v)
			if err := entries(inner, m, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireType is the wire type a field of kind k is encoded with (a map's
// key and value are never packed).
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// hasMaps reports whether a message of type md may hold a map field, at
// any depth (seen: the types on the way, against cycles).
func hasMaps(md protoreflect.MessageDescriptor, seen []protoreflect.FullName) bool {
	for _, s := range seen {
		if s == md.FullName() {
			return false
		}
	}
	seen = append(seen, md.FullName())
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			return true
		}
		if m := fd.Message(); m != nil && hasMaps(m, seen) {
			return true
		}
	}
	return false
}

// next splits the first field off b: its number, wire type and encoded
// value, and the bytes after it.
func next(b []byte) (protowire.Number, protowire.Type, []byte, []byte, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	b = b[n:]
	n = protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	return num, typ, b[:n], b[n:], nil
}
