package macp

import (
	"strings"
	"testing"
	"unsafe"
)

// TestSessionSharesNames checks that a started session holds the program's
// copy of its mode, and one copy of every participant's name (the
// initiator's included) and of its versions shared with every session that
// names them alike, not the copies decoded from each
// SessionStart, and a participant list of its own length.
func TestSessionSharesNames(t *testing.T) {
	const planner, worker = "agent://planner", "agent://worker"
	start := func() *Session {
		p := startPayload(strings.Clone(planner), strings.Clone(worker))
		p.ModeVersion, p.ConfigurationVersion = strings.Clone(SupportedModeVer), strings.Clone("config-7")
		sender := strings.Clone(planner)
		out := Start(nil, envelope(strings.Clone(ModeTask), TypeSessionStart, "s", sender, marshal(p)), sender, nil, 1000)
		if out.Next == nil {
			t.Fatalf("SessionStart refused: %+v", out.Verdict)
		}
		return out.Next
	}
	s, again := start(), start()
	for _, c := range []struct {
		what      string
		got, want string
	}{
		{"mode", s.Mode, ModeTask},
		{"mode_version", s.Versions().Mode, again.Versions().Mode},
		{"configuration_version", s.Versions().Config, again.Versions().Config},
		{"initiator", s.Initiator, again.Initiator},
		{"initiator among the participants", s.Participants[0], s.Initiator},
		{"another participant", s.Participants[1], again.Participants[1]},
	} {
		if c.got != c.want || !same(c.got, c.want) {
			t.Errorf("%s: %q is not the shared copy", c.what, c.got)
		}
	}
	if s.versions != again.versions {
		t.Error("two sessions started alike hold two copies of their versions")
	}
	if len(s.Participants) != 2 || cap(s.Participants) != 2 || s.Participants[1] != worker {
		t.Errorf("participants %q (capacity %d), want [%s %s] in a slice of their own length", s.Participants, cap(s.Participants), planner, worker)
	}
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
