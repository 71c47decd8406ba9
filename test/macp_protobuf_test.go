package test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// pbField appends one field: a varint, a fixed32 or fixed64 (v's low bits),
// bytes, or a group (v its body); raw appends v after the tag unchanged.
func pbField(b []byte, num protowire.Number, typ protowire.Type, v any) []byte {
	b = protowire.AppendTag(b, num, typ)
	switch typ {
	case protowire.VarintType:
		return protowire.AppendVarint(b, v.(uint64))
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, uint32(v.(uint64)))
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, v.(uint64))
	case protowire.StartGroupType:
		b = append(b, v.([]byte)...)
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	return protowire.AppendBytes(b, v.([]byte))
}

// pbEntry is one map entry's bytes: the fields given, in order.
func pbEntry(fields ...func([]byte) []byte) []byte {
	var b []byte
	for _, f := range fields {
		b = f(b)
	}
	return b
}

func pbBytes(num protowire.Number, v string) func([]byte) []byte {
	return func(b []byte) []byte { return pbField(b, num, protowire.BytesType, []byte(v)) }
}

func pbVarint(num protowire.Number, v uint64) func([]byte) []byte {
	return func(b []byte) []byte { return pbField(b, num, protowire.VarintType, v) }
}

// pbRaw appends raw bytes (a tag or varint spelled by hand).
func pbRaw(raw ...byte) func([]byte) []byte {
	return func(b []byte) []byte { return append(b, raw...) }
}

// protobufCase is one encoding of a SessionStart sent as planner: extra
// fields appended to the payload, to the envelope or to the SendRequest.
type protobufCase struct {
	name                  string
	sender                string // the envelope's first sender; planner when ""
	payload, env, request []func([]byte) []byte
	// runtime: the runtime (prost) decodes and accepts it sent directly;
	// warden: Warden forwards it (and the runtime accepts it).
	runtime, warden bool
}

