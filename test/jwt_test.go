package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

// TestMACPJWT runs the runtime and Warden on the same JWKS: agents present
// RS256 tokens signed by a key made here, `sub` is the identity.
func TestMACPJWT(t *testing.T) { eachTransport(t, testMACPJWT) }

func testMACPJWT(t *testing.T) {
	jwksFile, jwks, key := jwtKey(t, t.TempDir())
	tokens := map[string]string{}
	for _, a := range []string{"planner", "worker", "reviewer", "triage", "billing", "payments"} {
		tokens[a] = testjwt.Sign(t, key, "k1", runtimeClaims(a, time.Now(), time.Now().Add(time.Hour)))
	}
	direct := startRuntime(t, "MACP_AUTH_ISSUER=macp-auth-service", "MACP_AUTH_AUDIENCE=macp-runtime", "MACP_AUTH_JWKS_JSON="+string(jwks))
	warden := startWarden(t, direct, "--auth", "jwt", "--jwks-file", jwksFile, "--jwt-issuer", "macp-auth-service", "--jwt-audience", "macp-runtime")
	checkAllOK(t, "task direct", drive(t, direct, tokens, taskSession("T")))
	checkAllOK(t, "task through Warden", drive(t, warden, tokens, taskSession("T")))
	runAttacks(t, direct, warden, tokens)

	// A token signed by another key is refused by Warden before the runtime sees it.
	forged := testjwt.Sign(t, testjwt.RS256("k1"), "k1", runtimeClaims("planner", time.Now(), time.Now().Add(time.Hour)))
	res := drive(t, warden, map[string]string{"planner": forged}, []step{sessionStart("planner", "F", taskMode, "planner", "worker")})
	if res[0].OK || res[0].Code != "UNAUTHENTICATED" {
		t.Errorf("forged token through Warden: ok=%v %s, want UNAUTHENTICATED", res[0].OK, res[0].Code)
	}
	// So is a token of the right key that expired.
	expired := testjwt.Sign(t, key, "k1", runtimeClaims("planner", time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)))
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
	jwksFile, jwks, key := jwtKey(t, dir)
	cfg := jwtConfigFile(t, dir, "principal_claim: email")
	sign := func(sub, email string) string {
		c := runtimeClaims(sub, time.Now(), time.Now().Add(time.Hour))
		c["email"] = email
		return testjwt.Sign(t, key, "k1", c)
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

// TestMACPJWTTypes (T4) against the real MACP runtime: with
// authn.jwt.types [at+jwt], agents' tokens of typ at+jwt run a task session
// through Warden (the runtime does not read typ); an ID token of the same
// issuer, audience and key (typ JWT), which the runtime alone accepts, is
// refused UNAUTHENTICATED by Warden before the runtime sees it. Before
// jwt.types, Warden passed it (and the key was refused in the config).
func TestMACPJWTTypes(t *testing.T) { eachTransport(t, testMACPJWTTypes) }

func testMACPJWTTypes(t *testing.T) {
	dir := t.TempDir()
	jwksFile, jwks, key := jwtKey(t, dir)
	cfg := jwtConfigFile(t, dir, "types: [at+jwt]")
	tokens := map[string]string{}
	for _, a := range []string{"planner", "worker", "reviewer", "triage", "billing", "payments"} {
		tokens[a] = testjwt.SignTyped(t, key, "k1", "at+jwt", runtimeClaims(a, time.Now(), time.Now().Add(time.Hour)))
	}
	direct := startRuntime(t, "MACP_AUTH_ISSUER=macp-auth-service", "MACP_AUTH_AUDIENCE=macp-runtime", "MACP_AUTH_JWKS_JSON="+string(jwks))
	warden := startWarden(t, direct, "--config", cfg, "--auth", "jwt", "--jwks-file", jwksFile, "--jwt-issuer", "macp-auth-service", "--jwt-audience", "macp-runtime")
	checkAllOK(t, "at+jwt through Warden", drive(t, warden, tokens, taskSession("T")))

	idToken := map[string]string{"planner": testjwt.Sign(t, key, "k1", runtimeClaims("planner", time.Now(), time.Now().Add(time.Hour)))}
	if res := drive(t, direct, idToken, []step{sessionStart("planner", "D", taskMode, "planner", "worker")}); !res[0].OK {
		t.Errorf("the ID token direct: %s %q, want the runtime to accept it (what Warden closes)", res[0].Code, res[0].Message)
	}
	res := drive(t, warden, idToken, []step{sessionStart("planner", "I", taskMode, "planner", "worker")})
	if res[0].OK || res[0].Code != "UNAUTHENTICATED" || !strings.Contains(res[0].Message, "warden decision") {
		t.Errorf("the ID token through Warden: ok=%v %s %q, want UNAUTHENTICATED", res[0].OK, res[0].Code, res[0].Message)
	}
}

// jwtConfigFile writes a config file to dir setting the one authn.jwt
// key line and returns its path.
func jwtConfigFile(t *testing.T, dir, line string) string {
	t.Helper()
	cfg := filepath.Join(dir, "warden.yaml")
	if err := os.WriteFile(cfg, []byte("authn:\n  jwt:\n    "+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// jwtKey makes an RS256 key, writes its JWKS (key id "k1") to dir and
// returns the file, the JWKS and the key.
func jwtKey(t *testing.T, dir string) (jwksFile string, jwks []byte, key testjwt.Key) {
	t.Helper()
	key = testjwt.RS256("k1")
	jwks = testjwt.JWKS(t, key)
	jwksFile = filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return jwksFile, jwks, key
}

// runtimeClaims are the claims of a token for sub that the runtime and
// Warden are configured for, issued at iat and expiring at exp.
func runtimeClaims(sub string, iat, exp time.Time) map[string]any {
	return map[string]any{"sub": sub, "iss": "macp-auth-service", "aud": "macp-runtime", "iat": iat.Unix(), "exp": exp.Unix()}
}
