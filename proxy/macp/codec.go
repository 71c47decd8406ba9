package macp

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// frame is one gRPC message as it travels: the bytes the peer sent, forwarded
// untouched so fields Warden does not know survive.
type frame struct{ b []byte }

// rawCodec moves frames without decoding them; Warden decodes a copy of the
// messages it inspects.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *frame:
		return m.b, nil
	case proto.Message: // answers Warden builds itself
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}
