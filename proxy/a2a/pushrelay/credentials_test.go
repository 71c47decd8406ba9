package pushrelay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/testcerts"
	"github.com/agentwarden/warden/internal/testjwt"
)

// What the credential tests of the relay share: a real JWKS served over
// HTTP, tokens signed with its keys, and CAs issuing client certificates.

const (
	testIssuer   = "https://issuer.test"
	testAudience = "a2a-server"
)

// token is a JWT for sub, valid for an hour, signed with k.
func token(t *testing.T, k testjwt.Key, iss, sub string) string {
	t.Helper()
	now := time.Now()
	return testjwt.Sign(t, k, k.KID, map[string]any{"iss": iss, "aud": testAudience, "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

// jwksServer serves a JWKS of the keys it is given, on 127.0.0.1.
type jwksServer struct {
	*httptest.Server
	body atomic.Pointer[[]byte]
}

func newJWKSServer(t *testing.T, keys ...testjwt.Key) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.publish(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

// publish makes the server serve keys from now on.
func (s *jwksServer) publish(t *testing.T, keys ...testjwt.Key) {
	b := testjwt.JWKS(t, keys...)
	s.body.Store(&b)
}

// jwtAuthenticator is the JWT authenticator of a configuration with issuer
// iss whose JWKS srv serves; fetched with bearer when bearer is not "" (a
// request that has it fetch the JWKS).
func jwtAuthenticator(t *testing.T, srv *jwksServer, iss, bearer string) *authn.Authenticator {
	t.Helper()
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodJWT}, JWT: authn.JWTConfig{Issuer: iss, Audience: authn.Audience{testAudience}, JWKSURL: srv.URL + "/jwks.json"}},
		authn.Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		_, _ = a.Authenticate(context.Background(), authn.Credentials{Bearer: bearer})
	}
	return a
}

// ca is a CA that issues client certificates valid now.
type ca = testcerts.CA

func newCA(t *testing.T, name string) ca { return testcerts.NewCA(t, name, time.Now()) }

// fp is the hex SHA-256 of c's certificate (authn.ClientCAs).
func fp(c ca) string { return testcerts.Fingerprint(c.Cert) }

// mtlsAuthenticator is the mTLS authenticator of a configuration binding
// trust domain td to the bundle of cas.
func mtlsAuthenticator(t *testing.T, td string, cas ...ca) *authn.Authenticator {
	t.Helper()
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodMTLS}, MTLS: authn.MTLSConfig{TrustDomainCAFiles: map[string]string{td: testcerts.Bundle(t, cas...)}}}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// grantOf is the grant a request with c makes under a, now.
func grantOf(t *testing.T, a *authn.Authenticator, c authn.Credentials, now time.Time) authn.Grant {
	t.Helper()
	p, err := a.Authenticate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return authn.GrantOf(p, c, now)
}
