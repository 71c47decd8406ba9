package strictpb

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// maxShapeField is the highest field number a shape indexes: a message
// type defining a field above it is checked by decoding (Known), as one
// of proto2 or that may carry extensions is.
const maxShapeField = 64

// shape is what the wire walk needs of a message type, per field number:
// the wire types protobuf-go reads into the field (it keeps any other as an
// unknown field, which Known refuses) and what to walk inside it. A Reader
// builds one per message type, once.
type shape struct {
	slow   bool   // checked by decoding: not proto3, extensions, a field number above maxShapeField
	fields []slot // by field number; the zero slot is no field
}

// slot is one field of a shape.
type slot struct {
	known  bool
	wire   protowire.Type // the wire type of its values
	packed bool           // a repeated scalar: its values may come packed too
	msg    *shape         // a message field (singular or repeated): walked inside
	entry  *entryShape    // a map field: its entries walked
}

// entryShape is a map field's entry: a key or value of another wire type is
// refused (entries), an unknown field skipped.
type entryShape struct {
	key, val protowire.Type
	msg      *shape // a message value: walked inside
}

// shapeOf is a message type's shape, in a Reader's list.
type shapeOf struct {
	md protoreflect.MessageDescriptor
	s  *shape
}

// shape returns md's shape, nil for a nil Reader. The shapes are a list
// copied on write, not a map: a schema's worth of types, the hot one found
// in the first cache line instead of through a map's hash and its nodes.
func (r *Reader) shape(md protoreflect.MessageDescriptor) *shape {
	if r == nil {
		return nil
	}
	l := r.shapes.Load()
	if s := find(l, md); s != nil {
		return s
	}
	s := buildShape(md, map[protoreflect.FullName]*shape{})
	for {
		next := []shapeOf{{md, s}}
		if l != nil {
			next = append(next, *l...)
		}
		if r.shapes.CompareAndSwap(l, &next) {
			return s
		}
		l = r.shapes.Load()
		if got := find(l, md); got != nil {
			return got
		}
	}
}

// find returns md's shape in l, nil if l holds none.
func find(l *[]shapeOf, md protoreflect.MessageDescriptor) *shape {
	if l == nil {
		return nil
	}
	for _, e := range *l {
		if e.md == md {
			return e.s
		}
	}
	return nil
}

// buildShape builds md's shape and those of the messages it holds (built:
// the shapes under construction, against cycles).
func buildShape(md protoreflect.MessageDescriptor, built map[protoreflect.FullName]*shape) *shape {
	if s, ok := built[md.FullName()]; ok {
		return s
	}
	s := &shape{}
	built[md.FullName()] = s
	if md.Syntax() != protoreflect.Proto3 || md.ExtensionRanges().Len() > 0 {
		s.slow = true // proto2's closed enums and required fields, extensions: not read here
		return s
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Number() > maxShapeField {
			s.slow = true
			return s
		}
		sl := slot{known: true, wire: wireType(fd.Kind())}
		switch {
		case fd.IsMap():
			e := &entryShape{key: wireType(fd.MapKey().Kind()), val: wireType(fd.MapValue().Kind())}
			if m := fd.MapValue().Message(); m != nil {
				e.msg = buildShape(m, built)
			}
			sl.wire, sl.entry = protowire.BytesType, e
		case fd.Message() != nil:
			sl.msg = buildShape(fd.Message(), built)
		case fd.IsList() && sl.wire != protowire.BytesType:
			sl.packed = true
		}
		if int(fd.Number()) >= len(s.fields) {
			s.fields = append(s.fields, make([]slot, int(fd.Number())+1-len(s.fields))...)
		}
		s.fields[fd.Number()] = sl
	}
	return s
}

// walk reports whether the wire bytes b of a message of shape s hold, at
// any depth, only fields s defines with the wire types protobuf-go reads
// into them, and map entries whose key and value have their schema's wire
// types: what Known and entries check of the decoded message, read from
// the bytes before decoding them. It leaves to proto.Unmarshal what that
// refuses itself (invalid UTF-8, a packed list's contents, a required
// field missing). Fields are read as they come, each time they come (a
// message field sent twice is merged by protobuf-go, its unknown fields
// with it). false only sends b to the decoding path, which judges it and
// words a refusal: so walk may refuse more than that path (bytes it cannot
// split into fields, nesting past MaxDepth, a slow shape) but never accept
// what it refuses (FuzzWalk).
func walk(b []byte, s *shape, depth int) bool {
	if s.slow || depth > MaxDepth {
		return false
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num >= protowire.Number(len(s.fields)) {
			return false
		}
		b = b[n:]
		sl := &s.fields[num]
		switch {
		case !sl.known:
			return false
		case typ == sl.wire:
		case sl.packed && typ == protowire.BytesType:
		default:
			return false
		}
		var v []byte
		switch typ { // a proto3 field is never a group
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(b)
		case protowire.Fixed64Type:
			_, n = protowire.ConsumeFixed64(b)
		default:
			v, n = protowire.ConsumeBytes(b)
		}
		if n < 0 {
			return false
		}
		if sl.msg != nil && !walk(v, sl.msg, depth+1) || sl.entry != nil && !walkEntry(v, sl.entry, depth) {
			return false
		}
		b = b[n:]
	}
	return true
}

// walkEntry is walk over one map entry.
func walkEntry(b []byte, e *entryShape, depth int) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		switch num {
		case 1:
			if typ != e.key {
				return false
			}
		case 2:
			if typ != e.val {
				return false
			}
			if e.msg != nil {
				v, _ := protowire.ConsumeBytes(b[:n])
				if !walk(v, e.msg, depth+1) {
					return false
				}
			}
		}
		b = b[n:]
	}
	return true
}
