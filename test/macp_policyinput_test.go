package test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
)

// voteHoursPolicy is deploy/policies/macp-votes-hours.rego set to a fixed
// UTC offset where the local time now is open (12:xx) or closed (00:xx),
// every day of the week, so the test holds at any hour it runs.
func voteHoursPolicy(t *testing.T, open bool) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy/policies/macp-votes-hours.rego"))
	if err != nil {
		t.Fatal(err)
	}
	off := 12 - time.Now().UTC().Hour() // local 12:xx, in -11..12
	if !open {
		if off > 0 {
			off -= 12
		} else {
			off += 12
		}
	}
	zone := "Etc/GMT" // Etc/GMT-3 is UTC+3
	switch {
	case off > 0:
		zone = fmt.Sprintf("Etc/GMT-%d", off)
	case off < 0:
		zone = fmt.Sprintf("Etc/GMT+%d", -off)
	}
	src := string(b)
	for old, repl := range map[string]string{
		`"zone": "Europe/Paris"`: `"zone": "` + zone + `"`,
		`"days": {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"}`: `"days": {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}`,
	} {
		if strings.Count(src, old) != 1 {
			t.Fatalf("the example policy no longer holds %s", old)
		}
		src = strings.Replace(src, old, repl, 1)
	}
	f := filepath.Join(t.TempDir(), "macp-votes-hours.rego")
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMACPPayloadPolicy runs the example operator policies of
// deploy/policies (MACP votes only during business hours; only these
// payload field values) through bin/warden in front of the real runtime
// 0.13.0, at both MACP front doors (macp.transport grpc and relay) and as
// ext_authz: a vote is refused by
// its payload (a REJECT without a reason, whatever the case the sender
// wrote it in) and allowed with one; with the business hours closed on
// Warden's clock a vote is refused and a proposal allowed. Before
// input.macp and input.time, the payload rule refused nothing and the
// hours rule every vote.
func TestMACPPayloadPolicy(t *testing.T) {
	runtime := startRuntime(t)
	direct := dialMACP(t, runtime)
	root := repoRoot(t)
	payload := filepath.Join(root, "deploy/policies/macp-payload.rego")
	open := []string{"--policy", voteHoursPolicy(t, true), "--policy", payload}
	closed := []string{"--policy", voteHoursPolicy(t, false)}

	// A door sends env and answers "allow" or the refusal's MACP code and
	// message.
	type door func(env *macpv1.Envelope) (string, string)
	sidecar := func(transport string, args []string) door {
		wardenTransport = transport
		defer func() { wardenTransport = "" }()
		c := dialMACP(t, startWarden(t, runtime, append([]string{"--auth", "dev", "--insecure-dev-auth"}, args...)...))
		return func(env *macpv1.Envelope) (string, string) {
			ack := c.send(env)
			if ack.GetOk() {
				return "allow", ""
			}
			return ack.GetError().GetCode(), ack.GetError().GetMessage()
		}
	}
	extDoor := func(name string, args []string) door {
		c, _ := startExtAuthz(t, name, runtime, args...)
		return func(env *macpv1.Envelope) (string, string) {
			code := envoy(t, c, direct, env) // forwarded to the runtime when allowed
			if code == "allow" {
				return code, ""
			}
			b, err := proto.Marshal(&macpv1.SendRequest{Envelope: env})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range c.check(macpService+"Send", env.GetSender(), b).GetDeniedResponse().GetHeaders() {
				if h.GetHeader().GetKey() == "grpc-message" {
					msg, _ := url.PathUnescape(h.GetHeader().GetValue())
					return code, msg
				}
			}
			return code, ""
		}
	}
	doors := []struct {
		name         string
		open, closed door
	}{
		{"grpc", sidecar("grpc", open), sidecar("grpc", closed)},
		{"relay", sidecar("relay", open), sidecar("relay", closed)},
		{"ext_authz", extDoor("warden-open", open), extDoor("warden-closed", closed)},
	}
	decision := func(sender, sid, typ string, p *decisionv1.VotePayload) *macpv1.Envelope {
		env := envelope(sender, sid, typ, "", p)
		env.Mode = macp.ModeDecision
		return env
	}
	start := func(sid string) *macpv1.Envelope {
		env := envelope("planner", sid, "SessionStart", "", &macpv1.SessionStartPayload{Intent: "vote", Participants: []string{"planner", "alice", "bob"},
			ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 600_000})
		env.Mode = macp.ModeDecision
		return env
	}
	proposal := func(sid string) *macpv1.Envelope {
		env := envelope("planner", sid, "Proposal", "", &decisionv1.ProposalPayload{ProposalId: "p1", Option: "ship"})
		env.Mode = macp.ModeDecision
		return env
	}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			type step struct {
				name       string
				env        func(sid string) *macpv1.Envelope
				code, text string
			}
			vote := func(who, v, reason string) func(string) *macpv1.Envelope {
				return func(sid string) *macpv1.Envelope {
					return decision(who, sid, "Vote", &decisionv1.VotePayload{ProposalId: "p1", Vote: v, Reason: reason})
				}
			}
			for _, run := range []struct {
				name  string
				send  door
				steps []step
			}{
				{"in business hours", d.open, []step{
					{"start", start, "allow", ""},
					{"proposal", proposal, "allow", ""},
					{"approve", vote("alice", "APPROVE", ""), "allow", ""},
					{"reject without a reason", vote("bob", "reject", ""), "FORBIDDEN", "a REJECT vote must give a reason"},
					{"reject with a reason", vote("bob", "REJECT", "too early"), "allow", ""},
				}},
				{"after business hours", d.closed, []step{
					{"start", start, "allow", ""},
					{"proposal", proposal, "allow", ""},
					{"approve", vote("alice", "APPROVE", ""), "FORBIDDEN", "votes are accepted 09:00-17:00"},
				}},
			} {
				t.Run(run.name, func(t *testing.T) {
					sid := newSession()
					for _, s := range run.steps {
						code, msg := run.send(s.env(sid))
						if code != s.code || !strings.Contains(msg, s.text) {
							t.Fatalf("%s: %s %q, want %s %q", s.name, code, msg, s.code, s.text)
						}
					}
				})
			}
		})
	}
}
