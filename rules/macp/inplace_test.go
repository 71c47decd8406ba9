package macp

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// flats are the payloads read in place, in the order FuzzFlat's first byte
// picks them.
var flats = []flat{taskUpdateFlat, handoffOfferFlat, handoffContextFlat, handoffAcceptFlat, handoffDeclineFlat}

// TestFlatSchemas: each flat's kinds are its message type's fields, numbered
// 1 to n, of the kinds it reads them as: a field added to the proto fails
// here, not silently as a refusal.
func TestFlatSchemas(t *testing.T) {
	kind := map[protoreflect.Kind]byte{protoreflect.StringKind: 's', protoreflect.BytesKind: 'y', protoreflect.DoubleKind: 'd', protoreflect.BoolKind: 'v'}
	for _, f := range flats {
		fields := f.typ.Descriptor().Fields()
		if fields.Len() != len(f.kinds) {
			t.Errorf("%s: %d fields, flat %q", f.typ.Descriptor().Name(), fields.Len(), f.kinds)
			continue
		}
		for i := range fields.Len() {
			fd := fields.ByNumber(protowire.Number(i + 1))
			if fd == nil || fd.Cardinality() == protoreflect.Repeated || kind[fd.Kind()] != f.kinds[i] {
				t.Errorf("%s: field %d is %v, flat %q", f.typ.Descriptor().Name(), i+1, fd, f.kinds)
			}
		}
	}
}

// flatSeeds are payloads each flat must judge as strictpb does: valid ones,
// a field sent twice, and each refusal (unknown field, a known one with
// another wire type, bad UTF-8, a truncated value, a group).
func flatSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, m := range []proto.Message{
		&taskv1.TaskUpdatePayload{TaskId: "t", Status: "running", Progress: 0.5, Message: "half way", PartialOutput: []byte{0xff}},
		&handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: "bob", Scope: "all", Reason: "r"},
		&handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain", Context: []byte{0xff}},
		&handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: "bob", Reason: "r", Implicit: true},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b, b[:len(b)-1])
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	cat := func(bs ...[]byte) (out []byte) {
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	vint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	return append(seeds,
		nil,
		cat(str(1, "a"), str(1, "b")),
		cat(str(1, "t"), str(6, "x")),
		str(1, "\xff"), str(2, "\xc0"), str(4, "\xed\xa0\x80"), str(5, "\xff"), str(3, "\xff"),
		vint(1, 1), vint(4, 2), cat(vint(4, 1), vint(4, 0)), vint(4, 1<<63),
		append(protowire.AppendTag(nil, 4, protowire.VarintType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02),
		protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 1),
		cat(protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 1), str(1, "ab")),
		protowire.AppendFixed64(protowire.AppendTag(nil, 3, protowire.Fixed64Type), math.Float64bits(math.NaN())),
		protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1<<62),
		protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "12345678"),
		cat(protowire.AppendTag(nil, 1, protowire.StartGroupType), protowire.AppendTag(nil, 1, protowire.EndGroupType)),
		protowire.AppendTag(nil, 0, protowire.BytesType),
		[]byte{0x0a, 0x80},
	)
}

// TestFlat holds each flat to strictpb on the seeds.
func TestFlat(t *testing.T) {
	for _, b := range flatSeeds(t) {
		for _, f := range flats {
			checkFlat(t, f, b)
		}
	}
}

// FuzzFlat holds the in-place reading of each flat payload to
// strictpb.Unmarshal: the same bytes refused, the same values read, the
// same value for a policy. The first byte picks the flat.
func FuzzFlat(f *testing.F) {
	for _, b := range flatSeeds(f) {
		for i := range flats {
			f.Add(append([]byte{byte(i)}, b...))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 {
			checkFlat(t, flats[int(b[0])%len(flats)], b[1:])
		}
	})
}

func checkFlat(t *testing.T, f flat, b []byte) {
	t.Helper()
	name := f.typ.Descriptor().Name()
	m := f.typ.New().Interface()
	want := strictpb.Unmarshal(b, m) == nil
	vals := make([][]byte, len(f.kinds))
	if got := f.read(b, vals); got != want {
		t.Fatalf("%s %x: read ok %v, strictpb ok %v", name, b, got, want)
	}
	if !want {
		return
	}
	rm := m.ProtoReflect()
	for i, k := range []byte(f.kinds) {
		v := rm.Get(rm.Descriptor().Fields().ByNumber(protowire.Number(i + 1)))
		var same bool
		switch k {
		case 's':
			same = string(vals[i]) == v.String()
		case 'y':
			same = bytes.Equal(vals[i], v.Bytes())
		case 'd':
			var bits uint64
			if vals[i] != nil {
				bits = binary.LittleEndian.Uint64(vals[i])
			}
			same = bits == math.Float64bits(v.Float())
		case 'v':
			same = isTrue(vals[i]) == v.Bool()
		}
		if !same {
			t.Fatalf("%s %x: field %d read %x, strictpb %v", name, b, i+1, vals[i], v)
		}
	}
	if lv, pv := lazyPayload(b, f.typ).Value(), PayloadOf(m).Value(); !reflect.DeepEqual(lv, pv) {
		t.Fatalf("%s %x: value %v, strictpb %v", name, b, lv, pv)
	}
}
