package test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestMACPJWT runs the runtime and Warden on the same JWKS: agents present
// RS256 tokens signed by a key made here, `sub` is the identity.
func TestMACPJWT(t *testing.T) { eachTransport(t, testMACPJWT) }

func testMACPJWT(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk := jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, a := range []string{"planner", "worker", "reviewer", "triage", "billing", "payments"} {
		tok, err := jwt.Signed(signer).Claims(jwt.Claims{
			Subject: a, Issuer: "macp-auth-service", Audience: jwt.Audience{"macp-runtime"},
			IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		tokens[a] = tok
	}
	direct := startRuntime(t, "MACP_AUTH_ISSUER=macp-auth-service", "MACP_AUTH_AUDIENCE=macp-runtime", "MACP_AUTH_JWKS_JSON="+string(jwks))
	warden := startWarden(t, direct, "--auth", "jwt", "--jwks-file", jwksFile, "--jwt-issuer", "macp-auth-service", "--jwt-audience", "macp-runtime")
	checkAllOK(t, "task direct", drive(t, direct, tokens, taskSession("T")))
	checkAllOK(t, "task through Warden", drive(t, warden, tokens, taskSession("T")))
	runAttacks(t, direct, warden, tokens)

	// A token signed by another key is refused by Warden before the runtime sees it.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forger, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: other}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.Signed(forger).Claims(jwt.Claims{Subject: "planner", Issuer: "macp-auth-service", Audience: jwt.Audience{"macp-runtime"},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	res := drive(t, warden, map[string]string{"planner": forged}, []step{sessionStart("planner", "F", taskMode, "planner", "worker")})
	if res[0].OK || res[0].Code != "UNAUTHENTICATED" {
		t.Errorf("forged token through Warden: ok=%v %s, want UNAUTHENTICATED", res[0].OK, res[0].Code)
	}
	// So is a token of the right key that expired.
	expired, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: "planner", Issuer: "macp-auth-service", Audience: jwt.Audience{"macp-runtime"},
		IssuedAt: jwt.NewNumericDate(time.Now().Add(-2 * time.Hour)), Expiry: jwt.NewNumericDate(time.Now().Add(-time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	res = drive(t, warden, map[string]string{"planner": expired}, []step{sessionStart("planner", "E", taskMode, "planner", "worker")})
	if res[0].OK || res[0].Code != "UNAUTHENTICATED" {
		t.Errorf("expired token through Warden: ok=%v %s, want UNAUTHENTICATED", res[0].OK, res[0].Code)
	}
}
