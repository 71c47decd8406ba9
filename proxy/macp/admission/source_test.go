package admission

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

type decisions struct {
	mu sync.Mutex
	ds []proxy.Decision
}

func (o *decisions) Decided(d proxy.Decision, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ds = append(o.ds, d)
}

func (o *decisions) take() []proxy.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	ds := o.ds
	o.ds = nil
	return ds
}

func testGate(t *testing.T, public bool) (*Gate, *decisions, *sessions.Decider) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`[{"token":"tok-planner","sender":"agent://planner"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodStatic}, Static: authn.StaticConfig{TokensFile: path}}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	obs := &decisions{}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: p, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := sessions.New(e, sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return New(NewMethods(nil), e, public, nil), obs, dec
}

// TestAdmissionSource: MACP's admission gives every decision about a call
// (a refusal at the door, an allowed discovery call, and the Send decided
// after it through the sessions.Request it builds) the client's address, the
// call's x-request-id (or a minted one), POST and the method path; under
// ext_authz the source the context carries wins. Before, none had any, and
// an allowed discovery call left no decision at all.
func TestAdmissionSource(t *testing.T) {
	const client = "198.51.100.9:5555"
	send, initialize := MACPService+"Send", MACPService+"Initialize"
	tests := []struct {
		name    string
		public  bool
		method  string
		token   string
		reqID   string
		ctxSrc  *proxy.Source
		allowed bool // an allowed decision is recorded at admission
	}{
		{name: "unknown method", method: "/macp.v1.MACPRuntimeService/Nope", token: "tok-planner", reqID: "r1"},
		{name: "bad token", method: send, token: "tok-gone"},
		{name: "no token", method: send, reqID: "r3"},
		{name: "discovery", method: initialize, token: "tok-planner", reqID: "r4", allowed: true},
		{name: "public discovery", public: true, method: initialize, allowed: true},
		{name: "ext_authz source wins", method: send, token: "tok-gone", ctxSrc: &proxy.Source{Client: "203.0.113.1:1", RequestID: "envoy-id", Method: "POST", Path: send}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, obs, _ := testGate(t, tt.public)
			hdr := map[string][]string{}
			if tt.token != "" {
				hdr["authorization"] = []string{"Bearer " + tt.token}
			}
			if tt.reqID != "" {
				hdr["x-request-id"] = []string{tt.reqID}
			}
			ctx := context.Background()
			if tt.ctxSrc != nil {
				ctx = proxy.WithSource(ctx, *tt.ctxSrc)
			}
			a := g.Admit(ctx, Headers{Method: tt.method, Get: metadata.MD(hdr), Names: slices.AppendSeq([]string{}, maps.Keys(hdr)), Client: client})
			ds := obs.take()
			if tt.allowed != (a.Refusal == nil) || len(ds) != 1 || ds[0].Allow != tt.allowed {
				t.Fatalf("refusal %v, decisions %+v; want one, allowed=%v", a.Refusal, ds, tt.allowed)
			}
			want := proxy.Source{Client: client, RequestID: tt.reqID, Method: "POST", Path: tt.method}
			if tt.ctxSrc != nil {
				want = *tt.ctxSrc
			}
			got := ds[0].Source
			if tt.reqID == "" && tt.ctxSrc == nil {
				if len(got.RequestID) != 26 {
					t.Fatalf("request id %q, want a minted one", got.RequestID)
				}
				want.RequestID = got.RequestID
			}
			if got != want || a.Source != want {
				t.Fatalf("decision source %+v, admission's %+v, want %+v", got, a.Source, want)
			}
		})
	}
	t.Run("send decided on the admission's source", func(t *testing.T) {
		g, _, dec := testGate(t, false)
		hdr := map[string][]string{"authorization": {"Bearer tok-planner"}, "x-request-id": {"r9"}}
		a := g.Admit(context.Background(), Headers{Method: send, Get: metadata.MD(hdr), Names: slices.AppendSeq([]string{}, maps.Keys(hdr)), Client: client})
		if a.Refusal != nil {
			t.Fatal(a.Refusal.Text)
		}
		msg, _ := proto.Marshal(&macpv1.SendRequest{Envelope: &macpv1.Envelope{MacpVersion: "1.0", Mode: "macp.mode.decision.v1", MessageType: "SessionStart", MessageId: "m1", SessionId: "s1", Sender: "agent://planner"}})
		r, refused := g.Request(&a, msg)
		if refused != nil {
			t.Fatal(refused.Text)
		}
		d, err := dec.Enforce(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		d.Settle(false)
		if want := (proxy.Source{Client: client, RequestID: "r9", Method: "POST", Path: send}); d.Source != want {
			t.Fatalf("decision source %+v, want %+v", d.Source, want)
		}
	})
}
