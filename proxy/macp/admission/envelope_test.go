package admission

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// sendSeeds are SendRequests readSend must judge as strictpb does: a
// TaskUpdate's, fields sent twice, each refusal of strictpb's, and the
// shapes it leaves to the decoding path (no envelope, two envelopes).
func sendSeeds(t testing.TB) [][]byte {
	full, err := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1",
		MessageType: "TaskUpdate", MessageId: "m1", SessionId: "s1", Sender: "alice", TimestampUnixMs: 1_700_000_000_000,
		Payload: []byte("\x0a\x01t")}})
	if err != nil {
		t.Fatal(err)
	}
	tag := func(b []byte, n protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(b, n, typ) }
	str := func(b []byte, n protowire.Number, v string) []byte {
		return protowire.AppendString(tag(b, n, protowire.BytesType), v)
	}
	vint := func(b []byte, n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(b, n, protowire.VarintType), v)
	}
	send := func(env []byte) []byte { return str(nil, 1, string(env)) }
	env := str(str(str(nil, 1, "1.0"), 3, "TaskUpdate"), 8, "\x0a\x01t")
	return [][]byte{
		full, full[:len(full)-1], nil, send(nil),
		send(env),
		send(str(env, 4, "\xff")),                    // invalid UTF-8
		send(str(env, 8, "\xff")),                    // bytes need none
		send(str(env, 4, "a")),                       // a string twice: the last
		send(vint(vint(env, 7, 5), 7, 1<<63)),        // a varint twice, one negative as int64
		send(str(env, 9, "x")),                       // unknown field
		send(vint(env, 2, 1)),                        // a known field of another wire type
		send(str(env, 7, "x")),                       // the varint as bytes
		append(send(env), send(str(nil, 2, "m"))...), // two envelopes: merged
		append(send(env), str(nil, 2, "x")...),       // unknown SendRequest field
		vint(nil, 1, 1),                              // the envelope as a varint
		send(tag(tag(env, 50, protowire.StartGroupType), 50, protowire.EndGroupType)),
		append(send(env), 0x80), // a truncated tag after it
	}
}

// checkSend holds readSend to the decoding path: what it reads, strictpb
// reads alike; what it refuses goes that path.
func checkSend(t *testing.T, b []byte) {
	t.Helper()
	env, ok := readSend(b)
	var sr macpv1.SendRequest
	err := strictpb.Unmarshal(b, &sr)
	if !ok {
		return
	}
	if err != nil || sr.GetEnvelope() == nil {
		t.Fatalf("%x: read in place, strictpb: %v (envelope %v)", b, err, sr.GetEnvelope())
	}
	if !proto.Equal(env, sr.GetEnvelope()) {
		t.Fatalf("%x: read in place as %v, strictpb reads %v", b, env, sr.GetEnvelope())
	}
	if p := env.GetPayload(); cap(p) != len(p) {
		t.Fatalf("%x: the payload's capacity %d reaches past it (%d)", b, cap(p), len(p))
	}
}

// TestReadSend: the seeds read alike, and readSend reads the usual Send in
// place (else it would hold only by refusing everything).
func TestReadSend(t *testing.T) {
	seeds := sendSeeds(t)
	for _, b := range seeds {
		checkSend(t, b)
	}
	for i, want := range map[int]bool{0: true, 4: true, 5: false, 7: true, 8: true, 9: false, 12: false} {
		if _, ok := readSend(seeds[i]); ok != want {
			t.Errorf("seed %d %x: read in place %v, want %v", i, seeds[i], ok, want)
		}
	}
}

// FuzzReadSend holds the in-place reading of a SendRequest's envelope to
// strictpb.Unmarshal: bytes it reads, strictpb reads, into the same
// envelope.
func FuzzReadSend(f *testing.F) {
	for _, b := range sendSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkSend)
}

