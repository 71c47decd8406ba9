package strictpb

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// walkTypes are the message types FuzzWalk reads bytes as: the decided
// requests and payloads, a map of strings (SessionMetadata), of bytes
// (SessionStartPayload) and of messages (Struct, which nests), lists of
// messages, and a type that may carry extensions (a slow shape).
var walkTypes = []func() proto.Message{
	func() proto.Message { return &macpv1.SendRequest{} },
	func() proto.Message { return &macpv1.Envelope{} },
	func() proto.Message { return &macpv1.SessionStartPayload{} },
	func() proto.Message { return &macpv1.SessionMetadata{} },
	func() proto.Message { return &macpv1.CommitmentPayload{} },
	func() proto.Message { return &macpv1.InitializeRequest{} },
	func() proto.Message { return &taskv1.TaskUpdatePayload{} },
	func() proto.Message { return &handoffv1.HandoffAcceptPayload{} },
	func() proto.Message { return &structpb.Struct{} },
	func() proto.Message { return &descriptorpb.FieldOptions{} },
}

// walkSeeds are a byte string per case the fuzz starts from: each valid
// and each refusal of TestUnmarshal's and TestMapEntryWireType's kinds.
func walkSeeds(t testing.TB) [][]byte {
	tag := func(b []byte, n protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(b, n, typ) }
	str := func(b []byte, n protowire.Number, v string) []byte {
		return protowire.AppendString(tag(b, n, protowire.BytesType), v)
	}
	vint := func(b []byte, n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(b, n, protowire.VarintType), v)
	}
	env := str(str(str(nil, 1, "1.0"), 3, "TaskUpdate"), 8, "\x0a\x01t")
	st, err := structpb.NewStruct(map[string]any{"a": map[string]any{"b": []any{1, "x", true}}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := proto.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{
		nil,
		str(nil, 1, string(env)),
		str(str(nil, 1, string(env)), 1, string(vint(nil, 6, 1))),
		vint(env, 7, 1<<40),
		str(env, 99, "x"),
		tag(tag(env, 50, protowire.StartGroupType), 50, protowire.EndGroupType),
		str(nil, 9, string(str(str(nil, 1, "k"), 2, "v"))),
		str(nil, 9, string(vint(str(nil, 1, "k"), 2, 1))),
		str(nil, 9, string(str(str(nil, 1, "k"), 3, "z"))),
		str(nil, 7, string(str(str(nil, 1, "file:///a"), 9, "x"))),
		vint(nil, 2, 1), protowire.AppendFixed64(tag(nil, 3, protowire.Fixed64Type), 1),
		str(nil, 3, "12345678"),
		sb,
		str(sb, 1, string(str(nil, 2, string(vint(nil, 9, 1))))),
		vint(vint(nil, 1, 1), 999, 1),
		str(nil, 1, "\xff"),
	}
}

// checkWalk holds a Reader's Unmarshal, which walks first, to the decoding
// path's judgement (decoded, then checked): the same error, or none and
// the same message.
func checkWalk(t *testing.T, r *Reader, typ int, b []byte) {
	t.Helper()
	got, want := walkTypes[typ](), walkTypes[typ]()
	gerr, werr := r.Unmarshal(b, got), (*Reader)(nil).unmarshal(b, want)
	// A path through a map names the first bad value's key Range met: two
	// bad values may be named either way round.
	outside := errors.Is(werr, ErrOutsideSchema)
	if errors.Is(gerr, ErrOutsideSchema) != outside || !outside && fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%T %x: walked %v, decoded and checked %v", want, b, gerr, werr)
	}
	if werr == nil && !proto.Equal(got, want) {
		t.Fatalf("%T %x: walked and decoded otherwise", want, b)
	}
}

// TestWalk runs the seeds as every type.
func TestWalk(t *testing.T) {
	r := new(Reader)
	for _, b := range walkSeeds(t) {
		for typ := range walkTypes {
			checkWalk(t, r, typ, b)
		}
	}
}

// TestWalkAccepts: the valid messages are accepted by the walk itself, not
// only by the decoding path it falls back on (which would make the walk a
// cost, not a saving), and the refusals are refused by it.
func TestWalkAccepts(t *testing.T) {
	r := new(Reader)
	env := &macpv1.Envelope{MacpVersion: "1.0", Mode: "m", MessageType: "TaskUpdate", MessageId: "u", SessionId: "s", Sender: "w", TimestampUnixMs: 3, Payload: []byte{1}}
	send, err := proto.Marshal(&macpv1.SendRequest{Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	start, err := proto.Marshal(&macpv1.SessionStartPayload{Intent: "i", Extensions: map[string][]byte{"k": {1}}, Roots: []*macpv1.Root{{Uri: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		msg  proto.Message
		b    []byte
		ok   bool
	}{
		{"SendRequest", &macpv1.SendRequest{}, send, true},
		{"SessionStartPayload", &macpv1.SessionStartPayload{}, start, true},
		{"an unknown field in the envelope", &macpv1.SendRequest{}, append(send[:len(send):len(send)], 0xf8, 0x01, 0x00), false},
		{"a map entry's value a varint", &macpv1.SessionStartPayload{},
			protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte{0x10, 0x01}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := walk(c.b, r.shape(c.msg.ProtoReflect().Descriptor()), 0); got != c.ok {
				t.Fatalf("walk %v, want %v", got, c.ok)
			}
		})
	}
}

// FuzzWalk holds the walk to the decoding path it replaces on accepted
// bytes: whatever a Reader accepts, the decoding path accepts and reads
// alike, and whatever it refuses, the decoding path refuses with the same
// words. The first byte picks the message type.
func FuzzWalk(f *testing.F) {
	for _, b := range walkSeeds(f) {
		for typ := range walkTypes {
			f.Add(append([]byte{byte(typ)}, b...))
		}
	}
	r := new(Reader)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		checkWalk(t, r, int(b[0])%len(walkTypes), b[1:])
	})
}

// BenchmarkWalk is the walk alone over a TaskUpdate's SendRequest.
func BenchmarkWalk(b *testing.B) {
	req, err := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1",
		MessageType: "TaskUpdate", MessageId: "u", SessionId: "00000000-0000-4000-8000-000000000000", Sender: "agent://worker", Payload: []byte("\x0a\x01t")}})
	if err != nil {
		b.Fatal(err)
	}
	var r Reader
	s := r.shape((&macpv1.SendRequest{}).ProtoReflect().Descriptor())
	b.ReportAllocs()
	for b.Loop() {
		if !walk(req, s, 0) {
			b.Fatal("refused")
		}
	}
}
