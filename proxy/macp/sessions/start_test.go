package sessions

import (
	"context"
	"errors"
	"testing"

	"github.com/agentwarden/warden/proxy"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

const mallory = "agent://mallory"

// upstreamSessions stands in for a runtime that holds sessions Warden does
// not: hidden ones exist but are not shown to the caller (PermissionDenied).
type upstreamSessions struct {
	state  map[string]*macp.Session
	hidden bool
	err    error
}

func (u *upstreamSessions) Rebuild(_ context.Context, id string, _ *macp.Governance) (*macp.Session, error) {
	if u.err != nil || u.hidden {
		return nil, u.err
	}
	return u.state[id], nil
}

func (u *upstreamSessions) Exists(_ context.Context, id string) (bool, error) {
	return u.state[id] != nil, u.err
}

// TestStartOnSessionUpstreamHolds: a SessionStart for a session the table
// holds no state for (restart, eviction, a lost store key, a session opened
// past Warden) is allowed only when the upstream does not hold the session
// either; otherwise it is refused as existing, as the runtime answers (or
// answered as the retransmission it is), and never makes its sender the
// initiator.
func TestStartOnSessionUpstreamHolds(t *testing.T) {
	sid := sessionID(70)
	origin, _ := newEnforcer(t, proxy.Config{}, nil)
	startTask(t, origin, sid, false)
	held, err := origin.Session(context.Background(), sid)
	if err != nil || held == nil {
		t.Fatal(err)
	}
	start := func(sender, id string) *macpv1.Envelope {
		return env(sid, sender, "SessionStart", id, mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{sender, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000}))
	}
	original := env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
		Participants: []string{planner, worker, other}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000}))
	for _, tc := range []struct {
		name     string
		upstream *upstreamSessions
		msg      *macpv1.Envelope
		allow    bool
		code     rules.Code
		err      bool
		acked    bool // as the sidecar's unary Send
	}{
		{"upstream does not hold it", &upstreamSessions{}, start(mallory, "evil"), true, rules.CodeOK, false, false},
		{"held, hidden from the sender", &upstreamSessions{state: map[string]*macp.Session{sid: held}, hidden: true}, start(mallory, "evil"), false, rules.CodeSessionAlreadyExists, false, false},
		{"held, a participant starts it again", &upstreamSessions{state: map[string]*macp.Session{sid: held}}, start(other, "again"), false, rules.CodeSessionAlreadyExists, false, false},
		{"held, the initiator retransmits its start", &upstreamSessions{state: map[string]*macp.Session{sid: held}}, original, true, rules.CodeOK, false, false},
		{"the upstream cannot be asked", &upstreamSessions{err: errors.New("unavailable")}, start(mallory, "evil"), false, "", true, false},
		// The sidecar's unary Send commits only on the runtime's Ack, which
		// refuses a session it holds: no look-up.
		{"acked by the upstream", &upstreamSessions{err: errors.New("not to be asked")}, start(mallory, "evil"), true, rules.CodeOK, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEnforcer(t, proxy.Config{}, tc.upstream)
			r := req(tc.msg)
			r.Acked = tc.acked
			d, err := e.Enforce(context.Background(), r)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			d.Settle(d.Allow)
			if d.Allow != tc.allow || d.Code != tc.code {
				t.Errorf("allow=%v code=%s (%s), want allow=%v code=%s", d.Allow, d.Code, d.Message, tc.allow, tc.code)
			}
			s, err := e.Session(context.Background(), sid)
			if err != nil {
				t.Fatal(err)
			}
			if s != nil && tc.upstream.state[sid] != nil && s.Initiator != planner {
				t.Errorf("initiator is now %q, want %q", s.Initiator, planner)
			}
		})
	}
}
