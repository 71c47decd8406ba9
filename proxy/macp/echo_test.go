package macp

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// echoSeeds are runtime answers on a StreamSession: the ones the in-place
// reader reads, and the ones it leaves to the decoder.
func echoSeeds(t testing.TB) [][]byte {
	mk := func(m *macpv1.StreamSessionResponse) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	env := mk(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Envelope{Envelope: &macpv1.Envelope{
		MacpVersion: "1.0", Mode: "m", MessageType: "TaskUpdate", MessageId: "u1", SessionId: "s1", Sender: "agent://w", TimestampUnixMs: 7, Payload: []byte{1, 2}}}})
	refused := mk(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: &macpv1.MACPError{
		Code: "RATE_LIMITED", Message: "slow down", SessionId: "s1", MessageId: "u1", Details: []byte{3}}}})
	unbound := mk(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: &macpv1.MACPError{Code: "SESSION_NOT_FOUND", MessageId: "u2"}}})
	unknown := protowire.AppendTag(protowire.AppendTag(nil, 2, protowire.BytesType), 9, protowire.VarintType) // an error with a field outside MACPError
	unknown = append(protowire.AppendVarint(unknown[:1], 2), unknown[1:]...)
	unknown = protowire.AppendVarint(unknown, 1)
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), []byte{0xff}))
	return [][]byte{
		env, refused, unbound,
		append(append([]byte{}, env...), refused...), // two answers: the last one's kind, as the decoder reads it
		append(append([]byte{}, env...), env...),     // the same envelope twice: merged
		unknown, badUTF8, {}, {0x0a}, {0x12, 0x00},
		append(append([]byte{}, env...), 0x18, 0x01), // a field outside StreamSessionResponse
	}
}

// FuzzReadEcho holds the in-place reading of a runtime's StreamSession
// answer (readEchoFlat) to the decoder (decodeEcho): bytes it reads, the
// decoder reads into the same ids, type, payload, code and kind.
func FuzzReadEcho(f *testing.F) {
	for _, b := range echoSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkEcho)
}

func checkEcho(t *testing.T, b []byte) {
	got, ok := readEchoFlat(b)
	if !ok {
		return
	}
	want, ok := decodeEcho(b)
	if !ok {
		t.Fatalf("%x: read in place as %+v, the decoder refuses it", b, got)
	}
	if got.accepted != want.accepted || !bytes.Equal(got.id, want.id) || !bytes.Equal(got.session, want.session) || !bytes.Equal(got.code, want.code) ||
		!bytes.Equal(got.typ, want.typ) || !bytes.Equal(got.payload, want.payload) {
		t.Fatalf("%x: read in place as %+v, decoded as %+v", b, got, want)
	}
}

// TestReadEcho: the in-place reader reads the common answers (one envelope,
// one error) and leaves the rest to the decoder; readEcho reads every one
// the decoder does, as it does; an answer read in place costs no
// allocation (decodeEcho: 11 for the first two, 7 for the third).
func TestReadEcho(t *testing.T) {
	seeds := echoSeeds(t)
	for i, b := range seeds {
		_, flat := readEchoFlat(b)
		if want := i < 3 || i == 9; flat != want { // the three, and an empty error
			t.Errorf("seed %d (%x): read in place %v, want %v", i, b, flat, want)
		}
		got, ok := readEcho(b)
		want, wantOK := decodeEcho(b)
		if ok != wantOK || got.accepted != want.accepted || !bytes.Equal(got.id, want.id) || !bytes.Equal(got.session, want.session) || !bytes.Equal(got.code, want.code) {
			t.Errorf("seed %d (%x): readEcho %+v %v, decoder %+v %v", i, b, got, ok, want, wantOK)
		}
		checkEcho(t, b)
	}
	for _, b := range seeds[:3] {
		if n := testing.AllocsPerRun(100, func() { _, _ = readEcho(b) }); n != 0 {
			t.Errorf("%x: %.0f allocations, want none", b, n)
		}
	}
}
