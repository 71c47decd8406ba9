package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/testjwt"
)

// TestReloadJWTTypes: a SIGHUP reload that sets authn.jwt.types applies to
// a token verified and cached before it: an ID token (typ JWT) accepted
// under the old configuration is refused from the next request on, and an
// access token (typ at+jwt) still accepted. Before jwt.types the key did
// not decode and the reload failed.
func TestReloadJWTTypes(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	jwt := "authn:\n  mode: jwt\n  jwt:\n    issuer: iss\n    audience: warden\n    algorithms: [HS256]\n    hmac_secret_file: " + secretFile + "\n"
	const listen = "extauthz:\n  listen: 127.0.0.1:0\n"
	cfgPath := write(t, "warden.yaml", jwt+listen)
	p := buildFrom(t, cfgPath)
	claims := map[string]any{"iss": "iss", "aud": "warden", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	idToken := testjwt.Sign(t, testjwt.HS256(secret), "", claims)
	access := testjwt.SignTyped(t, testjwt.HS256(secret), "", "at+jwt", claims)
	auth := func(tok string) error {
		_, err := p.enf.Authenticate(context.Background(), authn.Credentials{Bearer: tok})
		return err
	}
	for range 2 { // verified, then from the cache
		if err := auth(idToken); err != nil {
			t.Fatalf("before the reload: %v", err)
		}
	}
	if err := writeTo(cfgPath, jwt+"    types: [at+jwt]\n"+listen); err != nil {
		t.Fatal(err)
	}
	if err := reload(context.Background(), cfgPath, func(*Config) {}, p, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if err := auth(idToken); !errors.Is(err, authn.ErrInvalidCredentials) || authn.CauseOf(err) != authn.CauseType {
		t.Fatalf("the ID token after the reload: %v, want invalid credentials of cause %q", err, authn.CauseType)
	}
	if err := auth(access); err != nil {
		t.Fatalf("the access token after the reload: %v", err)
	}
}
