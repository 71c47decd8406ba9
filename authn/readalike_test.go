package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/agentwarden/warden/internal/testjwt"
)

// TestPrincipalReadAlike: a principal is named to the upstream in a header
// (ext_authz's x-warden-principal, the runtime's metadata), whose readers
// strip leading and trailing spaces and tabs (RFC 9110 §5.5: Go's
// textproto, Node's llhttp, h11; RFC 9113 §8.2.1 makes them malformed on
// HTTP/2). "alice " would be decided and owned apart from "alice" by
// Warden and read as "alice" by the upstream, so it is not authenticated,
// whatever the method (static sender, JWT claim); a space or tab inside is
// kept whole by every reader and passes.
func TestPrincipalReadAlike(t *testing.T) {
	k := keysOnce()
	clock := newClock()
	cfg := jwtConfig()
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", testjwt.JWKS(t, k.rsa))
	jwt := mustNew(t, cfg, clock)
	tests := []struct {
		id      string
		refused bool
	}{
		{id: "alice"},
		{id: "alice smith"},
		{id: "alice\tsmith"},
		{id: "alice ", refused: true},
		{id: " alice", refused: true},
		{id: "alice\t", refused: true},
		{id: "\talice", refused: true},
		{id: "alice \t ", refused: true},
		{id: " ", refused: true},
		{id: "al\x01ice", refused: true},
	}
	for _, tt := range tests {
		sender, err := json.Marshal(tt.id)
		if err != nil {
			t.Fatal(err)
		}
		static, err := staticAuthenticator(t, `[{"token":"tok","sender":`+string(sender)+`}]`)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			method string
			a      *Authenticator
			bearer string
		}{
			{"static", static, "tok"},
			{"jwt", jwt, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), tt.id))},
		} {
			t.Run(fmt.Sprintf("%s/%q", c.method, tt.id), func(t *testing.T) {
				p, err := c.a.Authenticate(context.Background(), Credentials{Bearer: c.bearer})
				if tt.refused {
					if !errors.Is(err, ErrInvalidCredentials) {
						t.Fatalf("authenticated as %q (err %v): the upstream reads another principal's name", p.ID, err)
					}
					return
				}
				if err != nil || p.ID != tt.id {
					t.Fatalf("principal %q, err %v; want %q", p.ID, err, tt.id)
				}
			})
		}
	}
}

// TestPrincipalLoneSurrogates: JSON decoders read a lone surrogate escape as
// U+FFFD, so the JWT subjects "x\ud800" and "x\udc00", two names to the IdP,
// would both be the principal "x\ufffd". No principal holding U+FFFD is
// authenticated, by any method.
func TestPrincipalLoneSurrogates(t *testing.T) {
	k := keysOnce()
	clock := newClock()
	cfg := jwtConfig()
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", testjwt.JWKS(t, k.rsa))
	jwt := mustNew(t, cfg, clock)
	for _, tt := range []struct {
		sub     string // the JSON text of the sub claim
		refused bool
	}{
		{sub: `"x\u00e9"`},
		{sub: `"x\ud800"`, refused: true},
		{sub: `"x\udc00"`, refused: true},
		{sub: `"x\ufffd"`, refused: true},
		{sub: `"x\ud83d\ude00"`},
	} {
		t.Run("jwt/"+tt.sub, func(t *testing.T) {
			claims := claimsAt(clock.Now(), "")
			claims["sub"] = json.RawMessage(tt.sub)
			p, err := jwt.Authenticate(context.Background(), Credentials{Bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, claims)})
			if tt.refused != errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("sub %s: principal %q, err %v; refused want %v", tt.sub, p.ID, err, tt.refused)
			}
		})
	}
	static, err := staticAuthenticator(t, `[{"token":"tok","sender":"x\ufffd"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := static.Authenticate(context.Background(), Credentials{Bearer: "tok"}); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("static sender U+FFFD: principal %q, err %v", p.ID, err)
	}
}
