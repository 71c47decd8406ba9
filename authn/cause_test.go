package authn

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

// TestCauseOfRealFailures makes each cause by its real cause: tokens signed
// with go-jose, verified against a JWKS served over loopback HTTP (and a
// static token file, and client certificates), and checks that CauseOf names
// it while the error still wraps the sentinel the client's answer is built
// from. Before Cause existed every one of these was "invalid_credentials".
func TestCauseOfRealFailures(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa, k.ec))
	down := newJWKSServer(t, nil)
	down.failing.Store(true)
	good := claimsAt(t0, "agent-a")

	tests := []struct {
		name   string
		srv    *jwksServer
		bearer string
		class  error
		want   Cause
	}{
		{name: "missing", bearer: "", class: ErrNoCredentials, want: CauseMissing},
		{name: "malformed", bearer: "not-a-jwt", class: ErrInvalidCredentials, want: CauseMalformed},
		{name: "malformed header", bearer: rawTokenWithPayload("eyJhbGci", "e30", "c2ln"), class: ErrInvalidCredentials, want: CauseMalformed},
		{name: "algorithm", bearer: testjwt.Raw(t, map[string]any{"alg": "none"}, good, []byte("x")), class: ErrInvalidCredentials, want: CauseAlgorithm},
		{name: "hmac not configured", bearer: testjwt.Raw(t, map[string]any{"alg": "HS256"}, good, []byte("0123456789abcdef0123456789abcdef")), class: ErrInvalidCredentials, want: CauseAlgorithm},
		{name: "unknown key id", bearer: testjwt.Sign(t, k.rsaOther, k.rsaOther.KID, good), class: ErrInvalidCredentials, want: CauseUnknownKeyID},
		{name: "signature", bearer: testjwt.Sign(t, k.rsaOther, k.rsa.KID, good), class: ErrInvalidCredentials, want: CauseSignature},
		{name: "expired", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "exp", t0.Add(-time.Hour).Unix())), class: ErrExpired, want: CauseExpired},
		{name: "not yet valid", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "nbf", t0.Add(time.Hour).Unix())), class: ErrInvalidCredentials, want: CauseNotYetValid},
		{name: "issued in the future", bearer: testjwt.Sign(t, k.ec, k.ec.KID, with(good, "iat", t0.Add(time.Hour).Unix())), class: ErrInvalidCredentials, want: CauseNotYetValid},
		{name: "audience", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "aud", "someone-else")), class: ErrInvalidCredentials, want: CauseAudience},
		{name: "issuer", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "iss", "https://evil.test")), class: ErrInvalidCredentials, want: CauseIssuer},
		{name: "no exp", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "exp", nil)), class: ErrInvalidCredentials, want: CauseClaims},
		{name: "no principal", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", nil)), class: ErrInvalidCredentials, want: CauseClaims},
		{name: "keys unavailable", srv: down, bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, good), class: ErrKeysUnavailable, want: CauseKeysUnavailable},
		{name: "valid", bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, good)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := srv
			if tt.srv != nil {
				s = tt.srv
			}
			a := urlJWTAuthenticator(t, s, newClock())
			_, err := a.Authenticate(context.Background(), Credentials{Bearer: tt.bearer})
			if tt.class == nil {
				if err != nil || CauseOf(err) != "" {
					t.Fatalf("err = %v, cause %q", err, CauseOf(err))
				}
				return
			}
			if !errors.Is(err, tt.class) {
				t.Fatalf("err = %v, want it to wrap %v", err, tt.class)
			}
			if got := CauseOf(err); got != tt.want {
				t.Fatalf("CauseOf(%v) = %q, want %q", err, got, tt.want)
			}
			var e *Error
			if tt.want != CauseKeysUnavailable && (!errors.As(err, &e) || e.Cause != tt.want) {
				t.Fatalf("err %v is not an *Error with cause %q", err, tt.want)
			}
			if r := Reason(err); r == string(tt.want) && tt.want != CauseExpired && tt.want != CauseKeysUnavailable {
				t.Fatalf("the client's reason %q names the cause", r)
			}
		})
	}
}

// TestCauseOfCachedExpiry: a token verified, cached and then expired names
// its cause from the cache path too.
func TestCauseOfCachedExpiry(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	expect(t, a, tok, nil)
	clock.Advance(2 * time.Hour)
	_, err := a.Authenticate(context.Background(), Credentials{Bearer: tok})
	if CauseOf(err) != CauseExpired {
		t.Fatalf("cause of %v = %q", err, CauseOf(err))
	}
}

// TestCauseOfOtherMethods: static tokens, mTLS, credential extraction and
// the most informative of several methods.
func TestCauseOfOtherMethods(t *testing.T) {
	tokens := writeFile(t, "tokens.json", []byte(`[{"token":"tok-a","sender":"agent-a"}]`))
	static := mustNew(t, Config{Mode: Methods{MethodStatic}, Static: StaticConfig{TokensFile: tokens}}, newClock())
	mtls := mustNew(t, Config{Mode: Methods{MethodMTLS}}, newClock())
	both := mustNew(t, Config{Mode: Methods{MethodStatic, MethodMTLS}, Static: StaticConfig{TokensFile: tokens}}, newClock())
	tests := []struct {
		name string
		a    *Authenticator
		c    Credentials
		want Cause
	}{
		{name: "static unknown", a: static, c: Credentials{Bearer: "revoked"}, want: CauseUnknownToken},
		{name: "static missing", a: static, want: CauseMissing},
		{name: "mtls missing", a: mtls, want: CauseMissing},
		{name: "mtls expired", a: mtls, c: Credentials{PeerCerts: certs(cert(t, "a", t0.Add(-time.Minute), "spiffe://td/a"))}, want: CauseExpired},
		{name: "mtls no identity", a: mtls, c: Credentials{PeerCerts: certs(cert(t, "a", t0.Add(time.Hour)))}, want: CauseCertificate},
		{name: "mtls bad spiffe", a: mtls, c: Credentials{PeerCerts: certs(cert(t, "a", t0.Add(time.Hour), "spiffe://TD/a"))}, want: CauseCertificate},
		{name: "most informative", a: both, c: Credentials{Bearer: "revoked"}, want: CauseUnknownToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.a.Authenticate(context.Background(), tt.c)
			if got := CauseOf(err); got != tt.want {
				t.Fatalf("CauseOf(%v) = %q, want %q", err, got, tt.want)
			}
		})
	}
	if got := CauseOf(ErrAmbiguousCredentials); got != CauseAmbiguous {
		t.Fatalf("ambiguous: %q", got)
	}
	if got := CauseOf(errors.New("x")); got != CauseOther {
		t.Fatalf("other: %q", got)
	}
}

func certs(c ...*x509.Certificate) []*x509.Certificate { return c }
