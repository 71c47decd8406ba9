package authn

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testcerts"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentwarden/warden/internal/testjwt"
)

// TestGrantHolds: a grant holds while what vouched for the credential still
// does under the configuration loaded now: a JWT's key still in the JWKS
// Warden last fetched (not fetched by Holds) under the same issuer and
// audiences, or still the HMAC secret; a client certificate's CA still in
// its trust domain's bundle. Before, a JWT or certificate grant held until
// its expiry whatever the JWKS or the bundles became: every refused row
// held.
func TestGrantHolds(t *testing.T) {
	k := keysOnce()
	ctx := context.Background()
	now := t0.Add(time.Minute)
	rsaTok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	grantOf := func(a *Authenticator, c Credentials) Grant {
		t.Helper()
		p, err := a.Authenticate(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return GrantOf(p, c, t0)
	}

	// JWT: a token signed with the RSA key, verified through a JWKS URL.
	jwks := func(t *testing.T, edit func(*Config), keys ...signingKey) (*Authenticator, *jwksServer, *fakeClock) {
		t.Helper()
		srv, clock := newJWKSServer(t, testjwt.JWKS(t, keys...)), newClock()
		cfg := jwtConfig()
		cfg.JWT.JWKSURL = srv.URL + "/.well-known/jwks.json"
		if edit != nil {
			edit(&cfg)
		}
		a, err := New(cfg, Options{Now: clock.Now, HTTPClient: srv.Client(), Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return a, srv, clock
	}
	// fetched is the authenticator of a configuration after a request had it
	// fetch the JWKS.
	fetched := func(edit func(*Config), keys ...signingKey) func(t *testing.T) *Authenticator {
		return func(t *testing.T) *Authenticator {
			a, _, _ := jwks(t, edit, keys...)
			_, _ = a.Authenticate(ctx, Credentials{Bearer: rsaTok})
			return a
		}
	}
	setter, _, _ := jwks(t, nil, k.rsa, k.ec)
	jwtGrant := grantOf(setter, Credentials{Bearer: rsaTok})
	unanchored := jwtGrant
	unanchored.Anchor = "" // sealed before grants carried an anchor
	withdrawn := func(t *testing.T) *Authenticator {
		a, srv, clock := jwks(t, nil, k.rsa, k.ec)
		expect(t, a, rsaTok, nil)
		// The issuer withdraws the RSA key; a request after jwks_refresh
		// has Warden fetch the JWKS again.
		srv.setBody(testjwt.JWKS(t, k.ec))
		clock.Advance(6 * time.Minute)
		expect(t, a, testjwt.Sign(t, k.ec, k.ec.KID, claimsAt(clock.Now(), "agent-b")), nil)
		return a
	}
	reused := signingKey{KID: k.rsa.KID, Alg: jose.RS256, Pub: k.rsaOther.Pub} // the kid now names another key
	// A token of typ at+jwt accepted under jwt.types [at+jwt].
	typed := func(types ...string) func(*Config) { return func(c *Config) { c.JWT.Types = types } }
	typedSetter, _, _ := jwks(t, typed("at+jwt"), k.rsa, k.ec)
	typedGrant := grantOf(typedSetter, Credentials{Bearer: testjwt.SignTyped(t, k.rsa, k.rsa.KID, "at+jwt", claimsAt(t0, "agent-a"))})

	// JWT: a token signed with the HMAC secret.
	secret := []byte("0123456789abcdef0123456789abcdef")
	hmac := func(secret []byte) func(t *testing.T) *Authenticator {
		return func(t *testing.T) *Authenticator {
			return fileJWTAuthenticator(t, newClock(), func(c *Config) {
				c.JWT.Algorithms = []string{"RS256", "HS256"}
				c.JWT.HMACSecretFile = writeFile(t, "secret", secret)
			})
		}
	}
	hsTok := testjwt.Sign(t, signingKey{Alg: jose.HS256, Priv: secret}, "", claimsAt(t0, "agent-h"))
	hsGrant := grantOf(hmac(secret)(t), Credentials{Bearer: hsTok})

	// mTLS: a certificate a.example's CA issued, trust domains bound.
	caA, caB := newCA(t, "a.example CA"), newCA(t, "b.example CA")
	mtls := func(bundles map[string][]ca) func(t *testing.T) *Authenticator {
		return func(t *testing.T) *Authenticator {
			cfg := Config{Mode: Methods{MethodMTLS}}
			for td, cas := range bundles {
				if cfg.MTLS.TrustDomainCAFiles == nil {
					cfg.MTLS.TrustDomainCAFiles = map[string]string{}
				}
				cfg.MTLS.TrustDomainCAFiles[td] = testcerts.Bundle(t, cas...)
			}
			return mustNew(t, cfg, newClock())
		}
	}
	bound := map[string][]ca{"a.example": {caA}, "b.example": {caB}}
	leaf := caA.Issue(t, "spiffe://a.example/alice")
	certGrant := grantOf(mtls(bound)(t), Credentials{PeerCerts: []*x509.Certificate{leaf}})
	// The same leaf as the TLS stack verifies it (client_ca_file), trust
	// domains unbound, and a subject name's.
	tlsGrant := grantOf(mtls(nil)(t), Credentials{PeerCerts: []*x509.Certificate{leaf, caA.Cert}, Chains: [][]*x509.Certificate{{leaf, caA.Cert}}})
	unanchoredCert := tlsGrant
	unanchoredCert.Anchor = ""
	subject := func(t *testing.T) *Authenticator {
		return mustNew(t, Config{Mode: Methods{MethodMTLS}, MTLS: MTLSConfig{AllowSubject: true}}, newClock())
	}
	cn := caA.IssueCN(t, "alice")
	cnGrant := grantOf(subject(t), Credentials{PeerCerts: []*x509.Certificate{cn, caA.Cert}, Chains: [][]*x509.Certificate{{cn, caA.Cert}}})
	// caA cross-signed by caB: the leaf verifies to either.
	caC, cross := newCA(t, "a third CA"), caA.CrossSigned(t, caB)
	crossTLS := grantOf(mtls(nil)(t), Credentials{PeerCerts: []*x509.Certificate{leaf, caA.Cert}, Chains: [][]*x509.Certificate{{leaf, caA.Cert}, {leaf, cross, caB.Cert}}})
	crossBound := grantOf(mtls(map[string][]ca{"a.example": {caA, caB}})(t), Credentials{PeerCerts: []*x509.Certificate{leaf, cross}})

	for _, tc := range []struct {
		name    string
		after   func(t *testing.T) *Authenticator
		grant   Grant
		wantErr error
		cas     ClientCAs // the door's client CAs now
	}{
		{"jwt: its key still in the JWKS", fetched(nil, k.rsa, k.ec), jwtGrant, nil, nil},
		{"jwt: its key withdrawn from the JWKS", withdrawn, jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: its kid now names another key", fetched(nil, reused, k.ec), jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: issuer changed on reload", fetched(func(c *Config) { c.JWT.Issuer = "https://other.test" }, k.rsa, k.ec), jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: audience changed on reload", fetched(func(c *Config) { c.JWT.Audience = Audience{"other"} }, k.rsa, k.ec), jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: principal claim changed on reload", fetched(func(c *Config) { c.JWT.PrincipalClaim = "email" }, k.rsa, k.ec), jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: types set on reload", fetched(typed("at+jwt"), k.rsa, k.ec), jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: types the same, spelled otherwise", fetched(typed("application/AT+JWT", "at+jwt"), k.rsa, k.ec), typedGrant, nil, nil},
		{"jwt: types widened on reload", fetched(typed("at+jwt", "jwt"), k.rsa, k.ec), typedGrant, ErrInvalidCredentials, nil},
		{"jwt: types unset on reload", fetched(nil, k.rsa, k.ec), typedGrant, ErrInvalidCredentials, nil},
		// Nothing fetched since a start or reload: Holds fetches the set
		// (a restarted Warden with no request yet must not refuse every
		// JWT-set config), and decides on it.
		{"jwt: no JWKS fetched since the reload, its key in it", func(t *testing.T) *Authenticator { a, _, _ := jwks(t, nil, k.rsa); return a }, jwtGrant, nil, nil},
		{"jwt: no JWKS fetched since the reload, its key not in it", func(t *testing.T) *Authenticator { a, _, _ := jwks(t, nil, k.ec); return a }, jwtGrant, ErrInvalidCredentials, nil},
		{"jwt: no JWKS fetched since the reload, and none can be", func(t *testing.T) *Authenticator {
			a, srv, _ := jwks(t, nil, k.rsa)
			srv.failing.Store(true)
			return a
		}, jwtGrant, ErrKeysUnavailable, nil},
		{"jwt: sealed without an anchor", fetched(nil, k.rsa, k.ec), unanchored, ErrInvalidCredentials, nil},
		{"jwt: HMAC secret still configured", hmac(secret), hsGrant, nil, nil},
		{"jwt: HMAC secret changed", hmac([]byte("fedcba9876543210fedcba9876543210")), hsGrant, ErrInvalidCredentials, nil},
		{"mtls: its CA still bound", mtls(bound), certGrant, nil, nil},
		{"mtls: its CA beside another in the bundle", mtls(map[string][]ca{"a.example": {caB, caA}}), certGrant, nil, nil},
		{"mtls: its CA removed from the bundle", mtls(map[string][]ca{"a.example": {caB}, "b.example": {caB}}), certGrant, ErrInvalidCredentials, nil},
		{"mtls: its trust domain no longer bound", mtls(map[string][]ca{"b.example": {caB}}), certGrant, ErrInvalidCredentials, nil},
		{"mtls: no trust domain bound (the TLS stack's CAs)", mtls(nil), certGrant, nil, nil},
		// Without trust domains (or for a subject name) the door's client
		// CAs (client_ca_file, reloaded) vouch: every row refused here
		// held before.
		{"mtls: its CA still in client_ca_file", mtls(nil), tlsGrant, nil, ClientCAs{fingerprint(caA.Cert): true}},
		{"mtls: its CA removed from client_ca_file", mtls(nil), tlsGrant, ErrInvalidCredentials, ClientCAs{fingerprint(caB.Cert): true}},
		{"mtls: subject name, its CA removed from client_ca_file", subject, cnGrant, ErrInvalidCredentials, ClientCAs{fingerprint(caB.Cert): true}},
		{"mtls: subject name, its CA still in client_ca_file", subject, cnGrant, nil, ClientCAs{fingerprint(caA.Cert): true}},
		{"mtls: bound, its CA removed from client_ca_file", mtls(bound), certGrant, ErrInvalidCredentials, ClientCAs{fingerprint(caB.Cert): true}},
		{"mtls: sealed without an anchor, client CAs known", mtls(nil), unanchoredCert, ErrInvalidCredentials, ClientCAs{fingerprint(caA.Cert): true}},
		// Every verified chain anchors a cross-signed leaf: it holds while
		// any of its CAs is trusted (before, chains[0]'s alone: one of the
		// two bound rows was refused).
		{"mtls: cross-signed, client_ca_file keeps the other CA", mtls(nil), crossTLS, nil, ClientCAs{fingerprint(caB.Cert): true}},
		{"mtls: cross-signed, the trust domain keeps the first CA", mtls(map[string][]ca{"a.example": {caA}}), crossBound, nil, nil},
		{"mtls: cross-signed, the trust domain keeps the second CA", mtls(map[string][]ca{"a.example": {caB}}), crossBound, nil, nil},
		{"mtls: cross-signed, the trust domain keeps neither", mtls(map[string][]ca{"a.example": {caC}}), crossBound, ErrInvalidCredentials, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.after(t).Holds(context.Background(), tc.grant, now, tc.cas)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Holds = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
