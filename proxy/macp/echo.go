package macp

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// echo is what settleEcho reads of a runtime's StreamSessionResponse: an
// envelope's (accepted) or an error's (!accepted) message and session ids,
// the envelope's type and payload, and the error's code. All are
// sub-slices of the message.
type echo struct {
	accepted    bool
	id, session []byte
	typ         []byte // an envelope's message_type
	payload     []byte // an envelope's
	code        []byte
}

// echoes reports whether e, an envelope the runtime published with sent's
// id, is sent accepted: of its session, its type and its payload (the
// runtime names the sender itself, from the credential it was sent, and
// keeps the rest as sent).
func (e echo) echoes(sent *macpv1.Envelope) bool {
	return e.accepted && string(e.session) == sent.GetSessionId() && string(e.typ) == sent.GetMessageType() && bytes.Equal(e.payload, sent.GetPayload())
}

// echoEnvelopeFlat and echoErrorFlat are the schemas of the Envelope and
// MACPError (code, message, session_id, message_id, details).
const (
	echoEnvelopeFlat strictpb.Flat = "ssssssvy"
	echoErrorFlat    strictpb.Flat = "ssssy"
)

// readEcho reads a runtime's StreamSessionResponse for settleEcho (ok: it
// carries an envelope or an error, as proto.Unmarshal reads it): in place
// when it is one envelope or one error field and nothing else, each one
// its schema reads (FuzzReadEcho holds it to the decoder), else decoded.
func readEcho(b []byte) (e echo, ok bool) {
	if e, ok := readEchoFlat(b); ok {
		return e, true
	}
	return decodeEcho(b)
}

// readEchoFlat is readEcho in place; ok is false for whatever it does not
// read (which the decoder then reads).
func readEchoFlat(b []byte) (echo, bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || (num != 1 && num != 2) || typ != protowire.BytesType {
		return echo{}, false
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return echo{}, false
	}
	if num == 1 {
		var vals [len(echoEnvelopeFlat)][]byte
		if !echoEnvelopeFlat.Read(v, vals[:]) {
			return echo{}, false
		}
		return echo{accepted: true, id: vals[3], session: vals[4], typ: vals[2], payload: vals[7]}, true
	}
	var vals [len(echoErrorFlat)][]byte
	if !echoErrorFlat.Read(v, vals[:]) {
		return echo{}, false
	}
	return echo{id: vals[3], session: vals[2], code: vals[0]}, true
}

// decodeEcho is readEcho by proto.Unmarshal.
func decodeEcho(b []byte) (echo, bool) {
	var resp macpv1.StreamSessionResponse
	if proto.Unmarshal(b, &resp) != nil {
		return echo{}, false
	}
	if env := resp.GetEnvelope(); env != nil {
		return echo{accepted: true, id: []byte(env.GetMessageId()), session: []byte(env.GetSessionId()), typ: []byte(env.GetMessageType()), payload: env.GetPayload()}, true
	}
	if e := resp.GetError(); e != nil {
		return echo{id: []byte(e.GetMessageId()), session: []byte(e.GetSessionId()), code: []byte(e.GetCode())}, true
	}
	return echo{}, false
}
