package sessions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// changingSource is an upstream whose policy.review a test replaces or
// unregisters, unseen by the Decider (through another replica).
type changingSource struct {
	mu      sync.Mutex
	d       *macp.PolicyDescriptor
	fetches int
}

func (s *changingSource) Policy(_ context.Context, id string) (macp.PolicyDescriptor, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches++
	if s.d == nil || s.d.PolicyID != id {
		return macp.PolicyDescriptor{}, false, nil
	}
	return *s.d, true, nil
}

func (s *changingSource) set(d *macp.PolicyDescriptor) { s.mu.Lock(); s.d = d; s.mu.Unlock() }

// TestFetchedPolicyAges: a policy fetched from the upstream binds new
// sessions for fetchedFor, then is fetched again, so a policy unregistered
// or registered anew upstream (through another replica) binds with the
// upstream's rules, not the old copy's, after at most that long.
func TestFetchedPolicyAges(t *testing.T) {
	src := &changingSource{}
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	e, err := build(proxy.Config{}, proxy.Options{Authenticator: devAuth(t), Policies: engine(t), Now: c.now}, Options{PolicySource: src})
	if err != nil {
		t.Fatal(err)
	}
	policy := func(v string) *macp.PolicyDescriptor {
		return &macp.PolicyDescriptor{PolicyID: "policy.review", Mode: macp.ModeTask, SchemaVersion: 1,
			Rules: map[string]any{"commitment": map[string]any{"authority": v}}}
	}
	n := 90
	start := func() (rules.Code, string) {
		n++
		sid := sessionID(n)
		d, err := e.Enforce(context.Background(), req(env(sid, planner, "SessionStart", "start", mustMarshal(t, &macpv1.SessionStartPayload{
			Participants: []string{planner, worker}, ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: "policy.review", TtlMs: 60_000}))))
		if err != nil {
			t.Fatal(err)
		}
		d.Settle(d.Allow)
		s, _ := e.Session(context.Background(), sid)
		if s == nil || s.Policy == nil {
			return d.Code, ""
		}
		return d.Code, s.Policy.Canonical
	}
	for _, tc := range []struct {
		name    string
		change  func()
		wait    time.Duration
		want    string // a substring of the bound policy; "" for refused
		fetches int
	}{
		{"first bind fetches", func() { src.set(policy("initiator_only")) }, 0, "initiator_only", 1},
		{"changed upstream, copy still fresh", func() { src.set(policy("any_participant")) }, 5 * time.Second, "initiator_only", 1},
		{"copy aged: fetched again", func() {}, 6 * time.Second, "any_participant", 2},
		{"unregistered upstream, aged", func() { src.set(nil) }, 11 * time.Second, "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			c.add(tc.wait)
			code, bound := start()
			if tc.want == "" && code == rules.CodeOK || tc.want != "" && !strings.Contains(bound, tc.want) {
				t.Errorf("bound %q (%s), want %q", bound, code, tc.want)
			}
			if src.fetches != tc.fetches {
				t.Errorf("%d fetches, want %d", src.fetches, tc.fetches)
			}
		})
	}
}
