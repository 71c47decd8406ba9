package strictpb

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Flat is the schema of a proto3 message whose fields are all singular
// scalars, numbered from 1 without a gap, for reading it in place: its i-th
// byte is field i+1's kind, 's' a string, 'y' bytes, 'd' a double, 'v' a
// varint (a bool, an int64). The hot messages (MACP's envelope, the task
// and handoff payloads) are read this way instead of decoded; each reader's
// fuzz test holds its reading to Unmarshal.
type Flat string

// Read reads b in place into vals, one per field (a string's or bytes'
// contents, a double's or a varint's encoding; nil for a field not sent),
// reporting whether Unmarshal would accept b as f's message: every field one
// the schema defines, with its wire type, strings valid UTF-8. A field sent
// twice is read by its last value, as proto.Unmarshal reads it. A value is
// a sub-slice of b with its capacity cut to its length.
func (f Flat) Read(b []byte, vals [][]byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || int(num) > len(f) {
			return false
		}
		b = b[n:]
		var v []byte
		switch k := f[num-1]; {
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
		vals[num-1] = v[:len(v):len(v)]
		b = b[n:]
	}
	return true
}