// TestRequestSendWording: a Send the in-place reader refuses is answered
// in the decoder's words, as before it.
func TestRequestSendWording(t *testing.T) {
	g := &Gate{}
	seeds := sendSeeds(t)
	for _, tc := range []struct {
		msg  []byte
		want string
	}{
		{seeds[2], "SendRequest does not decode or carries no envelope: no envelope"},
		{seeds[9], "SendRequest does not decode or carries no envelope: SendRequest.envelope: fields outside the message's schema"},
		{seeds[5], "SendRequest does not decode or carries no envelope: string field contains invalid UTF-8"},
	} {
		_, r := g.Request(&Admission{Call: CallSend}, tc.msg)
		if r == nil || r.AckMessage != tc.want || r.Text != "INVALID_ENVELOPE: "+tc.want {
			t.Errorf("%x: refusal %+v, want %q", tc.msg, r, tc.want)
		}
	}
	r, refused := g.Request(&Admission{Call: CallSend}, seeds[12]) // two envelopes, merged by the decoder
	if refused != nil || r.Envelope.GetMode() != "m" || r.Envelope.GetMessageType() != "TaskUpdate" {
		t.Errorf("two envelopes: %v %+v, want them merged", r.Envelope, refused)
	}
}

// BenchmarkRequestSend reads a TaskUpdate's SendRequest for the decision:
// in place (Gate.Request), and by decoding it (the path it takes when the
// in-place reader refuses it, and every Send's before).
func BenchmarkRequestSend(b *testing.B) {
	msg := sendSeeds(b)[0]
	g := &Gate{}
	b.Run("in-place", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, r := g.Request(&Admission{Call: CallSend}, msg); r != nil {
				b.Fatal(r.Text)
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var sr macpv1.SendRequest
			if err := g.Unmarshal(msg, &sr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// streamSeeds are sendSeeds and the shapes only a StreamSessionRequest
// has: a subscription, with an envelope, twice, after a sequence.
func streamSeeds(t testing.TB) [][]byte {
	seeds := sendSeeds(t)
	env := seeds[4]
	sub := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "s1")
	after := protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 7)
	empty := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "")
	return append(seeds, sub, append(sub, after...), append(env, sub...), append(sub, env...),
		append(env, after...), append(env, empty...), append(sub, sub...))
}

// checkStream holds a StreamSession message's reading to the unary path's
// and to strictpb: an envelope both read is the same envelope, read in
// place as a Send's is (its payload a sub-slice of b) when readSend reads
// it; the rest reads as strictpb decodes a StreamSessionRequest, refused
// in the decoding path's words.
func checkStream(t *testing.T, b []byte) {
	t.Helper()
	g := &Gate{}
	env, sub, refusal := g.StreamMessage(b)
	if r, ref := g.Request(&Admission{Call: CallSend}, b); ref == nil && env != nil && !proto.Equal(env, r.Envelope) {
		t.Fatalf("%x: streamed as %v, sent as %v", b, env, r.Envelope)
	}
	if in, ok := readSend(b); ok {
		p, q := env.GetPayload(), in.GetPayload()
		if len(p) > 0 && &p[0] != &q[0] {
			t.Fatalf("%x: a Send's envelope read in place, the stream's copied", b)
		}
		if len(p) > 0 && cap(p) != len(p) {
			t.Fatalf("%x: the payload's capacity %d reaches past it (%d)", b, cap(p), len(p))
		}
	}
	var req macpv1.StreamSessionRequest
	err := strictpb.Unmarshal(b, &req)
	switch {
	case err != nil:
		if refusal != "StreamSessionRequest does not decode" {
			t.Fatalf("%x: strictpb: %v; read as %v %q refusal %q", b, err, env, sub, refusal)
		}
	case req.GetEnvelope() != nil && req.GetSubscribeSessionId() != "":
		if refusal != "StreamSessionRequest must not contain both envelope and subscribe_session_id" {
			t.Fatalf("%x: both set; read as %v %q refusal %q", b, env, sub, refusal)
		}
	case refusal != "" || sub != req.GetSubscribeSessionId() || !proto.Equal(env, req.GetEnvelope()) || (env == nil) != (req.GetEnvelope() == nil):
		t.Fatalf("%x: read as %v %q refusal %q, strictpb reads %v", b, env, sub, refusal, &req)
	}
}

// TestStreamMessage: the seeds read alike on the stream, as a Send and by
// strictpb.
func TestStreamMessage(t *testing.T) {
	for _, b := range streamSeeds(t) {
		checkStream(t, b)
	}
}

// FuzzStreamMessage holds a StreamSession message's reading to the unary
// path's and to strictpb.Unmarshal.
func FuzzStreamMessage(f *testing.F) {
	for _, b := range streamSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkStream)
}