// sendRequest is the case's SendRequest for session sid.
func (c protobufCase) sendRequest(t *testing.T, sid string) []byte {
	t.Helper()
	p, err := proto.MarshalOptions{Deterministic: true}.Marshal(&macpv1.SessionStartPayload{Intent: "i", Participants: []string{"planner", "worker"},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000, Extensions: map[string][]byte{"a": []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	p = pbEntry(append([]func([]byte) []byte{pbRaw(p...)}, c.payload...)...)
	env, err := proto.Marshal(envelope(cmp.Or(c.sender, "planner"), sid, "SessionStart", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	env = pbField(env, 8, protowire.BytesType, p)
	env = pbEntry(append([]func([]byte) []byte{pbRaw(env...)}, c.env...)...)
	return pbEntry(append([]func([]byte) []byte{pbBytes(1, string(env))}, c.request...)...)
}

// goReading is the session metadata protobuf-go reads in b (what Warden
// decides on when it forwards b), nil when it does not decode.
func goReading(b []byte) *macpv1.SessionMetadata {
	var sr macpv1.SendRequest
	var p macpv1.SessionStartPayload
	if proto.Unmarshal(b, &sr) != nil || proto.Unmarshal(sr.GetEnvelope().GetPayload(), &p) != nil {
		return nil
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range p.GetExtensions() {
			if !yield(k) {
				return
			}
		}
	})
	env := sr.GetEnvelope()
	return &macpv1.SessionMetadata{SessionId: env.GetSessionId(), Mode: env.GetMode(), Initiator: env.GetSender(), Participants: p.GetParticipants(),
		ModeVersion: p.GetModeVersion(), ConfigurationVersion: p.GetConfigurationVersion(), PolicyVersion: p.GetPolicyVersion(),
		ContextId: p.GetContextId(), ExtensionKeys: keys, ExpiresAtUnixMs: p.GetTtlMs()}
}

// protobufCases are encodings of a SessionStart that protobuf-go and prost
// might read apart (docs/security.md, L6 and L7).
func protobufCases() []protobufCase {
	ext := func(entry ...func([]byte) []byte) func([]byte) []byte { return pbBytes(9, string(pbEntry(entry...))) }
	overlong := func(num protowire.Number, v uint64, n int) func([]byte) []byte { // v as an n-byte varint
		raw := protowire.AppendVarint(nil, v)
		for len(raw) < n {
			raw[len(raw)-1] |= 0x80
			raw = append(raw, 0)
		}
		return pbRaw(append(protowire.AppendTag(nil, num, protowire.VarintType), raw...)...)
	}
	tag := func(num uint64, typ protowire.Type) func([]byte) []byte { // any number, unchecked
		return pbRaw(protowire.AppendVarint(nil, num<<3|uint64(typ))...)
	}
	pp := func(f ...func([]byte) []byte) []func([]byte) []byte { return f }
	return []protobufCase{
		{name: "plain", runtime: true, warden: true},
		// map entries (L6)
		{name: "map entry: key a varint", payload: pp(ext(pbVarint(1, 7), pbBytes(2, "v")))},
		{name: "map entry: value a fixed32", payload: pp(ext(pbBytes(1, "k"), func(b []byte) []byte { return pbField(b, 2, protowire.Fixed32Type, uint64(7)) }))},
		{name: "map entry: key a group", payload: pp(ext(func(b []byte) []byte { return pbField(b, 1, protowire.StartGroupType, []byte(nil)) }, pbBytes(2, "v")))},
		{name: "map entry: no key", payload: pp(ext(pbBytes(2, "v"))), runtime: true, warden: true},
		{name: "map entry: key twice", payload: pp(ext(pbBytes(1, "k1"), pbBytes(1, "k2"), pbBytes(2, "v"))), runtime: true, warden: true},
		{name: "map entry: an unknown field", payload: pp(ext(pbBytes(1, "k"), pbBytes(3, "z"), pbBytes(2, "v"))), runtime: true, warden: true},
		{name: "map entry: key of invalid UTF-8", payload: pp(ext(pbBytes(1, "\xff"), pbBytes(2, "v")))},
		{name: "map: the entry a varint", payload: pp(pbVarint(9, 1))},
		{name: "map: the entry a group", payload: pp(func(b []byte) []byte { return pbField(b, 9, protowire.StartGroupType, []byte(nil)) })},
		// varints
		{name: "ttl_ms: a 10-byte varint", payload: pp(overlong(6, 600_000, 10)), runtime: true, warden: true},
		{name: "ttl_ms: an 11-byte varint", payload: pp(overlong(6, 600_000, 11))},
		{name: "ttl_ms: a 10th byte above 1", payload: pp(pbRaw(0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02))},
		{name: "ttl_ms: 2^64-1, read -1 by both", payload: pp(pbVarint(6, 1<<64-1))},
		{name: "ttl_ms: packed", payload: pp(pbBytes(6, "\x05"))},
		{name: "ttl_ms: a fixed64", payload: pp(func(b []byte) []byte { return pbField(b, 6, protowire.Fixed64Type, uint64(5)) })},
		{name: "a tag as a 10-byte varint", payload: pp(pbRaw(0x8a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 'z')), runtime: true, warden: true}, // field 1 (intent), "z"
		// field numbers and wire types
		{name: "field number 0", payload: pp(tag(0, protowire.VarintType), pbRaw(1))},
		{name: "field number 2^29-1 (unknown)", payload: pp(tag(1<<29-1, protowire.VarintType), pbRaw(1)), runtime: true},
		{name: "field number 2^29", payload: pp(tag(1<<29, protowire.VarintType), pbRaw(1))},
		{name: "wire type 6", payload: pp(tag(11, 6), pbRaw(1))},
		{name: "an unknown group", payload: pp(func(b []byte) []byte { return pbField(b, 50, protowire.StartGroupType, pbVarint(1, 1)(nil)) }), runtime: true},
		{name: "roots (a message) as a group", payload: pp(func(b []byte) []byte { return pbField(b, 7, protowire.StartGroupType, []byte(nil)) })},
		{name: "an end group alone", payload: pp(tag(50, protowire.EndGroupType))},
		{name: "a group ended by another number", payload: pp(tag(50, protowire.StartGroupType), tag(51, protowire.EndGroupType))},
		{name: "participants of invalid UTF-8", payload: pp(pbBytes(2, "\xc0\xaf"))},
		{name: "mode_version twice: last wins", payload: pp(pbBytes(3, "1.0.0")), runtime: true, warden: true},
		{name: "a length past the end", payload: pp(pbRaw(0x0a, 0x7f, 'x'))},
		// the envelope and the request
		{name: "envelope: sender twice, the last planner", sender: "mallory", env: pp(pbBytes(6, "planner")), runtime: true, warden: true},
		{name: "envelope: payload twice, the last empty", env: pp(pbBytes(8, "")), runtime: false, warden: false},
		{name: "envelope: timestamp a 10-byte varint", env: pp(overlong(7, uint64(time.Now().UnixMilli()), 10)), runtime: true, warden: true},
		{name: "request: envelope twice (merged), the second's sender planner", sender: "mallory", request: pp(pbBytes(1, string(pbBytes(6, "planner")(nil)))), runtime: true, warden: true},
		{name: "request: envelope as a group", request: pp(func(b []byte) []byte { return pbField(b, 1, protowire.StartGroupType, []byte(nil)) })},
	}
}

// TestMACPProtobufReadings sends SessionStarts spelled as no SDK spells
// them (docs/security.md L6, L7) to the real runtime directly and through
// bin/warden: each is refused by both, or accepted by both with the
// session the runtime reports (GetSession: initiator, participants,
// versions, extension keys, TTL) the one protobuf-go read, which is what
// Warden decided on. A row Warden forwards and the runtime reads
// otherwise is a bypass; one the runtime refuses and Warden forwards is a
// decision on a message the runtime never took.
func TestMACPProtobufReadings(t *testing.T) {
	protobufReadings(t, protobufCases, func(_ macpClient, c macpClient, _ string, b []byte) (bool, string, bool) {
		ack, err := c.sendRaw("planner", b)
		// Refused by Warden itself, before the runtime saw it: a decision
		// on a message the runtime does not take would be one on a message
		// of two readings.
		own := status.Code(err) == codes.InvalidArgument || strings.Contains(ack.GetError().GetMessage(), "warden decision")
		return err == nil && ack.GetOk(), fmt.Sprintf("%v %s %s", err, ack.GetError().GetCode(), ack.GetError().GetMessage()), own
	})
}

// protobufReadings runs the cases against the real runtime directly and
// through bin/warden (each front door), each case's request sent by call
// (to c; direct is the runtime), which reports whether the SessionStart
// was accepted, what was answered, and, refused, whether the refusal is
// Warden's own. An accepted one's session is the one protobuf-go reads.
func protobufReadings(t *testing.T, cases func() []protobufCase, call func(direct, c macpClient, sid string, b []byte) (accepted bool, detail string, own bool)) {
	runtime := startRuntime(t, "MACP_SESSION_START_LIMIT_PER_MINUTE=1000000")
	direct := dialMACP(t, runtime)
	eachTransport(t, func(t *testing.T) {
		warden := dialMACP(t, startWarden(t, runtime, "--auth", "dev", "--insecure-dev-auth", "--macp-session-start-limit-per-minute", "1000000"))
		for _, tc := range cases() { // built per door: a case dates its timestamp when built
			t.Run(tc.name, func(t *testing.T) {
				for _, door := range []struct {
					name string
					c    macpClient
					want bool
				}{{"runtime", direct, tc.runtime}, {"warden", warden, tc.warden}} {
					sid := newSession()
					b := tc.sendRequest(t, sid)
					accepted, detail, own := call(direct, door.c, sid, b)
					if accepted != door.want {
						t.Errorf("%s: accepted %v, want %v (%s)", door.name, accepted, door.want, detail)
					}
					if !accepted {
						if door.name == "warden" && !own {
							t.Errorf("warden forwarded it, the runtime refused it: %s", detail)
						}
						continue
					}
					sameReading(t, door.name, direct, sid, b)
				}
			})
		}
	})
}

// sameReading checks that the session the runtime started from b, a
// request whose envelope is a SessionStart of session sid, is the one
// protobuf-go reads in b, which is what Warden decided on (GetSession:
// initiator, participants, versions, extension keys, TTL).
func sameReading(t *testing.T, door string, direct macpClient, sid string, b []byte) {
	t.Helper()
	md, err := direct.session("planner", sid)
	if err != nil {
		t.Fatalf("%s: GetSession: %v", door, err)
	}
	want := goReading(b)
	want.PolicyVersion = cmp.Or(want.PolicyVersion, "policy.default") // the runtime's name for none
	got := proto.CloneOf(md)
	slices.Sort(got.ExtensionKeys)
	if ttl := got.GetExpiresAtUnixMs() - got.GetStartedAtUnixMs(); ttl > want.ExpiresAtUnixMs-1000 && ttl <= want.ExpiresAtUnixMs {
		got.ExpiresAtUnixMs = want.ExpiresAtUnixMs // the runtime reads its clock twice
	}
	got.StartedAtUnixMs, got.State, got.ParticipantActivity = 0, 0, nil
	if !proto.Equal(got, want) {
		t.Errorf("%s: the runtime read %v, protobuf-go (Warden) %v", door, got, want)
	}
}
