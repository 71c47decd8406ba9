package macp

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// ackSeeds are SendResponses as runtimes send them, and wire shapes
// proto.Unmarshal reads in its own way.
func ackSeeds(t testing.TB) map[string][]byte {
	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok := enc(&macpv1.SendResponse{Ack: &macpv1.Ack{Ok: true, MessageId: "m", SessionId: "s", AcceptedAtUnixMs: 1700000000000, SessionState: macpv1.SessionState_SESSION_STATE_OPEN}})
	refused := enc(&macpv1.SendResponse{Ack: &macpv1.Ack{MessageId: "m", SessionId: "s",
		Error: &macpv1.MACPError{Code: "SESSION_NOT_FOUND", Message: "no such session", SessionId: "s", MessageId: "m", Details: []byte{0xff}}}})
	dup := enc(&macpv1.SendResponse{Ack: &macpv1.Ack{Ok: true, Duplicate: true}})
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	return map[string][]byte{
		"empty":          {},
		"accepted":       ok,
		"refused":        refused,
		"duplicate":      dup,
		"merged":         append(append([]byte{}, refused...), ok...),
		"unknown group":  append(append(append(tag(9, protowire.StartGroupType), tag(1, protowire.VarintType)...), 1), tag(9, protowire.EndGroupType)...),
		"ok as bytes":    protowire.AppendBytes(tag(1, protowire.BytesType), append(tag(1, protowire.BytesType), 0)),
		"bad utf-8 code": protowire.AppendBytes(tag(1, protowire.BytesType), protowire.AppendBytes(tag(7, protowire.BytesType), protowire.AppendBytes(tag(1, protowire.BytesType), []byte{0xff}))),
		"end group":      tag(1, protowire.EndGroupType),
		"field 0":        {0x00, 0x01},
		"field too high": protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1),
		"truncated":      ok[:len(ok)-1],
	}
}

// wantAck is readAck by proto.Unmarshal.
func wantAck(b []byte) (ack, bool) {
	var sr macpv1.SendResponse
	if proto.Unmarshal(b, &sr) != nil {
		return ack{}, false
	}
	a := sr.GetAck()
	return ack{ok: a.GetOk(), duplicate: a.GetDuplicate(), code: []byte(a.GetError().GetCode())}, true
}

func sameAck(t *testing.T, b []byte) {
	t.Helper()
	got, err := readAck(b)
	want, ok := wantAck(b)
	if (err == nil) != ok {
		t.Fatalf("readAck(%x): error %v, proto.Unmarshal decodes: %v", b, err, ok)
	}
	if ok && (got.ok != want.ok || got.duplicate != want.duplicate || string(got.code) != string(want.code)) {
		t.Fatalf("readAck(%x) = %+v, proto.Unmarshal reads %+v", b, got, want)
	}
}

func TestReadAck(t *testing.T) {
	seeds := ackSeeds(t)
	for name, b := range seeds {
		t.Run(name, func(t *testing.T) { sameAck(t, b) })
	}
	a, err := readAck(seeds["merged"])
	if err != nil || !a.ok || string(a.code) != "SESSION_NOT_FOUND" {
		t.Fatalf("merged: %+v %v", a, err)
	}
	if _, err := readAck(seeds["bad utf-8 code"]); err == nil {
		t.Fatal("an invalid UTF-8 error code was read")
	}
}

// FuzzReadAck checks readAck against proto.Unmarshal on arbitrary bytes:
// the same bytes refused, the same ok, duplicate and error code read.
func FuzzReadAck(f *testing.F) {
	for _, b := range ackSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(sameAck)
}

func BenchmarkReadAck(b *testing.B) {
	resp := ackSeeds(b)["refused"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readAck(resp); err != nil {
			b.Fatal(err)
		}
	}
}
