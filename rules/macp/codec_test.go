package macp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// policyPtr hides the one thing a decoded session may not share with its
// original: the address of an equal policy.
var policyPtr = regexp.MustCompile(`policy=0x[0-9a-f]+ `)

func comparable(s *Session) string { return policyPtr.ReplaceAllString(dump(s), "policy=") }

// roundTrip encodes s, decodes it and checks that the copy holds every field
// of the original and encodes to the same bytes.
func roundTrip(t testing.TB, label string, s *Session) *Session {
	t.Helper()
	b, err := s.AppendBinary(nil)
	if err != nil {
		t.Fatalf("%s: encode: %v", label, err)
	}
	c, err := DecodeSession(b)
	if err != nil {
		t.Fatalf("%s: decode: %v", label, err)
	}
	if got, want := comparable(c), comparable(s); got != want {
		t.Fatalf("%s: decoded session differs:\ngot  %s\nwant %s", label, got, want)
	}
	again, _ := c.AppendBinary(nil)
	if !bytes.Equal(again, b) {
		t.Fatalf("%s: re-encoding differs", label)
	}
	return c
}

// TestCodecRoundTrip decodes every state the golden scenarios and the fuzz
// corpus pass through and checks that the copy decides the next messages as
// the original does: a replica that loads a session decides like the one
// that stored it.
func TestCodecRoundTrip(t *testing.T) {
	for _, st := range fuzzStates() {
		t.Run(st.name, func(t *testing.T) {
			c := roundTrip(t, st.name, st.s)
			for j, typ := range fuzzTypes {
				p := samplePayload(st.s.Mode, typ)
				if p == nil {
					continue
				}
				for k, sender := range fuzzSenders {
					id := fmt.Sprintf("m-%d", (j+k)%24) // some collide with accepted ids
					env := fuzzEnvelope(st.s, typ, 0, id, sender, p)
					a, b := Step(st.s, env, sender, t0+100), Step(c, env, sender, t0+100)
					if a.Verdict != b.Verdict || a.Duplicate != b.Duplicate || comparable(a.Next) != comparable(b.Next) {
						t.Fatalf("%s from %s: original %+v, decoded %+v", typ, sender, a.Verdict, b.Verdict)
					}
				}
			}
		})
	}
}

// TestCodecGolden pins version 3 of the encoding: a session built with a
// fixed key encodes to testdata/session_v3.golden, which decodes back; the
// version 2 and 1 encodings of the same sessions (testdata/session_v2.golden
// and session_v1.golden, what replicas of earlier releases store) decode to
// the same sessions.
func TestCodecGolden(t *testing.T) {
	var files []string
	for _, sc := range goldenScenarios {
		s, _ := sc.su.start()
		s.ID, s.key = "s-"+sc.name, [2]uint64{0x0706050403020100, 0x0f0e0d0c0b0a0908} // the id is random
		start := sc.su.envelope()                                                     // its id was hashed with Start's random key
		s.seen[0] = seenID{hash: s.idHash(start.GetMessageId()), sender: s.seen[0].sender, content: s.contentDigest(start)}
		s = walk(s, sc.msgs, func(int, *Session) {})
		b, _ := s.AppendBinary(nil)
		files = append(files, sc.name+" "+hex.EncodeToString(b))
	}
	got := strings.Join(files, "\n") + "\n"
	file := filepath.Join("testdata", "session_v3.golden")
	checkGolden(t, file, got) // if it differs, bump the version and keep decoding the old ones
	v3 := map[string][]byte{}
	for _, version := range []string{"v3", "v2", "v1"} {
		want, err := os.ReadFile(filepath.Join("testdata", "session_"+version+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
			name, h, _ := strings.Cut(line, " ")
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatal(err)
			}
			s, err := DecodeSession(b)
			if err != nil {
				t.Fatalf("%s %s: %v", version, name, err)
			}
			again, _ := s.AppendBinary(nil)
			if version == "v3" {
				v3[name] = b
			} else {
				b = v3[name]
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("%s %s: the golden encoding does not decode to the session", version, name)
			}
		}
	}
}

func TestDecodeSessionRefuses(t *testing.T) {
	good, _ := fuzzStates()[3].s.AppendBinary(nil)
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"other version", append([]byte{4}, good[1:]...)},
		{"unknown policy kind", func() []byte {
			b := append([]byte{}, good...)
			st := fuzzStates()[3].s
			at := bytes.Index(b, []byte(st.policy().Canonical)) - 2 // the kind, then a one-byte length
			if at < 0 || b[at] != policyBound {
				t.Fatal("the policy kind is not where the test expects it")
			}
			b[at] = 7
			return b
		}()},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"huge list", []byte{codecV2, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"bad state", func() []byte {
			b := append([]byte{}, good...)
			b[3+len(fuzzStates()[3].s.ID)+len(fuzzStates()[3].s.Mode)] = 9
			return b
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := DecodeSession(c.in)
			if err == nil || s != nil || !errors.Is(err, errCodec) {
				t.Fatalf("DecodeSession = %v, %v; want an encoding error", s, err)
			}
		})
	}
}

