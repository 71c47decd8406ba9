package authn

import (
	"context"
	"errors"
	"strings"
	"testing"
)

const tokensJSON = `[
  {"token": "tok-a", "sender": "agent-a", "allowed_modes": ["macp.mode.task.v1"], "can_start_sessions": true,
   "max_open_sessions": 10, "can_manage_mode_registry": false, "is_observer": false, "team": "blue"},
  {"token": "tok-b", "sender": "agent-b"}
]`

func staticAuthenticator(t *testing.T, doc string) (*Authenticator, error) {
	t.Helper()
	cfg := Config{Mode: Methods{MethodStatic}, Static: StaticConfig{TokensFile: writeFile(t, "tokens.json", []byte(doc))}}
	return New(cfg, Options{})
}

func TestAuthenticateStatic(t *testing.T) {
	a, err := staticAuthenticator(t, tokensJSON)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		bearer  string
		wantID  string
		wantErr error
	}{
		{name: "valid", bearer: "tok-a", wantID: "agent-a"},
		{name: "valid, no attributes", bearer: "tok-b", wantID: "agent-b"},
		{name: "unknown", bearer: "tok-c", wantErr: ErrInvalidCredentials},
		{name: "prefix of a token", bearer: "tok-", wantErr: ErrInvalidCredentials},
		{name: "token plus suffix", bearer: "tok-a ", wantErr: ErrInvalidCredentials},
		{name: "sender is not a token", bearer: "agent-a", wantErr: ErrInvalidCredentials},
		{name: "empty", bearer: "", wantErr: ErrNoCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), Credentials{Bearer: tt.bearer})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if p.ID != tt.wantID {
				t.Fatalf("ID = %q, want %q", p.ID, tt.wantID)
			}
			if tt.wantErr != nil {
				return
			}
			if p.Method != "static" || !p.Expiry.IsZero() {
				t.Fatalf("principal = %+v", p)
			}
			if _, leaked := p.Claims["token"]; leaked {
				t.Fatal("claims contain the token")
			}
		})
	}

	p, _ := a.Authenticate(context.Background(), Credentials{Bearer: "tok-a"})
	if p.Claims["can_start_sessions"] != true || p.Claims["max_open_sessions"] != 10.0 || p.Claims["team"] != "blue" {
		t.Fatalf("claims = %v", p.Claims)
	}
	if modes, _ := p.Claims["allowed_modes"].([]any); len(modes) != 1 || modes[0] != "macp.mode.task.v1" {
		t.Fatalf("allowed_modes = %v", p.Claims["allowed_modes"])
	}
}

func TestStaticFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		wantErr string
	}{
		{name: "duplicate tokens", doc: `[{"token":"t","sender":"a"},{"token":"t","sender":"b"}]`, wantErr: "entry 1: same token as entry 0"},
		{name: "missing token", doc: `[{"sender":"a"}]`, wantErr: "token: must be a non-empty string"},
		{name: "empty token", doc: `[{"token":"","sender":"a"}]`, wantErr: "token: must be a non-empty string"},
		{name: "missing sender", doc: `[{"token":"t"}]`, wantErr: "sender: must be a non-empty string"},
		{name: "bad bool", doc: `[{"token":"t","sender":"a","is_observer":"yes"}]`, wantErr: "is_observer: must be a boolean"},
		{name: "bad modes", doc: `[{"token":"t","sender":"a","allowed_modes":"x"}]`, wantErr: "allowed_modes"},
		{name: "bad max", doc: `[{"token":"t","sender":"a","max_open_sessions":1.5}]`, wantErr: "max_open_sessions"},
		{name: "not a list", doc: `{"token":"t","sender":"a"}`, wantErr: "want a JSON list"},
		{name: "null entry", doc: `[null]`, wantErr: "not an object"},
		{name: "empty list", doc: `[]`, wantErr: "no tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := staticAuthenticator(t, tt.doc)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), `"t"`) {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}

// TestPrincipalSame: a static token authenticated again under a reloaded
// file is the same principal only when its attributes are unchanged; a
// token the reload narrows (can_start_sessions withdrawn, allowed_modes
// cut) names the same sender with other rights, which a long-lived call's
// check must see (proxy.Enforcer.Watch).
func TestPrincipalSame(t *testing.T) {
	a, err := staticAuthenticator(t, tokensJSON)
	if err != nil {
		t.Fatal(err)
	}
	before, err := a.Authenticate(context.Background(), Credentials{Bearer: "tok-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, doc string
		same      bool
	}{
		{"unchanged", tokensJSON, true},
		{"keys reordered", `[{"sender": "agent-a", "token": "tok-a", "team": "blue", "is_observer": false, "can_manage_mode_registry": false,
  "max_open_sessions": 10, "can_start_sessions": true, "allowed_modes": ["macp.mode.task.v1"]}]`, true},
		{"can_start_sessions withdrawn", strings.Replace(tokensJSON, `"can_start_sessions": true`, `"can_start_sessions": false`, 1), false},
		{"allowed_modes cut", strings.Replace(tokensJSON, `["macp.mode.task.v1"]`, `[]`, 1), false},
		{"an attribute added", strings.Replace(tokensJSON, `"team": "blue"`, `"team": "blue", "is_admin": true`, 1), false},
		{"token moved to another sender", strings.Replace(tokensJSON, `"sender": "agent-a"`, `"sender": "agent-c"`, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := staticAuthenticator(t, tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			after, err := b.Authenticate(context.Background(), Credentials{Bearer: "tok-a"})
			if err != nil {
				t.Fatal(err)
			}
			if got := before.Same(after); got != tc.same {
				t.Errorf("Same = %v, want %v (before %v, after %v)", got, tc.same, before.Claims, after.Claims)
			}
		})
	}
	if !before.Same(before) {
		t.Error("a principal is not the same as itself")
	}
}
