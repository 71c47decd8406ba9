package strictpb_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	"github.com/agentwarden/warden/wire/strictpb"
)

// field appends one length-delimited field.
func field(b []byte, n protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func varint(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func envelope(extra ...func([]byte) []byte) []byte {
	b := field(nil, 1, []byte("1.0"))
	b = field(b, 2, []byte("macp.mode.task.v1"))
	b = field(b, 3, []byte("TaskAccept"))
	b = field(b, 4, []byte("m1"))
	b = field(b, 5, []byte("s1"))
	b = field(b, 6, []byte("agent://bob"))
	for _, f := range extra {
		b = f(b)
	}
	return b
}

// TestUnmarshal: what prost refuses (or would read otherwise) is refused at
// any depth; what both readers read alike passes. protobuf-go alone accepts
// every "refused" row but the UTF-8 and depth ones.
func TestUnmarshal(t *testing.T) {
	nested := func(env []byte) []byte { return field(nil, 1, env) } // SendRequest.envelope
	deep := []byte{}
	for range strictpb.MaxDepth + 1 {
		deep = field(nil, 7, deep) // roots[0] holds a field 7 Root does not define, and so on down
	}
	cases := []struct {
		name   string
		msg    func() proto.Message
		b      []byte
		refuse bool
	}{
		{"plain envelope", func() proto.Message { return &macpv1.Envelope{} }, envelope(), false},
		{"sender repeated as a varint", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte { return varint(b, 6, 1) }), true},
		{"payload as a fixed32", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte {
				return protowire.AppendFixed32(protowire.AppendTag(b, 8, protowire.Fixed32Type), 7)
			}), true},
		{"timestamp as bytes", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte { return field(b, 7, []byte("x")) }), true},
		{"unknown field number", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte { return field(b, 99, []byte("x")) }), true},
		{"unknown group", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte {
				b = protowire.AppendTag(b, 50, protowire.StartGroupType)
				return protowire.AppendTag(b, 50, protowire.EndGroupType)
			}), true},
		{"invalid UTF-8", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte { return field(b, 6, []byte{0xff, 0xfe}) }), true},
		{"nested: wrong wire type inside SendRequest.envelope", func() proto.Message { return &macpv1.SendRequest{} },
			nested(envelope(func(b []byte) []byte { return varint(b, 6, 1) })), true},
		{"nested: plain", func() proto.Message { return &macpv1.SendRequest{} }, nested(envelope()), false},
		{"nested: truncated", func() proto.Message { return &macpv1.SendRequest{} }, nested(envelope())[:20], true},
		{"list element: unknown field in SessionStartPayload.roots[0]", func() proto.Message { return &macpv1.SessionStartPayload{} },
			field(nil, 7, field(field(nil, 1, []byte("file:///a")), 9, []byte("x"))), true},
		{"list element: plain", func() proto.Message { return &macpv1.SessionStartPayload{} },
			field(nil, 7, field(nil, 1, []byte("file:///a"))), false},
		{"map of bytes", func() proto.Message { return &macpv1.SessionStartPayload{} },
			field(nil, 9, field(field(nil, 1, []byte("k")), 2, []byte("v"))), false},
		{"unknown fields nested past the depth limit", func() proto.Message { return &macpv1.SessionStartPayload{} }, deep, true},
		// read alike by both: must pass
		{"sender twice, last wins", func() proto.Message { return &macpv1.Envelope{} },
			envelope(func(b []byte) []byte { return field(b, 6, []byte("agent://carol")) }), false},
		{"fields out of order", func() proto.Message { return &macpv1.Envelope{} },
			field(field(nil, 6, []byte("agent://bob")), 1, []byte("1.0")), false},
		{"overlong varint", func() proto.Message { return &macpv1.Envelope{} },
			append(protowire.AppendTag(nil, 7, protowire.VarintType), 0x81, 0x80, 0x00), false},
	}
	cached := new(strictpb.Reader) // its plans carry over from case to case
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := strictpb.Unmarshal(c.b, c.msg())
			if (err != nil) != c.refuse {
				t.Fatalf("Unmarshal: %v, want refused %v", err, c.refuse)
			}
			if cerr := cached.Unmarshal(c.b, c.msg()); fmt.Sprint(cerr) != fmt.Sprint(err) {
				t.Fatalf("a Reader's Unmarshal: %v, the package's %v", cerr, err)
			}
		})
	}
}

