package extauthz

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
)

// requests records the requests an observer is told of.
type requests struct{ got []proxy.Served }

func (r *requests) Decided(proxy.Decision, time.Duration) {}
func (r *requests) Requests(*proxy.Door) proxy.Requests   { return r }
func (r *requests) Started()                              {}
func (r *requests) Served(s proxy.Served)                 { r.got = append(r.got, s) }

// TestCheckObserved: each Check is one request of the ext_authz door,
// counted by its protocol, method and outcome; traced, it is a server span
// in the client's trace (the request's traceparent), and an allowed
// request's OkResponse sets the upstream's traceparent to that span, in the
// client's trace. Check was neither counted nor traced before.
func TestCheckObserved(t *testing.T) {
	const client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name, body, wantMethod, wantOutcome string
		allowed                             bool
	}{
		{"allowed", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "tools/list", proxy.OutcomeAllowed, true},
		{"denied", `{"jsonrpc":"2.0","id":1,"method":"tasks/steer","params":{"taskId":"t","message":"` + strings.Repeat("x", 20<<10) + `"}}`, "tasks/steer", proxy.OutcomeDenied, false},
		{"unparsable", `{`, "other", proxy.OutcomeDenied, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, obs := tracetest.NewSpanRecorder(), &requests{}
			engine, err := policies.New(context.Background(), policies.Config{})
			if err != nil {
				t.Fatal(err)
			}
			a, err := authn.New(authn.Config{Mode: []authn.Method{authn.MethodDev}, Insecure: true}, authn.Options{})
			if err != nil {
				t.Fatal(err)
			}
			enf, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: engine, Observer: obs,
				Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := New(Config{Listen: "unused", MCP: true, AllowedHosts: []string{"mcp.local"}}, macpOn(t, enf), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Check(context.Background(), mcpCheck("POST", tc.body, map[string]string{"traceparent": client}))
			if err != nil {
				t.Fatal(err)
			}
			if len(obs.got) != 1 || obs.got[0] != srv.doors.mcp.ServedAs(tc.wantMethod, tc.wantOutcome, obs.got[0].Took) || obs.got[0].Door != proxy.DoorExtAuthz || obs.got[0].Protocol != "mcp" {
				t.Fatalf("served %+v, want one mcp ext_authz %s %s", obs.got, tc.wantMethod, tc.wantOutcome)
			}
			spans := rec.Ended()
			if len(spans) != 1 || spans[0].Name() != "mcp "+tc.wantMethod || spans[0].Parent().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" ||
				spans[0].Parent().SpanID().String() != "b7ad6b7169203331" {
				t.Fatalf("spans %v, want one in the client's trace, child of its span", spans)
			}
			var parent string
			for _, h := range resp.GetOkResponse().GetHeaders() {
				if h.GetHeader().GetKey() == "traceparent" {
					parent = h.GetHeader().GetValue()
				}
			}
			want := ""
			if tc.allowed {
				want = "00-0af7651916cd43dd8448eb211c80319c-" + spans[0].SpanContext().SpanID().String() + "-01"
			}
			if parent != want {
				t.Errorf("upstream traceparent %q, want %q", parent, want)
			}
		})
	}
}
