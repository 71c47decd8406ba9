package pushrelay

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/testjwt"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/proxytest"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/a2a"
)

// authenticator builds the authenticator of one configuration: static
// tokens (tokens, a JSON list) and client certificates.
func authenticator(t *testing.T, tokens string, mode ...authn.Method) *authn.Authenticator {
	t.Helper()
	cfg := authn.Config{Mode: mode}
	if tokens != "" {
		cfg.Static.TokensFile = filepath.Join(t.TempDir(), "tokens.json")
		if err := os.WriteFile(cfg.Static.TokensFile, []byte(tokens), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := authn.New(cfg, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRevokedConfigs: a push config is delivered to only while the
// credential that set it holds under the configuration loaded now (a static
// token still configured for the same principal; a JWT's key still in the
// JWKS, under the same issuer; a client certificate's CA still in its trust
// domain's bundle; a credential not past its sealed expiry, its method
// still configured) and it is younger than max_age; otherwise the server
// is answered 410 Gone (503 when it cannot be told: no JWKS fetched since
// the configuration was loaded, and none can be fetched at delivery),
// the webhook is not reached and the refusal is a decision (the decision
// log's) with reason push_config_revoked. Before, the JWT and certificate
// rows refused here were delivered, and no refusal was a decision.
func TestRevokedConfigs(t *testing.T) {
	const aliceTok = `[{"token":"tok-alice","sender":"alice"},{"token":"tok-bob","sender":"bob"}]`
	before := authenticator(t, aliceTok, authn.MethodStatic, authn.MethodMTLS)
	now := time.Now()
	static := grantOf(t, before, authn.Credentials{Bearer: "tok-alice"}, now)
	cert := authn.Grant{Principal: "alice", Method: "mtls", Issued: now.Unix(), Expiry: now.Add(time.Hour).Unix()}
	expired := cert
	expired.Expiry = now.Add(-time.Second).Unix()
	old := static
	old.Issued = now.Add(-25 * time.Hour).Unix()
	other := static
	other.Principal = "bob" // a grant naming another principal than the target

	// A JWT signed with key1 of a JWKS served over HTTP.
	key1, key2 := testjwt.ES256("key-1"), testjwt.ES256("key-2")
	jwks := newJWKSServer(t, key1, key2)
	unreachable := newJWKSServer(t, key1, key2)
	unreachable.Close() // its URL refuses connections: no JWKS can be fetched
	jwtTok := token(t, key1, testIssuer, "alice")
	jwtGrant := grantOf(t, jwtAuthenticator(t, jwks, testIssuer, ""), authn.Credentials{Bearer: jwtTok}, now)
	// The issuer withdraws key1; the JWKS a request has Warden fetch lacks it.
	withdrawn := jwtAuthenticator(t, newJWKSServer(t, key2), testIssuer, jwtTok)

	// A client certificate a.example's CA issued, trust domains bound.
	const spiffe = "spiffe://a.example/alice"
	caA, caB := newCA(t, "a.example CA"), newCA(t, "another CA")
	certs := authn.Credentials{PeerCerts: []*x509.Certificate{caA.Issue(t, spiffe)}}
	caGrant := grantOf(t, mtlsAuthenticator(t, "a.example", caA), certs, now)
	// The same leaf as the TLS stack verifies it, trust domains unbound.
	leaf := certs.PeerCerts[0]
	tlsGrant := grantOf(t, before, authn.Credentials{PeerCerts: []*x509.Certificate{leaf, caA.Cert}, Chains: [][]*x509.Certificate{{leaf, caA.Cert}}}, now)
	// caA cross-signed by caB: the leaf verifies to either CA.
	caC, cross := newCA(t, "a third CA"), caA.CrossSigned(t, caB)
	crossTLS := grantOf(t, before, authn.Credentials{PeerCerts: []*x509.Certificate{leaf, caA.Cert}, Chains: [][]*x509.Certificate{{leaf, caA.Cert}, {leaf, cross, caB.Cert}}}, now)
	crossBound := grantOf(t, mtlsAuthenticator(t, "a.example", caA, caB), authn.Credentials{PeerCerts: []*x509.Certificate{leaf, cross}}, now)

	legit := newCounting(t, nil)
	allow, err := a2a.ParseAllow([]string{"127.0.0.1:" + legit.port()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		after  *authn.Authenticator
		grant  authn.Grant
		maxAge time.Duration
		want   int
		cas    authn.ClientCAs // the sidecar listener's client CAs now
	}{
		{"static token still configured", before, static, 0, http.StatusOK, nil},
		{"static token removed on reload", authenticator(t, `[{"token":"tok-bob","sender":"bob"}]`, authn.MethodStatic), static, 0, http.StatusGone, nil},
		{"static token now another principal's", authenticator(t, `[{"token":"tok-alice","sender":"mallory"}]`, authn.MethodStatic), static, 0, http.StatusGone, nil},
		{"static method no longer configured", authenticator(t, "", authn.MethodMTLS), static, 0, http.StatusGone, nil},
		{"certificate before its expiry", before, cert, 0, http.StatusOK, nil},
		{"credential past its sealed expiry", before, expired, 0, http.StatusGone, nil},
		{"certificate method no longer configured", authenticator(t, aliceTok, authn.MethodStatic), cert, 0, http.StatusGone, nil},
		{"config past max_age (default 24h)", before, old, 0, http.StatusGone, nil},
		{"old config, no max_age", before, old, -1, http.StatusOK, nil},
		{"young config under max_age 1h", before, static, time.Hour, http.StatusOK, nil},
		{"sealed without a grant (before this change)", before, authn.Grant{}, 0, http.StatusGone, nil},
		{"grant of another principal", before, other, 0, http.StatusGone, nil},
		{"jwt: its key still in the JWKS", jwtAuthenticator(t, jwks, testIssuer, jwtTok), jwtGrant, 0, http.StatusOK, nil},
		{"jwt: its key withdrawn from the JWKS", withdrawn, jwtGrant, 0, http.StatusGone, nil},
		{"jwt: issuer changed on reload", jwtAuthenticator(t, jwks, "https://other.test", jwtTok), jwtGrant, 0, http.StatusGone, nil},
		{"jwt: no JWKS fetched since the reload (fetched at delivery)", jwtAuthenticator(t, jwks, testIssuer, ""), jwtGrant, 0, http.StatusOK, nil},
		{"jwt: no JWKS fetched since the reload, and none can be", jwtAuthenticator(t, unreachable, testIssuer, ""), jwtGrant, 0, http.StatusServiceUnavailable, nil},
		{"mtls: its CA still bound", mtlsAuthenticator(t, "a.example", caB, caA), caGrant, 0, http.StatusOK, nil},
		{"mtls: its CA removed from the trust domain's bundle", mtlsAuthenticator(t, "a.example", caB), caGrant, 0, http.StatusGone, nil},
		// Without trust domains, the CAs the listener verifies client
		// certificates with (client_ca_file, reloaded) vouch for them: a
		// CA removed from it ends the configs its certificates set. Before,
		// these were delivered until the certificate's expiry.
		{"mtls: its CA still in client_ca_file", before, tlsGrant, 0, http.StatusOK, authn.ClientCAs{fp(caA): true, fp(caB): true}},
		{"mtls: its CA removed from client_ca_file", before, tlsGrant, 0, http.StatusGone, authn.ClientCAs{fp(caB): true}},
		{"mtls: client CAs not Warden's (Envoy)", before, tlsGrant, 0, http.StatusOK, nil},
		{"mtls: sealed before anchors, client CAs known", before, cert, 0, http.StatusGone, authn.ClientCAs{fp(caA): true}},
		// A leaf cross-signed into two bundles holds while either CA does
		// (every verified chain anchors it, not the first alone).
		{"mtls: cross-signed, the other CA still in client_ca_file", before, crossTLS, 0, http.StatusOK, authn.ClientCAs{fp(caB): true}},
		{"mtls: cross-signed, neither CA in client_ca_file", before, crossTLS, 0, http.StatusGone, authn.ClientCAs{fp(caC): true}},
		{"mtls: cross-signed, the trust domain keeps the first CA", mtlsAuthenticator(t, "a.example", caA), crossBound, 0, http.StatusOK, nil},
		{"mtls: cross-signed, the trust domain keeps the second CA", mtlsAuthenticator(t, "a.example", caB), crossBound, 0, http.StatusOK, nil},
		{"mtls: cross-signed, the trust domain keeps neither", mtlsAuthenticator(t, "a.example", caC), crossBound, 0, http.StatusGone, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			principal := "alice"
			if tc.grant.Principal == spiffe {
				principal = spiffe
			}
			decisions := &proxytest.Decisions[proxy.Decision]{}
			e, err := proxy.New(proxy.Config{}, proxy.Options{Authenticator: tc.after, Policies: proxytest.Engine(t), Observer: decisions})
			if err != nil {
				t.Fatal(err)
			}
			r, err := New(Config{MaxAge: tc.maxAge}, listener.Limits{}, allow, ring(t, "0123456789abcdef0123456789abcdef"), owners{"t:task-1": principal, "c:ctx-1": principal}, handles, e, func() authn.ClientCAs { return tc.cas }, nil)
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(r)
			defer front.Close()
			r.Bound(front.Listener.Addr())
			n0 := legit.n.Load()
			u := r.URL(Target{Principal: principal, URL: legit.srv.URL + "/hook", Task: "task-1", Grant: tc.grant})
			resp, err := http.Post(u, "application/json", strings.NewReader(`{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1"}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if reached := legit.n.Load() != n0; reached != (tc.want == http.StatusOK) {
				t.Fatalf("webhook reached = %v, want %v", reached, !reached)
			}
			// The refusal is a decision, as the decision log records it.
			ds := decisions.All()
			switch want := map[int]rules.Reason{http.StatusGone: rules.ReasonPushConfigRevoked, http.StatusServiceUnavailable: rules.ReasonUnavailable}[tc.want]; {
			case want == "" && len(ds) != 0:
				t.Fatalf("decisions %+v, want none", ds)
			case want != "" && (len(ds) != 1 || ds[0].Allow || ds[0].Reason != want || ds[0].Principal != principal || ds[0].Protocol != "a2a" || ds[0].ID == ""):
				t.Fatalf("decisions %+v, want one refusal of %s with reason %s", ds, principal, want)
			}
		})
	}
}
