package macp

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// ack is what settling a decision reads of the runtime's Ack.
type ack struct {
	ok, duplicate bool
	code          []byte // error.code; empty without an error
}

// errMalformed is a message that proto.Unmarshal would refuse.
var errMalformed = errors.New("malformed protobuf message")

// readAck reads the Ack (field 1) of a SendResponse, CancelSessionResponse,
// SuspendSessionResponse or ResumeSessionResponse straight off the wire:
// it refuses exactly the bytes proto.Unmarshal refuses (FuzzReadAck) and
// allocates nothing. A field repeated is merged as proto.Unmarshal merges it;
// a known field of the wrong wire type is an unknown field.
func readAck(b []byte) (ack, error) {
	var a ack
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return ack{}, err
		}
		b = rest
		if f.num == 1 && f.typ == protowire.BytesType {
			if err := a.read(f.bytes); err != nil {
				return ack{}, err
			}
		}
	}
	return a, nil
}

// read merges one encoded Ack into a.
func (a *ack) read(b []byte) error {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return err
		}
		b = rest
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			a.ok = protowire.DecodeBool(f.varint)
		case f.num == 2 && f.typ == protowire.VarintType:
			a.duplicate = protowire.DecodeBool(f.varint)
		case (f.num == 3 || f.num == 4) && f.typ == protowire.BytesType: // message_id, session_id
			if !utf8.Valid(f.bytes) {
				return errMalformed
			}
		case f.num == 7 && f.typ == protowire.BytesType:
			if err := a.readError(f.bytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// readError merges one encoded MACPError into a.
func (a *ack) readError(b []byte) error {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return err
		}
		b = rest
		if f.num >= 1 && f.num <= 4 && f.typ == protowire.BytesType { // code, message, session_id, message_id
			if !utf8.Valid(f.bytes) {
				return errMalformed
			}
			if f.num == 1 {
				a.code = f.bytes
			}
		}
	}
	return nil
}

// field is one field of a message on the wire; varint and bytes hold the
// value of the two wire types read.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64
	bytes  []byte
}

// nextField reads the field b starts with and returns the rest of b.
func nextField(b []byte) (field, []byte, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num > protowire.MaxValidNumber || typ == protowire.EndGroupType {
		return field{}, nil, errMalformed
	}
	b = b[n:]
	f := field{num: num, typ: typ}
	switch typ {
	case protowire.VarintType:
		f.varint, n = protowire.ConsumeVarint(b)
	case protowire.BytesType:
		f.bytes, n = protowire.ConsumeBytes(b)
	default:
		n = protowire.ConsumeFieldValue(num, typ, b)
	}
	if n < 0 {
		return field{}, nil, errMalformed
	}
	return f, b[n:], nil
}
