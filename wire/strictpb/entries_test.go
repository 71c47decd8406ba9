package strictpb

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestMapEntryWireType: protobuf-go skips a map entry's key or value sent
// with another wire type (the entry reads as key "" or an empty value, no
// unknown field kept), where prost refuses the message: a SessionStart
// whose extensions Warden read was one the runtime does not decode. Each
// "refused" row decoded without error before. An entry's unknown field is
// skipped by both, and stays accepted.
func TestMapEntryWireType(t *testing.T) {
	field := func(b []byte, num protowire.Number, typ protowire.Type, v []byte) []byte {
		b = protowire.AppendTag(b, num, typ)
		switch typ {
		case protowire.VarintType:
			return protowire.AppendVarint(b, 7)
		case protowire.Fixed32Type:
			return protowire.AppendFixed32(b, 7)
		}
		return protowire.AppendBytes(b, v)
	}
	ext := func(entry []byte) []byte {
		b := field(nil, 3, protowire.BytesType, []byte("1.0.0"))
		return field(b, 9, protowire.BytesType, entry)
	}
	for _, tc := range []struct {
		name    string
		b       []byte
		refused bool
	}{
		{"key and value", ext(field(field(nil, 1, protowire.BytesType, []byte("k")), 2, protowire.BytesType, []byte("v"))), false},
		{"an unknown field in the entry", ext(field(field(nil, 1, protowire.BytesType, []byte("k")), 3, protowire.BytesType, []byte("z"))), false},
		{"an empty entry", ext(nil), false},
		{"the key a varint", ext(field(field(nil, 1, protowire.VarintType, nil), 2, protowire.BytesType, []byte("v"))), true},
		{"the value a fixed32", ext(field(field(nil, 1, protowire.BytesType, []byte("k")), 2, protowire.Fixed32Type, nil)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []*Reader{nil, {}} {
				var m macpv1.SessionStartPayload
				err := r.Unmarshal(tc.b, &m)
				if tc.refused != errors.Is(err, ErrOutsideSchema) || !tc.refused && err != nil {
					t.Errorf("reader %v: err %v, refused want %v", r != nil, err, tc.refused)
				}
			}
		})
	}
}
