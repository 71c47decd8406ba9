// Package strictpb decodes protobuf as the MACP runtime (prost) reads it, or
// not at all. protobuf-go keeps what its schema does not expect (a field
// number it does not know, or one it knows sent with another wire type) as
// unknown fields and decodes the rest; prost refuses a known field with the
// wrong wire type outright. A message Warden decided on such a reading would
// not be the message the runtime refuses or reads, so every message Warden
// decides on is decoded here: anything outside its schema, at any depth, is
// refused.
//
// The check walks the decoded message's unknown fields instead of
// re-marshalling and comparing the bytes: encodings that both readers accept
// and read alike (fields out of order, a repeated scalar packed or not, a
// singular field sent twice, a varint longer than needed) marshal back to
// other bytes, and refusing them would refuse valid traffic. A Reader
// reads the same from the wire bytes before decoding them, in one walk over
// a table per message type (walk): the message it accepts is decoded only;
// one it refuses goes the decoding path, which judges it and words why.
package strictpb

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxDepth is prost's recursion limit: a message nested deeper does not
// decode there.
const MaxDepth = 100

// ErrOutsideSchema is wrapped by the error for a message holding fields its
// schema does not define (or defines with another wire type).
var ErrOutsideSchema = errors.New("fields outside the message's schema")

var opts = proto.UnmarshalOptions{RecursionLimit: MaxDepth}

// Unmarshal decodes b into m, refusing what prost refuses and what it would
// read otherwise than protobuf-go: invalid UTF-8 in a string (protobuf-go
// refuses it too), nesting deeper than MaxDepth, any unknown field or
// field of the wrong wire type at any depth, and a map entry's key or value
// of the wrong wire type (entries). It is Reader.Unmarshal without
// a Reader's memory of the schemas it walked.
func Unmarshal(b []byte, m proto.Message) error { return (*Reader)(nil).Unmarshal(b, m) }

// Known reports, as an error wrapping ErrOutsideSchema and naming the first
// such message's path, whether m or any message it holds carries unknown
// fields. It is Reader.Known without a Reader's memory.
func Known(m proto.Message) error { return (*Reader)(nil).Known(m) }

// Reader is Unmarshal and Known remembering, per message descriptor, which
// of its fields hold messages, so that a check walks only those instead of
// every field of every message. The zero value is ready; it is safe for
// concurrent use and grows with the message types it reads (a schema's
// worth). A nil *Reader remembers nothing.
type Reader struct {
	plans  sync.Map // protoreflect.MessageDescriptor -> *plan
	shapes atomic.Pointer[[]shapeOf]
}

// plan is what a check needs of a message descriptor.
type plan struct {
	ext    bool                           // it may carry extensions: walked with Range
	maps   bool                           // it may hold a map, at any depth: its bytes walked by entries
	fields []protoreflect.FieldDescriptor // the fields whose values are, or hold, messages
}

// plan returns md's plan, nil for a nil Reader.
func (r *Reader) plan(md protoreflect.MessageDescriptor) *plan {
	if r == nil {
		return nil
	}
	if p, ok := r.plans.Load(md); ok {
		return p.(*plan)
	}
	p := &plan{ext: md.ExtensionRanges().Len() > 0, maps: hasMaps(md, nil)}
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); holdsMessages(fd) {
			p.fields = append(p.fields, fd)
		}
	}
	got, _ := r.plans.LoadOrStore(md, p)
	return got.(*plan)
}

// Unmarshal is the package's Unmarshal. A Reader first walks b's fields
// against the message type's shape (walk): bytes the walk accepts are only
// decoded, the check of the decoded message (Known, entries) skipped, since
// the walk read in the bytes what it reads; the others are decoded and
// checked, which words the refusal.
func (r *Reader) Unmarshal(b []byte, m proto.Message) error {
	if s := r.shape(m.ProtoReflect().Descriptor()); s != nil && walk(b, s, 0) {
		return opts.Unmarshal(b, m)
	}
	return r.unmarshal(b, m)
}

// unmarshal decodes b into m and checks the decoded message.
func (r *Reader) unmarshal(b []byte, m proto.Message) error {
	if err := opts.Unmarshal(b, m); err != nil {
		return err
	}
	if err := r.Known(m); err != nil {
		return err
	}
	md := m.ProtoReflect().Descriptor()
	if p := r.plan(md); p == nil && hasMaps(md, nil) || p != nil && p.maps {
		return entries(b, md, 0)
	}
	return nil
}

// Known is the package's Known.
func (r *Reader) Known(m proto.Message) error {
	rm := m.ProtoReflect()
	if where, ok := r.known(rm); !ok {
		return fmt.Errorf("%s%s: %w", rm.Descriptor().Name(), where, ErrOutsideSchema)
	}
	return nil
}

// known reports whether m holds nothing outside its schema, at any depth,
// and if not where, below m (".field[key]..."): the path is written only
// for a message refused, on the way back up. It walks m's message fields
// (its plan's, or without one its descriptor's) rather than Range, whose
// callback escapes and so costs allocations on every message decided; a
// message that may carry extensions is walked with Range (it ranges over
// them too).
func (r *Reader) known(m protoreflect.Message) (where string, ok bool) {
	if len(m.GetUnknown()) > 0 {
		return "", false
	}
	md := m.Descriptor()
	if p := r.plan(md); p != nil {
		if p.ext {
			return r.knownRange(m)
		}
		for _, fd := range p.fields {
			if !m.Has(fd) {
				continue
			}
			if where, ok := r.knownField(fd, m.Get(fd)); !ok {
				return where, false
			}
		}
		return "", true
	}
	if md.ExtensionRanges().Len() > 0 {
		return r.knownRange(m)
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !holdsMessages(fd) || !m.Has(fd) {
			continue
		}
		if where, ok := r.knownField(fd, m.Get(fd)); !ok {
			return where, false
		}
	}
	return "", true
}

// holdsMessages reports whether a field's values are, or hold, messages.
func holdsMessages(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		return fd.MapValue().Message() != nil
	}
	return fd.Message() != nil
}

// knownRange is known over m's populated fields, extensions included.
func (r *Reader) knownRange(m protoreflect.Message) (where string, ok bool) {
	ok = true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if holdsMessages(fd) {
			where, ok = r.knownField(fd, v)
		}
		return ok
	})
	return where, ok
}

// knownField is known over the messages of field fd's value v.
func (r *Reader) knownField(fd protoreflect.FieldDescriptor, v protoreflect.Value) (where string, ok bool) {
	switch {
	case fd.IsMap():
		return r.knownMap(fd, v.Map())
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if w, good := r.known(l.Get(i).Message()); !good {
				return fmt.Sprintf(".%s[%d]%s", fd.Name(), i, w), false
			}
		}
		return "", true
	}
	if w, good := r.known(v.Message()); !good {
		return "." + string(fd.Name()) + w, false
	}
	return "", true
}

// knownMap is known over the message values of map field fd (its results,
// which its callback sets, live on the heap: knownField's do not).
func (r *Reader) knownMap(fd protoreflect.FieldDescriptor, m protoreflect.Map) (where string, ok bool) {
	ok = true
	m.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
		if w, good := r.known(mv.Message()); !good {
			where, ok = "."+string(fd.Name())+"["+k.String()+"]"+w, false
		}
		return ok
	})
	return where, ok
}
