package admission

import (
	"google.golang.org/protobuf/encoding/protowire"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// envelopeFlat is the Envelope's schema: macp_version, mode, message_type,
// message_id, session_id, sender, timestamp_unix_ms, payload.
const envelopeFlat strictpb.Flat = "ssssssvy"

// envelopeStrings is how many of the Envelope's fields, from the first,
// are strings.
const envelopeStrings = 6

// readSend reads a SendRequest's envelope in place, or a
// StreamSessionRequest's (both carry it as field 1), reporting whether it
// could: msg is one envelope field and nothing else, and the envelope one
// envelopeFlat reads (FuzzReadSend holds it to strictpb.Unmarshal). The
// envelope's payload is a sub-slice of msg (its capacity cut), and its six
// strings share one allocation, so that a Send costs two (the envelope and
// its strings) where decoding it costs one per field and the request. A
// string kept past the decision (a session's id, a TaskComplete's
// message_id) keeps the other five alive with it: each is one the rules
// accept only when it matches what the session or the protocol holds (the
// sender is the principal, the version and type the protocol's), so
// they are not a client's to make large. Whatever it does not read, a
// request without an envelope or with two (which protobuf merges), a
// stream's subscription, goes the decoding path, which judges it and
// words why.
func readSend(msg []byte) (*macpv1.Envelope, bool) {
	num, typ, n := protowire.ConsumeTag(msg)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return nil, false
	}
	b, m := protowire.ConsumeBytes(msg[n:])
	if m < 0 || n+m != len(msg) {
		return nil, false
	}
	var vals [len(envelopeFlat)][]byte
	if !envelopeFlat.Read(b, vals[:]) {
		return nil, false
	}
	var room [256]byte // the strings, copied out of msg once
	all := room[:0]
	for _, v := range vals[:envelopeStrings] {
		all = append(all, v...)
	}
	s := string(all)
	var str [envelopeStrings]string
	for i, v := range vals[:envelopeStrings] {
		str[i], s = s[:len(v)], s[len(v):]
	}
	var ts uint64
	if v := vals[6]; v != nil {
		ts, _ = protowire.ConsumeVarint(v)
	}
	return &macpv1.Envelope{MacpVersion: str[0], Mode: str[1], MessageType: str[2], MessageId: str[3], SessionId: str[4], Sender: str[5],
		TimestampUnixMs: int64(ts), Payload: vals[7]}, true
}

// StreamMessage reads one client message of a StreamSession for its
// decision: its envelope in place when the message is that alone
// (readSend, as a Send's), else decoded as the runtime reads it
// (strictpb), with the subscription it may carry instead. refusal, when
// not empty, is why the message is refused (INVALID_ENVELOPE, on the
// stream).
func (g *Gate) StreamMessage(msg []byte) (env *macpv1.Envelope, subscribe, refusal string) {
	if env, ok := readSend(msg); ok {
		return env, "", ""
	}
	var req macpv1.StreamSessionRequest
	if err := g.Unmarshal(msg, &req); err != nil {
		return nil, "", "StreamSessionRequest does not decode"
	}
	if req.GetEnvelope() != nil && req.GetSubscribeSessionId() != "" {
		// The runtime refuses the frame (RFC-MACP-0006 §3.2) and ends
		// the stream: deciding the envelope alone would commit what it
		// never applies, and pass a subscription nobody checked.
		return nil, "", "StreamSessionRequest must not contain both envelope and subscribe_session_id"
	}
	return req.GetEnvelope(), req.GetSubscribeSessionId(), ""
}