// FuzzDecodeSession: any input decodes or fails cleanly; what decodes
// re-encodes to an encoding that decodes to the same bytes, and the rules
// can step the decoded session without panicking.
func FuzzDecodeSession(f *testing.F) {
	for _, st := range fuzzStates() {
		b, _ := st.s.AppendBinary(nil)
		f.Add(b)
	}
	f.Add([]byte{codecV1})
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := DecodeSession(in)
		if err != nil {
			if s != nil {
				t.Fatal("a session with an error")
			}
			return
		}
		b, _ := s.AppendBinary(nil)
		c, err := DecodeSession(b)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if again, _ := c.AppendBinary(nil); !bytes.Equal(again, b) {
			t.Fatal("re-encoding is not stable")
		}
		for _, typ := range []string{"TaskUpdate", "HandoffAccept", "Vote", "Accept", "Approve", "Contribute", TypeCommitment} {
			env := fuzzEnvelope(s, typ, 0, "m-1", "alice", samplePayload(s.Mode, typ))
			Step(s, env, "alice", t0+1)
		}
		Control(s, OpCancel, "lead", t0+1)
	})
}

// BenchmarkSessionCodec: a task session's encoding, and its decoding under
// policy.default and under a bound policy (whose canonical JSON is parsed
// and bound again).
func BenchmarkSessionCodec(b *testing.B) {
	plain := fuzzStates()[len(goldenScenarios[0].msgs)-1].s // task_happy_path, policy.default
	bound := fuzzStates()[len(goldenScenarios[0].msgs)].s   // task_reassignment, its own policy
	buf, _ := plain.AppendBinary(nil)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		out := make([]byte, 0, 1024)
		for b.Loop() {
			out, _ = plain.AppendBinary(out[:0])
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	var dec Decoder
	for _, c := range []struct {
		name   string
		s      *Session
		decode func([]byte) (*Session, error)
	}{{"decode", plain, DecodeSession}, {"decode_bound_policy", bound, DecodeSession}, {"decoder_bound_policy", bound, dec.Decode}} {
		in, _ := c.s.AppendBinary(nil)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecoderBindsOnce: a Decoder gives every session with one policy the
// same bound policy, equal to what DecodeSession binds.
func TestDecoderBindsOnce(t *testing.T) {
	var dec Decoder
	s := fuzzStates()[len(goldenScenarios[0].msgs)].s // a bound policy
	b, _ := s.AppendBinary(nil)
	x, err := dec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := dec.Decode(b)
	z, _ := DecodeSession(b)
	if x.Policy != y.Policy || x.Policy == z.Policy || comparable(x) != comparable(z) {
		t.Fatal("the Decoder does not reuse its bound policy, or decodes differently")
	}
}

// TestEmptyModeState checks that a session that has only started holds its
// mode's empty state (a nil pointer of the mode's kind, no allocation of its
// own), that a replica decodes it, and any empty mode state, back to that,
// and that the first message changing it gets a state of its own.
func TestEmptyModeState(t *testing.T) {
	for _, mode := range []string{ModeTask, ModeHandoff, ModeDecision, ModeProposal, ModeQuorum, ModeMultiRound} {
		t.Run(mode, func(t *testing.T) {
			s, out := setup{mode: mode, initiator: "lead", participants: []string{"lead", "alice", "bob"}}.start()
			if !out.Verdict.OK() {
				t.Fatalf("SessionStart: %+v", out.Verdict)
			}
			empty := func(s *Session) bool { return s.modal != nil && reflect.ValueOf(s.modal).IsNil() }
			if !empty(s) {
				t.Fatalf("a started session holds %#v, want its mode's empty state", s.modal)
			}
			if c := roundTrip(t, "started", s); !empty(c) {
				t.Fatalf("decoded started session holds %#v, want its mode's empty state", c.modal)
			}
			own := s.clone()
			if empty(own) || reflect.TypeOf(own.modal) != reflect.TypeOf(s.modal) {
				t.Fatalf("clone of the empty state = %#v, want a state of its own of the same kind", own.modal)
			}
			if c := roundTrip(t, "empty of its own", own); !empty(c) {
				t.Fatalf("decoded empty state = %#v, want the mode's empty state", c.modal)
			}
		})
	}
}

// TestDecodeSharesNames checks that a replica's decoded sessions hold the
// program's copy of the mode name and the process's copies of the
// initiator's and participants' names (and of the task's assignees), as
// Start's do: two decodings of a session share every one of them.
func TestDecodeSharesNames(t *testing.T) {
	s, _ := setup{mode: ModeTask, initiator: "lead", participants: []string{"lead", "alice", "bob"}}.start()
	s = walk(s, []msg{
		{from: "lead", typ: "TaskRequest", body: &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "alice"}},
		{from: "alice", typ: "TaskAccept", body: &taskv1.TaskAcceptPayload{TaskId: "t1", Assignee: "alice"}},
	}, func(int, *Session) {})
	b, err := s.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err1 := DecodeSession(b)
	y, err2 := DecodeSession(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	tx, ty := x.modal.(*taskState), y.modal.(*taskState)
	tests := []struct {
		name string
		a, b string
	}{
		{"mode", x.Mode, ModeTask},
		{"initiator", x.Initiator, y.Initiator},
		{"participant", x.Participants[1], y.Participants[1]},
		{"requested assignee", tx.requestedAssignee, ty.requestedAssignee},
		{"active assignee", tx.active, x.Participants[1]},
	}
	for _, tc := range tests {
		if !same(tc.a, tc.b) {
			t.Errorf("%s %q: decoded into a copy of its own", tc.name, tc.a)
		}
	}
}
