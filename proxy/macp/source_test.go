package macp

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

type observed struct {
	mu sync.Mutex
	ds []proxy.Decision
}

func (o *observed) Decided(d proxy.Decision, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

func (o *observed) take() []proxy.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	ds := o.ds
	o.ds = nil
	return ds
}

// TestDoorSource: on each MACP door, a refused call and an allowed Send or
// control call are recorded with the call's x-request-id (or a minted one)
// and its method path, and on the sidecars with the client's address, the
// connection's peer, whether the relay answers the call itself or hands it
// to the grpc-go sidecar behind it.
func TestDoorSource(t *testing.T) {
	engine, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start, _ := proto.Marshal(&macpv1.SessionStartPayload{Participants: []string{"planner", "worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})
	hdr := func(path, reqID, auth string) []hpack.HeaderField {
		h := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
			{Name: ":authority", Value: "warden"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
			{Name: clientHeader, Value: "203.0.113.66:1"}}
		if auth != "" {
			h = append(h, hpack.HeaderField{Name: "authorization", Value: auth})
		}
		if reqID != "" {
			h = append(h, hpack.HeaderField{Name: "x-request-id", Value: reqID})
		}
		return h
	}
	msg := func(m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return framed(b, len(b), 0)
	}
	for _, door := range doors {
		t.Run(door, func(t *testing.T) {
			obs := &observed{}
			core, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: engine, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			enf, err := sessions.New(core, sessions.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, up := startFakeRuntime(t)
			call := openDoor(t, door, enf, up, 1024)
			sid := sessionID()
			send, _ := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.task.v1", MessageType: macp.TypeSessionStart,
				MessageId: "m-" + sid, SessionId: sid, Sender: "planner", TimestampUnixMs: time.Now().UnixMilli(), Payload: start}})
			for _, tc := range []struct {
				name, path, reqID, auth string
				body                    []byte
				allow                   bool
			}{
				{"unknown method", admission.MACPService + "Nope", "rid-1", "Bearer planner", msg(&macpv1.GetSessionRequest{SessionId: sid}), false},
				{"allowed Send, minted id", methodSend, "", "Bearer planner", framed(send, len(send), 0), true},
				{"allowed CancelSession", service + "CancelSession", "rid-2", "Bearer planner", msg(&macpv1.CancelSessionRequest{SessionId: sid}), true},
				{"outsider's SuspendSession", service + "SuspendSession", "rid-3", "Bearer mallory", msg(&macpv1.SuspendSessionRequest{SessionId: sid}), false},
				{"GetSession without credentials", methodGet, "rid-4", "", msg(&macpv1.GetSessionRequest{SessionId: sid}), false},
				{"ListSessions without credentials", service + "ListSessions", "rid-5", "", msg(&macpv1.ListSessionsRequest{}), false},
				{"RegisterPolicy without credentials", service + "RegisterPolicy", "rid-6", "", msg(&macpv1.RegisterPolicyRequest{}), false},
				{"UnregisterPolicy without credentials", service + "UnregisterPolicy", "rid-7", "", msg(&macpv1.UnregisterPolicyRequest{}), false},
			} {
				call(t, hdr(tc.path, tc.reqID, tc.auth), tc.body)
				ds := obs.take()
				if len(ds) != 1 || ds[0].Allow != tc.allow {
					t.Fatalf("%s: decisions %+v, want one with allow=%v", tc.name, ds, tc.allow)
				}
				s := ds[0].Source
				if s.Path != tc.path || s.Method != "POST" || (tc.reqID != "" && s.RequestID != tc.reqID) || (tc.reqID == "" && len(s.RequestID) != 26) {
					t.Fatalf("%s: source %+v", tc.name, s)
				}
				// The relay answers most calls itself and hands the others to
				// the grpc-go sidecar in process with the connection's address
				// (handoff); a client's own x-warden-client-addr is never
				// read.
				if door != "extauthz" && !strings.HasPrefix(s.Client, "127.0.0.1:") {
					t.Fatalf("%s: client %q, want the connection's peer", tc.name, s.Client)
				}
			}
		})
	}
}
