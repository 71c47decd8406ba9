package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
)

// TestFinishRefusalLog: a refusal Finish logs carries the request's source
// inlined (client_addr, request_id, http_method, path at the top of the
// line), and when the logger keeps no info line Finish builds none of its
// fields: no allocation at all. Fails on the old code, which built the
// source's group (six allocations) for a line the logger then dropped.
func TestFinishRefusalLog(t *testing.T) {
	src := proxy.Source{Client: "127.0.0.1:1", RequestID: "rid", Method: "POST", Path: "/p"}
	deny := rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonUnauthenticated, Detail: "no"}
	for _, tc := range []struct {
		name   string
		level  slog.Level
		line   bool
		allocs float64
	}{
		{"info kept", slog.LevelInfo, true, -1},
		{"info dropped", slog.LevelWarn, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := loggedEnforcer(t, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
			d := e.Start(proxy.WithSource(context.Background(), src), "macp")
			snap := e.Snapshot()
			if got := e.Finish(snap, d, deny); got.Allow || got.Code != deny.Code {
				t.Fatalf("Finish = %+v, want the refusal", got)
			}
			if !tc.line {
				if buf.Len() != 0 {
					t.Fatalf("logged %q at level %v", buf.String(), tc.level)
				}
			} else {
				var line map[string]any
				if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
					t.Fatalf("log line %q: %v", buf.String(), err)
				}
				for k, want := range map[string]string{"msg": "refused", "decision_id": d.ID, "client_addr": src.Client, "request_id": src.RequestID, "http_method": src.Method, "path": src.Path} {
					if line[k] != want {
						t.Errorf("log field %s = %v, want %q (line %s)", k, line[k], want, buf.String())
					}
				}
			}
			if tc.allocs >= 0 {
				if n := testing.AllocsPerRun(100, func() { e.Finish(snap, d, deny) }); n != tc.allocs {
					t.Errorf("Finish of a refusal nobody logs: %v allocations, want %v", n, tc.allocs)
				}
			}
		})
	}
}

// loggedEnforcer is an Enforcer with the dev authenticator and the
// default policies, logging to log (nil: the default logger).
func loggedEnforcer(t testing.TB, log *slog.Logger) *proxy.Enforcer {
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodDev}, Insecure: true}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policies.New(context.Background(), policies.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: a, Policies: p, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
