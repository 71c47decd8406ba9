package test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// streamProtobufCases are the readings of protobufCases sent as a
// StreamSessionRequest (its envelope is field 1, as a SendRequest's), plus
// the request's own fields around the envelope: subscribe_session_id (2)
// and after_sequence (3), which a StreamSessionRequest has and a
// SendRequest does not.
func streamProtobufCases() []protobufCase {
	pp := func(f ...func([]byte) []byte) []func([]byte) []byte { return f }
	other := newSession()
	return append(protobufCases(), []protobufCase{
		{name: "stream: subscribe_session_id empty beside the envelope", request: pp(pbBytes(2, "")), runtime: true, warden: true},
		{name: "stream: after_sequence beside the envelope", request: pp(pbVarint(3, 5)), runtime: true, warden: true},
		{name: "stream: subscribe_session_id twice, the last empty", request: pp(pbBytes(2, other), pbBytes(2, "")), runtime: true, warden: true},
		{name: "stream: subscribe_session_id beside the envelope", request: pp(pbBytes(2, other))},
		{name: "stream: subscribe_session_id a varint", request: pp(pbVarint(2, 1))},
		{name: "stream: after_sequence packed", request: pp(pbBytes(3, "\x05"))},
		{name: "stream: after_sequence an 11-byte varint", request: pp(pbRaw(0x18, 0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00))},
		{name: "stream: an unknown field (refused by Warden alone)", request: pp(pbVarint(4, 1)), runtime: true},
		{name: "stream: an empty envelope after the envelope (merged)", request: pp(pbBytes(1, "")), runtime: true, warden: true},
	}...)
}

// TestMACPProtobufStreamReadings is TestMACPProtobufReadings on
// StreamSession: each encoding of a SessionStart sent as the one message
// of a stream, to the real runtime directly and through bin/warden, is
// refused by both, or accepted by both (the runtime echoes it) with the
// session the runtime reports the one protobuf-go read. The stream's
// envelope is read by the Send path's in-place reader (readSend) when the
// message is the envelope alone, else decoded with its subscription
// (strictpb): the two paths must give the runtime's reading. A guard: it
// passes on main (docs/security.md, sixteenth pass).
func TestMACPProtobufStreamReadings(t *testing.T) {
	protobufReadings(t, streamProtobufCases, func(direct, c macpClient, sid string, b []byte) (bool, string, bool) {
		accepted, detail := c.streamRaw("planner", sid, b)
		// A refusal on the stream names no decision (the runtime's words
		// and Warden's for a frame are the same): Warden's own is one
		// after which the runtime holds no session sid.
		_, err := direct.session("planner", sid)
		return accepted, detail, err != nil
	})
}

// streamRaw sends b, a StreamSessionRequest's bytes, as the one message of
// a StreamSession as who, and reports whether the runtime accepted the
// envelope (it echoes an envelope of session sid), with what the stream
// answered otherwise.
func (c macpClient) streamRaw(who, sid string, b []byte) (bool, string) {
	ctx, cancel := as(who)
	defer cancel()
	ctx, cancelRead := context.WithTimeout(ctx, 5*time.Second)
	defer cancelRead()
	s, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, macpService+"StreamSession", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return false, err.Error()
	}
	if err := s.SendMsg(rawMsg(b)); err != nil {
		return false, "send: " + err.Error()
	}
	var resp macpv1.StreamSessionResponse
	if err := s.RecvMsg(&resp); err != nil {
		return false, "stream ended: " + err.Error()
	}
	if e := resp.GetError(); e != nil {
		return false, "error: " + e.GetCode() + " " + e.GetMessage()
	}
	env := resp.GetEnvelope()
	return env.GetSessionId() == sid && env.GetMessageType() == "SessionStart", "echo " + env.GetSessionId() + " " + env.GetMessageType()
}
