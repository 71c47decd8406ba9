package test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestMACPJWT runs the runtime and Warden on the same JWKS: agents present
// RS256 tokens signed by a key made here, `sub` is the identity.
func TestMACPJWT(t *testing.T) { eachTransport(t, testMACPJWT) }

func testMACPJWT(t *testing.T) {
	jwksFile, jwks, signer := jwtKey(t, t.TempDir())
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

// TestMACPJWTPrincipalClaim (H5) against the real MACP runtime: with
// authn.jwt.principal_claim: email, a JWT whose sub equals its email is
// decided as that agent and the runtime, naming the sender by sub, agrees
// (a task session runs); one whose sub differs (mallory's token carrying
// planner's email) is refused UNAUTHENTICATED by Warden before the runtime
// sees it. Before H5, Warden decided it as planner and passed it, and the
// runtime, naming mallory, answered (fails: the refusal was the runtime's).
func TestMACPJWTPrincipalClaim(t *testing.T) { eachTransport(t, testMACPJWTPrincipalClaim) }

func testMACPJWTPrincipalClaim(t *testing.T) {
	dir := t.TempDir()
	jwksFile, jwks, signer := jwtKey(t, dir)
	cfg := filepath.Join(dir, "warden.yaml")
	if err := os.WriteFile(cfg, []byte("authn:\n  jwt:\n    principal_claim: email\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sign := func(sub, email string) string {
		tok, err := jwt.Signed(signer).Claims(jwt.Claims{
			Subject: sub, Issuer: "macp-auth-service", Audience: jwt.Audience{"macp-runtime"},
			IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).Claims(map[string]any{"email": email}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tokens := map[string]string{}
	for _, a := range []string{"planner", "worker", "reviewer", "triage", "billing", "payments"} {
		tokens[a] = sign(a, a)
	}
	direct := startRuntime(t, "MACP_AUTH_ISSUER=macp-auth-service", "MACP_AUTH_AUDIENCE=macp-runtime", "MACP_AUTH_JWKS_JSON="+string(jwks))
	warden := startWarden(t, direct, "--config", cfg, "--auth", "jwt", "--jwks-file", jwksFile, "--jwt-issuer", "macp-auth-service", "--jwt-audience", "macp-runtime")
	checkAllOK(t, "sub equals email through Warden", drive(t, warden, tokens, taskSession("T")))

	res := drive(t, warden, map[string]string{"planner": sign("mallory", "planner")}, []step{sessionStart("planner", "M", taskMode, "planner", "worker")})
	// Warden refuses it (its refusal names its decision); before H5 Warden
	// passed it as planner and the runtime, naming mallory, answered.
	if res[0].OK || res[0].Code != "UNAUTHENTICATED" || !strings.Contains(res[0].Message, "warden decision") {
		t.Errorf("sub mallory, email planner through Warden: ok=%v %s %q, want UNAUTHENTICATED", res[0].OK, res[0].Code, res[0].Message)
	}
}

// jwtKey makes an RS256 key, writes its JWKS (key id "k1") to dir and
// returns the file, the JWKS and a signer of JWTs with that key.
func jwtKey(t *testing.T, dir string) (jwksFile string, jwks []byte, signer jose.Signer) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk := jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}
	jwks, err = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	if err != nil {
		t.Fatal(err)
	}
	jwksFile = filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	return jwksFile, jwks, signer
}
