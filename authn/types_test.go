package authn

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentwarden/warden/internal/testjwt"
)

// TestJWTTypes: with jwt.types set, a token is accepted only when its
// protected header's typ is one of them, read as RFC 7515 §4.1.9 reads a
// media type (any case, "application/" omitted); a token the issuer signed
// for another purpose for the same audience (an ID token: typ JWT or
// none) is refused as invalid, cause "type", whether verified by a JWKS
// key or the HMAC secret, first or after a cached verification of
// another token. Unset, typ is not read. Before jwt.types every refused
// row was accepted.
func TestJWTTypes(t *testing.T) {
	k := keysOnce()
	secret := []byte("0123456789abcdef0123456789abcdef")
	hs := signingKey{Alg: jose.HS256, Priv: secret}
	good := claimsAt(t0, "agent-a")
	build := func(t *testing.T, types ...string) *Authenticator {
		return fileJWTAuthenticator(t, newClock(), func(c *Config) {
			c.JWT.Types = types
			c.JWT.Algorithms = []string{"RS256", "ES256", "HS256"}
			c.JWT.HMACSecretFile = writeFile(t, "secret", secret)
		})
	}
	tests := []struct {
		name  string
		types []string
		key   signingKey
		typ   any // nil: no typ
		ok    bool
	}{
		{name: "at+jwt", types: []string{"at+jwt"}, key: k.rsa, typ: "at+jwt", ok: true},
		{name: "application/at+JWT", types: []string{"at+jwt"}, key: k.rsa, typ: "application/at+JWT", ok: true},
		{name: "AT+JWT", types: []string{"at+jwt"}, key: k.ec, typ: "AT+JWT", ok: true},
		{name: "configured with the prefix", types: []string{"Application/AT+jwt"}, key: k.rsa, typ: "at+jwt", ok: true},
		{name: "at+jwt by the HMAC secret", types: []string{"at+jwt"}, key: hs, typ: "at+jwt", ok: true},
		{name: "an ID token (typ JWT)", types: []string{"at+jwt"}, key: k.rsa, typ: "JWT"},
		{name: "an ID token (typ JWT) by the HMAC secret", types: []string{"at+jwt"}, key: hs, typ: "JWT"},
		{name: "no typ", types: []string{"at+jwt"}, key: k.rsa},
		{name: "typ null", types: []string{"at+jwt"}, key: k.rsa, typ: json.RawMessage("null")},
		{name: "application/jwt", types: []string{"at+jwt"}, key: k.ec, typ: "application/jwt"},
		{name: "a logout token", types: []string{"at+jwt"}, key: k.rsa, typ: "logout+jwt"},
		{name: "typ not a string", types: []string{"at+jwt"}, key: k.rsa, typ: 1},
		{name: "typ a list", types: []string{"at+jwt"}, key: k.rsa, typ: []string{"at+jwt"}},
		{name: "a parameter", types: []string{"at+jwt"}, key: k.rsa, typ: "at+jwt; charset=utf-8"},
		{name: "a trailing space", types: []string{"at+jwt"}, key: k.rsa, typ: "at+jwt "},
		{name: "another type than application", types: []string{"at+jwt"}, key: k.rsa, typ: "text/at+jwt"},
		{name: "the prefix twice", types: []string{"at+jwt"}, key: k.rsa, typ: "application/application/at+jwt"},
		{name: "a Kelvin sign folded by Unicode", types: []string{"k+jwt"}, key: k.rsa, typ: "\u212a+jwt"},
		{name: "JWT among the types", types: []string{"at+jwt", "JWT"}, key: k.rsa, typ: "jwt", ok: true},
		{name: "unset: typ JWT", key: k.rsa, typ: "JWT", ok: true},
		{name: "unset: no typ", key: k.rsa, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := build(t, tt.types...)
			kid := tt.key.KID
			tok := testjwt.SignTyped(t, tt.key, kid, tt.typ, good)
			// A token of an allowed typ verified and cached first: the
			// cache must not carry another token past the check.
			if len(tt.types) > 0 {
				expect(t, a, testjwt.SignTyped(t, tt.key, kid, tt.types[0], good), nil)
			}
			for range 2 { // the second from the cache, or verified again
				_, err := a.Authenticate(context.Background(), Credentials{Bearer: tok})
				switch {
				case tt.ok && err != nil:
					t.Fatalf("refused: %v", err)
				case !tt.ok && (!errors.Is(err, ErrInvalidCredentials) || CauseOf(err) != CauseType):
					t.Fatalf("err = %v (cause %q), want invalid credentials of cause %q", err, CauseOf(err), CauseType)
				case !tt.ok && Reason(err) != "invalid_credentials":
					t.Fatalf("reason %q", Reason(err))
				}
			}
		})
	}
}
