package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
)

// TestAuthReasonRecorded: an authentication refusal carries its cause, for
// the operator, in the decision (what the metrics and the decision log read)
// and the "refused" log line, at the front door (RefuseAuth) and in Enforce;
// other refusals carry none. Before, both said only "unauthenticated".
func TestAuthReasonRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`[{"token":"tok-planner","sender":"agent://planner"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodStatic}, Static: authn.StaticConfig{TokensFile: path}}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	obs := &countObserver{}
	e, err := build(proxy.Config{}, proxy.Options{Authenticator: a, Policies: engine(t), Observer: obs, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refuse := func(bearer string) proxy.Decision {
		_, err := e.e.Authenticate(ctx, authn.Credentials{Bearer: bearer})
		return e.e.RefuseAuth(context.Background(), "mcp", "", err)
	}
	enforce := func(bearer string) proxy.Decision {
		r := req(env(sessionID(1), planner, macp.TypeSessionStart, "m1", nil))
		r.Credentials.Bearer = bearer
		d, err := e.Enforce(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name string
		d    func() proxy.Decision
		want string
	}{
		{"front door, no token", func() proxy.Decision { return refuse("") }, "missing"},
		{"front door, unknown token", func() proxy.Decision { return refuse("tok-gone") }, "unknown_token"},
		{"enforce, unknown token", func() proxy.Decision { return enforce("tok-gone") }, "unknown_token"},
		{"front door, other refusal", func() proxy.Decision {
			return e.e.Refuse(context.Background(), "mcp", "", "", rules.Verdict{Code: rules.CodeInvalidRequest, Reason: rules.ReasonMalformedRequest, Detail: "x"})
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			d := tt.d()
			if d.Allow || d.AuthReason != tt.want {
				t.Fatalf("decision allow=%v auth_reason=%q, want refused with %q", d.Allow, d.AuthReason, tt.want)
			}
			if tt.want != "" && (d.Reason != rules.ReasonUnauthenticated || d.Message != "authentication failed: "+authn.Reason(authn.ErrInvalidCredentials) && d.Message != "authentication failed: no_credentials") {
				t.Fatalf("the generic verdict changed: %q %q", d.Reason, d.Message)
			}
			ds := obs.All()
			last := ds[len(ds)-1]
			if last.ID != d.ID || last.AuthReason != tt.want {
				t.Fatalf("observer saw %q / %q", last.ID, last.AuthReason)
			}
			var line map[string]any
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
				t.Fatalf("log %q: %v", logs.String(), err)
			}
			got, has := line["auth_reason"]
			if tt.want == "" && has || tt.want != "" && got != tt.want {
				t.Fatalf("log line auth_reason = %v (present %v), want %q: %s", got, has, tt.want, logs.String())
			}
		})
	}
}
