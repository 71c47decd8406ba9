package rules

import (
	"strings"
	"testing"
	"unsafe"
)

// TestSessionSharesNames checks that a started session holds the program's
// copy of its mode and mode version and the sender's copy of the sender's
// name, not the copies decoded from each SessionStart, and a participant
// list of its own length.
func TestSessionSharesNames(t *testing.T) {
	const planner, worker = "agent://planner", "agent://worker"
	p := startPayload(strings.Clone(planner), strings.Clone(worker))
	p.ModeVersion = strings.Clone(SupportedModeVer)
	sender := strings.Clone(planner)
	out := Start(nil, envelope(strings.Clone(ModeTask), TypeSessionStart, "s", sender, marshal(p)), sender, nil, 1000)
	s := out.Next
	if s == nil {
		t.Fatalf("SessionStart refused: %+v", out.Verdict)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for _, c := range []struct {
		what      string
		got, want string
	}{
		{"mode", s.Mode, ModeTask},
		{"mode_version", s.ModeVersion, SupportedModeVer},
		{"initiator among the participants", s.Participants[0], sender},
	} {
		if c.got != c.want || !same(c.got, c.want) {
			t.Errorf("%s: %q is not the shared copy", c.what, c.got)
		}
	}
	if len(s.Participants) != 2 || cap(s.Participants) != 2 || s.Participants[1] != worker {
		t.Errorf("participants %q (capacity %d), want [%s %s] in a slice of their own length", s.Participants, cap(s.Participants), planner, worker)
	}
}
