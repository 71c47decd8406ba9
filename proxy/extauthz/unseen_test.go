package extauthz

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// TestUnseenCalls: a MACP call whose rule ext_authz cannot apply, because
// what the rule decides on never reaches Check, is refused by default with
// PERMISSION_DENIED naming the setting, and let through after
// authentication only when the operator opts in (the other opt-in does not
// let it through). StreamSession would walk around every rule on Send (its
// envelopes are never shown); the session reads would show every session
// (their answers are never shown). Before, all five were allowed once
// authenticated.
func TestUnseenCalls(t *testing.T) {
	ctx := context.Background()
	streams := Config{Listen: "unused", AllowStreamSession: true}
	reads := Config{Listen: "unused", AllowUnfilteredReads: true}
	tests := []struct {
		method, key  string
		optIn, other Config
	}{
		{"StreamSession", "extauthz.allow_stream_session", streams, reads},
		{"ListSessions", "extauthz.allow_unfiltered_reads", reads, streams},
		{"WatchSessions", "extauthz.allow_unfiltered_reads", reads, streams},
		{"WatchSignals", "extauthz.allow_unfiltered_reads", reads, streams},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			for _, cfg := range []Config{{Listen: "unused"}, tc.other} {
				resp, err := newServer(t, cfg).Check(ctx, checkRequest(service+tc.method, "alice", frame(nil)))
				if err != nil {
					t.Fatal(err)
				}
				d := decision(resp)
				if d.Allow || code.Code(resp.GetStatus().GetCode()) != code.Code_PERMISSION_DENIED || d.Code != rules.CodeForbidden {
					t.Fatalf("allow_stream_session=%v allow_unfiltered_reads=%v: allow=%v status %v code %q, want PERMISSION_DENIED FORBIDDEN", cfg.AllowStreamSession, cfg.AllowUnfilteredReads, d.Allow, resp.GetStatus().GetCode(), d.Code)
				}
				if !strings.Contains(d.Message, tc.key) || !strings.Contains(d.Message, "warden decision ") {
					t.Errorf("message %q names neither %s nor the decision", d.Message, tc.key)
				}
			}
			resp, err := newServer(t, tc.optIn).Check(ctx, checkRequest(service+tc.method, "alice", frame(nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !decision(resp).Allow {
				t.Fatalf("with %s: %s", tc.key, resp.GetStatus().GetMessage())
			}
			// still authenticated first
			resp, err = newServer(t, tc.optIn).Check(ctx, checkRequest(service+tc.method, "", frame(nil)))
			if err != nil {
				t.Fatal(err)
			}
			if d := decision(resp); d.Allow || d.Code != rules.CodeUnauthenticated {
				t.Fatalf("with %s, no credentials: allow=%v code %q", tc.key, d.Allow, d.Code)
			}
		})
	}
}

// TestGetSessionDecided: under ext_authz a GetSession is decided per
// request on the session state ext_authz keeps, through the sidecar's
// participant check: the initiator and a participant are allowed; an
// outsider, an unknown session and a request that does not decode get the
// sidecar's answers (the runtime's NOT_FOUND "Session '<id>' not found",
// word for word, for the first two). With allow_unfiltered_reads every
// authenticated caller passes, as before. Before, every GetSession was
// refused PERMISSION_DENIED (participants included).
func TestGetSessionDecided(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, Config{Listen: "unused"})
	if got := checkSend(t, srv, startOf("agent://alice", 1)); got != rules.CodeOK {
		t.Fatalf("start: %q", got)
	}
	get := func(id string) []byte {
		b, err := proto.Marshal(&macpv1.GetSessionRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	notFound := func(id string) string { return "Session '" + id + "' not found" }
	for _, tc := range []struct {
		name, who string
		body      []byte
		status    code.Code
		message   string
	}{
		{"initiator", "agent://alice", get(sessionN(1)), code.Code_OK, ""},
		{"participant", "agent://worker", get(sessionN(1)), code.Code_OK, ""},
		{"outsider", "agent://mallory", get(sessionN(1)), code.Code_NOT_FOUND, notFound(sessionN(1))},
		{"unknown session", "agent://alice", get(sessionN(2)), code.Code_NOT_FOUND, notFound(sessionN(2))},
		{"does not decode", "agent://alice", []byte{0xff}, code.Code_INVALID_ARGUMENT, "does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Check(ctx, checkRequest(service+"GetSession", tc.who, frame(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			if got := code.Code(resp.GetStatus().GetCode()); got != tc.status || !strings.Contains(resp.GetStatus().GetMessage(), tc.message) {
				t.Fatalf("status %v %q, want %v %q", got, resp.GetStatus().GetMessage(), tc.status, tc.message)
			}
		})
	}
	resp, err := newServer(t, Config{Listen: "unused", AllowUnfilteredReads: true}).Check(ctx, checkRequest(service+"GetSession", "agent://mallory", frame(get(sessionN(1)))))
	if err != nil {
		t.Fatal(err)
	}
	if !decision(resp).Allow {
		t.Fatalf("with allow_unfiltered_reads: %s", resp.GetStatus().GetMessage())
	}
}