// TestKnownNamesThePath: the error names the path of the first message
// outside its schema, through nested messages and list indexes.
func TestKnownNamesThePath(t *testing.T) {
	bad := func(b []byte) []byte { return varint(b, 6, 1) }
	root := func(extra ...func([]byte) []byte) []byte { // a Root: uri = 1, name = 2
		b := field(nil, 1, []byte("r"))
		for _, f := range extra {
			b = f(b)
		}
		return b
	}
	start := func(roots ...[]byte) []byte { // SessionStartPayload.roots = 7
		b := field(nil, 1, []byte("intent"))
		for _, r := range roots {
			b = field(b, 7, r)
		}
		return b
	}
	for _, c := range []struct {
		name string
		msg  proto.Message
		b    []byte
		want string
	}{
		{"top", &macpv1.Envelope{}, envelope(bad), "Envelope"},
		{"nested", &macpv1.SendRequest{}, field(nil, 1, envelope(bad)), "SendRequest.envelope"},
		{"list", &macpv1.SessionStartPayload{}, start(root(), root(func(b []byte) []byte { return field(b, 9, nil) })), "SessionStartPayload.roots[1]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []*strictpb.Reader{nil, new(strictpb.Reader)} {
				err := r.Unmarshal(c.b, proto.Clone(c.msg))
				if !errors.Is(err, strictpb.ErrOutsideSchema) || err.Error() != c.want+": fields outside the message's schema" {
					t.Fatalf("reader %p: err = %v, want %s", r, err, c.want)
				}
			}
		})
	}
}

// BenchmarkUnmarshal decodes the SendRequest of a TaskUpdate, as every
// decided Send is.
func BenchmarkUnmarshal(b *testing.B) {
	payload := field(field(nil, 1, []byte("t1")), 2, []byte("running"))
	req := field(nil, 1, envelope(func(b []byte) []byte { return field(b, 8, payload) }))
	var r strictpb.Reader
	b.ReportAllocs()
	for b.Loop() {
		var m macpv1.SendRequest
		if err := r.Unmarshal(req, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzUnmarshal: whatever strictpb accepts, protobuf-go reads with nothing
// left over, and reads the same when unknown fields are discarded.
func FuzzUnmarshal(f *testing.F) {
	f.Add(field(nil, 1, envelope()))
	f.Add(field(nil, 1, envelope(func(b []byte) []byte { return varint(b, 6, 1) })))
	var r strictpb.Reader
	f.Fuzz(func(t *testing.T, b []byte) {
		var strict, cached macpv1.SendRequest
		err := strictpb.Unmarshal(b, &strict)
		if cerr := r.Unmarshal(b, &cached); fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Fatalf("a Reader's Unmarshal: %v, the package's %v", cerr, err)
		}
		if err != nil {
			return
		}
		var lax macpv1.SendRequest
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &lax); err != nil {
			t.Fatalf("accepted, but protobuf-go refuses it: %v", err)
		}
		if !proto.Equal(&strict, &lax) {
			t.Fatal("accepted a message with fields protobuf-go discards")
		}
	})
}

// BenchmarkKnown checks decoded messages: the SendRequest of a TaskUpdate,
// and a SessionStartPayload holding a list of messages.
func BenchmarkKnown(b *testing.B) {
	payload := field(field(nil, 1, []byte("t1")), 2, []byte("running"))
	root := field(field(nil, 1, []byte("r")), 2, []byte("n"))
	for _, bc := range []struct {
		name string
		msg  proto.Message
		b    []byte
	}{
		{"SendRequest", &macpv1.SendRequest{}, field(nil, 1, envelope(func(b []byte) []byte { return field(b, 8, payload) }))},
		{"SessionStartPayload", &macpv1.SessionStartPayload{}, field(field(field(nil, 1, []byte("intent")), 7, root), 7, root)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := proto.Unmarshal(bc.b, bc.msg); err != nil {
				b.Fatal(err)
			}
			var r strictpb.Reader
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Known(bc.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/no-reader", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := strictpb.Known(bc.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
