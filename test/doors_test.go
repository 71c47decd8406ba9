package test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/internal/testjwt"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/a2a"
	"github.com/agentwarden/warden/proxy/extauthz"
	"github.com/agentwarden/warden/proxy/handle"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/proxy/mcp"
)

// The door-equivalence table: every refusal of the JSON-RPC front door,
// sent to every door of a protocol (the standalone sidecar over HTTP, and
// ext_authz's Check as Envoy would call it), must get the same decision and
// the same answer on each wire: the HTTP status, the JSON-RPC (or HTTP+JSON)
// body, Content-Type, X-Warden-Decision, WWW-Authenticate and Allow; and an
// admitted request reaches the upstream through the sidecar exactly when
// ext_authz allows it. A row whose wire bytes the doors see differently
// (Envoy joins repeated field lines with commas before ext_authz) names
// each door's answer instead (doorCase.by).

// doorCase is one request and the HTTP status every door answers it with (0:
// admitted).
type doorCase struct {
	name   string
	method string
	path   string
	header [][2]string // replaces the base headers of the same names (an empty value removes them)
	body   string
	status int
	down   bool // with the verification keys unavailable
	// by is each door's own status where the doors see the request
	// differently (ext_authz sees Envoy's comma-joined value where the
	// sidecar sees field lines), and says a word of each door's refusal;
	// such a row is checked door by door, not door against door.
	by   map[string]int
	says map[string]string
}

// doorAnswer is what a client sees from a door.
type doorAnswer struct {
	admitted bool
	status   int
	header   map[string]string // the headers compared, by canonical name
	body     string
}

// comparedHeaders are the headers every door must give alike (the decision
// id is compared for presence only).
var comparedHeaders = []string{"Content-Type", "Www-Authenticate", "Allow"}

// doorSecret signs the tokens of the table (HS256).
var doorSecret = []byte("door-equivalence-secret-32-bytes-at-least")

// jwtFor mints an HS256 access token (typ at+jwt, which the doors'
// jwt.types requires) for sub expiring at exp, signed with key.
func jwtFor(t testing.TB, sub string, exp time.Time, key []byte) string {
	return jwtTyped(t, "at+jwt", sub, exp, key)
}

// jwtTyped is jwtFor with the header's typ typ (nil: none).
func jwtTyped(t testing.TB, typ any, sub string, exp time.Time, key []byte) string {
	return testjwt.SignTyped(t, testjwt.HS256(key), "", typ, map[string]any{"iss": "https://issuer.example", "aud": "warden", "sub": sub, "exp": exp.Unix(), "iat": time.Now().Add(-time.Minute).Unix()})
}

var doorPolicies = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

// doorEnforcer authenticates HS256 tokens of typ at+jwt; with down, RS256
// tokens whose keys cannot be fetched (every credential is "keys
// unavailable").
func doorEnforcer(t *testing.T, down bool) *proxy.Enforcer {
	t.Helper()
	return doorEnforcerWith(t, down, proxy.Config{}, proxy.Options{})
}

// doorEnforcerWith is doorEnforcer with cfg, and opts besides the
// authenticator and the policies.
func doorEnforcerWith(t *testing.T, down bool, cfg proxy.Config, opts proxy.Options) *proxy.Enforcer {
	t.Helper()
	pe, err := doorPolicies()
	if err != nil {
		t.Fatal(err)
	}
	jwt := authn.JWTConfig{Issuer: "https://issuer.example", Audience: authn.Audience{"warden"}, Types: []string{"at+jwt"}}
	if down {
		dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
		t.Cleanup(dead.Close)
		jwt.JWKSURL, jwt.Algorithms = dead.URL+"/jwks", []string{"HS256", "RS256"}
	} else {
		jwt.Algorithms = []string{"HS256"}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, doorSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	jwt.HMACSecretFile = secret
	a, err := authn.New(authn.Config{Mode: authn.Methods{authn.MethodJWT}, JWT: jwt}, authn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Authenticator, opts.Policies = a, pe
	e, err := proxy.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// doorUpstream answers every JSON-RPC request with an empty result and
// counts them.
func doorUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tasks":[]}}`))
	}))
	t.Cleanup(up.Close)
	return up, &n
}

// sidecarDoor sends c to a sidecar over HTTP.
func sidecarDoor(t *testing.T, front string, upstream *atomic.Int64, base [][2]string, c doorCase) doorAnswer {
	t.Helper()
	req, err := http.NewRequest(c.method, front+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	for _, kv := range doorHeaders(base, c.header) {
		if kv[0] == "Host" {
			req.Host = kv[1]
			continue
		}
		req.Header.Add(kv[0], kv[1])
	}
	before := upstream.Load()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if upstream.Load() != before {
		return doorAnswer{admitted: true}
	}
	a := doorAnswer{status: resp.StatusCode, header: map[string]string{}, body: string(b)}
	for _, k := range comparedHeaders {
		a.header[k] = strings.Join(resp.Header.Values(k), ", ")
	}
	a.header["X-Warden-Decision"] = presence(resp.Header.Get("X-Warden-Decision"))
	return a
}

// checkDoor sends c to ext_authz as Envoy describes it: headers lower-case,
// repeated ones joined with commas, pseudo-headers, the buffered body.
func checkDoor(t *testing.T, srv *extauthz.Server, base [][2]string, c doorCase) doorAnswer {
	t.Helper()
	h := map[string]string{":method": c.method, ":path": c.path, ":authority": "127.0.0.1"}
	host := "127.0.0.1"
	for _, kv := range doorHeaders(base, c.header) {
		k := strings.ToLower(kv[0])
		if k == "host" {
			host, h[":authority"] = kv[1], kv[1]
			continue
		}
		if v, ok := h[k]; ok {
			h[k] = v + "," + kv[1]
		} else {
			h[k] = kv[1]
		}
	}
	resp, err := srv.Check(context.Background(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
		Method: c.method, Path: c.path, Host: host, Scheme: "http", Protocol: "HTTP/1.1", Headers: h, RawBody: []byte(c.body), Size: int64(len(c.body)),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	dr := resp.GetDeniedResponse()
	if dr == nil {
		return doorAnswer{admitted: true}
	}
	a := doorAnswer{status: int(dr.GetStatus().GetCode()), header: map[string]string{}, body: dr.GetBody()}
	for _, hv := range dr.GetHeaders() {
		k := http.CanonicalHeaderKey(hv.GetHeader().GetKey())
		if k == "X-Warden-Decision" {
			a.header[k] = presence(hv.GetHeader().GetValue())
			continue
		}
		if a.header[k] != "" {
			a.header[k] += ", "
		}
		a.header[k] += hv.GetHeader().GetValue()
	}
	for _, k := range comparedHeaders {
		a.header[k] += "" // absent is empty, as on the sidecar
	}
	if _, ok := a.header["X-Warden-Decision"]; !ok {
		a.header["X-Warden-Decision"] = presence("")
	}
	return a
}

func presence(v string) string {
	if v == "" {
		return "(none)"
	}
	return "(present)"
}

// doorHeaders are base's headers with c's in place of those of the same
// names.
func doorHeaders(base, c [][2]string) [][2]string {
	override := map[string]bool{}
	for _, kv := range c {
		override[http.CanonicalHeaderKey(kv[0])] = true
	}
	var out [][2]string
	for _, kv := range base {
		if !override[http.CanonicalHeaderKey(kv[0])] {
			out = append(out, kv)
		}
	}
	for _, kv := range c {
		if kv[1] != "" {
			out = append(out, kv)
		}
	}
	return out
}

// contentCases are the refusals of the body's headers and bytes, the same
// for both protocols but for the status of a parse error (MCP's SDKs answer
// 400, A2A's 200) and the request.
func contentCases(path, message string, parse int) []doorCase {
	post := func(name string, header [][2]string, body string, status int) doorCase {
		return doorCase{name: name, method: "POST", path: path, header: header, body: body, status: status}
	}
	ct := func(v ...string) [][2]string {
		h := [][2]string{}
		for _, x := range v {
			h = append(h, [2]string{"Content-Type", x})
		}
		return h
	}
	utf7 := strings.Replace(message, `"2.0"`, `"2+AC4-0"`, 1)
	return []doorCase{
		post("no Content-Type", [][2]string{{"Content-Type", ""}}, message, 415),
		post("text/plain", ct("text/plain"), message, 415),
		post("application/json-seq", ct("application/json-seq"), message, 415),
		post("charset=utf-7 (body-parser decodes it)", ct("application/json; charset=utf-7"), utf7, 415),
		post("charset=UTF-16LE", ct("application/json; charset=UTF-16LE"), message, 415),
		post("charset=latin1", ct("application/json;charset=latin1"), message, 415),
		post("a parameter besides charset", ct("application/json; charset=utf-8; boundary=x"), message, 415),
		post("an unknown parameter", ct("application/json; v=1"), message, 415),
		post("charset twice", ct("application/json; charset=utf-8; charset=utf-7"), message, 415),
		post("RFC 2231 charset*", ct("application/json; charset*=utf-8''utf-7"), message, 415),
		post("two Content-Type lines", ct("application/json", "application/json"), message, 415),
		post("two Content-Type values in one line", ct("application/json, application/json"), message, 415),
		post("Content-Encoding gzip", [][2]string{{"Content-Encoding", "gzip"}}, message, 415),
		post("Content-Encoding identity, br", [][2]string{{"Content-Encoding", "identity, br"}}, message, 415),
		post("UTF-8 byte order mark", nil, "\xef\xbb\xbf"+message, parse),
		post("UTF-16 body", nil, "\xff\xfe{\x00}\x00", parse),
		post("a byte that is not UTF-8", nil, strings.Replace(message, `"2.0"`, "\"2.0\xff\"", 1), parse),
		post("over the body limit", nil, `{"jsonrpc":"2.0","id":7,"method":"x","params":{"pad":"`+strings.Repeat("a", 600)+`"}}`, 413),
		post("truncated JSON", nil, message[:len(message)/2], parse),
		post("not JSON", nil, "hello", parse),
		post("empty body", nil, "", parse),
		post("charset=utf-8 (admitted)", ct("application/json; charset=UTF-8"), message, 0),
		post("charset=\"utf-8\" (admitted)", ct(`application/json;charset="utf-8"`), message, 0),
	}
}

// overrideCases are headers some server or proxy reads in place of the
// request line's method or target (gate.Overridden's rule: a name with a
// token method, override, url, uri, path, prefix, rewrite or script, split at
// '-' or '_', in any case), each refused with status; the protocol's own
// Mcp-Method is not one of them.
func overrideCases(path, message string, status int) []doorCase {
	var cases []doorCase
	for _, h := range []string{"X-Forwarded-Uri", "X-Forwarded-Prefix", "X-Forwarded-Path", "X-Envoy-Original-Path", "X-Envoy-Original-Url",
		"X-Rewrite-URL", "X-Original-Method", "X-Original-URI", "X-Forwarded-Method", "X-Script-Name", "X-Override-Method", "X_Original_URL", "x-http-method-override",
		// A name with '_', which CGI and WSGI servers read as its '-' spelling:
		// a header Warden decides (Mcp-Name, Mcp-Session-Id) or owns
		// (X-Warden-Principal, X-Macp-Token) that Warden never saw.
		"Mcp_Name", "mcp_session_id", "X_Warden_Principal", "x_macp_token", "A2A_Extensions"} {
		cases = append(cases, doorCase{name: h, method: "POST", path: path, header: [][2]string{{h, "/admin"}}, body: message, status: status})
	}
	return append(cases, doorCase{name: "X-Forwarded-Host (not a target: admitted)", method: "POST", path: path, header: [][2]string{{"X-Forwarded-Host", "a.example"}}, body: message})
}

// identityCases are headers a server behind another authenticating proxy
// reads as the caller's identity, tenant or grant (gate's identity words:
// user, email, groups, principal, identity, tenant, role, ...), each refused
// with status: the client would assert what Warden never authenticated.
// User-Agent is not one of them.
func identityCases(path, message string, status int) []doorCase {
	var cases []doorCase
	for _, h := range []string{"X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Groups", "X-Forwarded-Preferred-Username",
		"X-Auth-Request-User", "Remote-User", "X-Remote-User", "X-WEBAUTH-USER", "X-Goog-Authenticated-User-Email",
		"X-Amzn-Oidc-Identity", "X-Ms-Client-Principal-Name", "Impersonate-Group", "X-Tenant-Id", "X-Roles", "X-Warden-Principal"} {
		cases = append(cases, doorCase{name: h, method: "POST", path: path, header: [][2]string{{h, "admin"}}, body: message, status: status})
	}
	return append(cases, doorCase{name: "User-Agent (admitted)", method: "POST", path: path, header: [][2]string{{"User-Agent", "user/1.0"}}, body: message})
}

// credentialCases are the refusals of credentials.
func credentialCases(t testing.TB, path, message string) []doorCase {
	post := func(name string, auth [][2]string, status int) doorCase {
		return doorCase{name: name, method: "POST", path: path, header: auth, body: message, status: status}
	}
	now := time.Now()
	return []doorCase{
		post("no credentials", [][2]string{{"Authorization", ""}}, 401),
		post("another scheme", [][2]string{{"Authorization", "Basic YWxpY2U6cHc="}}, 401),
		post("Bearer without a token", [][2]string{{"Authorization", "Bearer"}}, 401),
		post("two credentials", [][2]string{{"Authorization", "Bearer " + jwtFor(t, "alice", now.Add(time.Hour), doorSecret)}, {"Authorization", "Bearer " + jwtFor(t, "bob", now.Add(time.Hour), doorSecret)}}, 401),
		post("expired token", [][2]string{{"Authorization", "Bearer " + jwtFor(t, "alice", now.Add(-time.Hour), doorSecret)}}, 401),
		post("forged token", [][2]string{{"Authorization", "Bearer " + jwtFor(t, "alice", now.Add(time.Hour), []byte("another-secret-of-32-bytes-or-more!!"))}}, 401),
		post("not a JWT", [][2]string{{"Authorization", "Bearer alice"}}, 401),
		// jwt.types [at+jwt]: a token the issuer signed for another
		// purpose for the same audience (an ID token) is no credential.
		post("an ID token (typ JWT)", [][2]string{{"Authorization", "Bearer " + jwtTyped(t, "JWT", "alice", now.Add(time.Hour), doorSecret)}}, 401),
		post("a token without typ", [][2]string{{"Authorization", "Bearer " + jwtTyped(t, nil, "alice", now.Add(time.Hour), doorSecret)}}, 401),
		post("typ application/AT+JWT (admitted)", [][2]string{{"Authorization", "Bearer " + jwtTyped(t, "application/AT+JWT", "alice", now.Add(time.Hour), doorSecret)}}, 0),
		{name: "verification keys unavailable", method: "POST", path: path, body: message, status: 503, down: true,
			header: [][2]string{{"Authorization", "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhbGljZSJ9.c2ln"}}},
	}
}

// doorPair is a protocol's doors: its sidecar (built with err) served over
// HTTP, and ext_authz configured with cfg.
func doorPair(t *testing.T, base [][2]string, upstream *atomic.Int64, side http.Handler, err error, cfg extauthz.Config, down bool) map[string]func(doorCase) doorAnswer {
	t.Helper()
	return doorPairWith(t, base, upstream, side, err, cfg, doorEnforcer(t, down))
}

// doorPairWith is doorPair with ext_authz deciding on enf.
func doorPairWith(t *testing.T, base [][2]string, upstream *atomic.Int64, side http.Handler, err error, cfg extauthz.Config, enf *proxy.Enforcer) map[string]func(doorCase) doorAnswer {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(side)
	t.Cleanup(front.Close)
	dec, err := sessions.New(enf, sessions.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := extauthz.New(cfg, dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]func(doorCase) doorAnswer{
		"sidecar":   func(c doorCase) doorAnswer { return sidecarDoor(t, front.URL, upstream, base, c) },
		"ext_authz": func(c doorCase) doorAnswer { return checkDoor(t, ext, base, c) },
	}
}

// runDoors runs cases against every door, each door built for keys up and
// keys down.
func runDoors(t *testing.T, doors func(t *testing.T, down bool) map[string]func(doorCase) doorAnswer, cases []doorCase) {
	built := map[bool]map[string]func(doorCase) doorAnswer{false: doors(t, false), true: doors(t, true)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var first string
			var want doorAnswer
			for name, door := range built[c.down] {
				got := door(c)
				status, ok := c.by[name]
				if !ok {
					status = c.status
				}
				switch {
				case status == 0 && !got.admitted:
					t.Errorf("%s refused it: HTTP %d %s", name, got.status, got.body)
				case status != 0 && got.admitted:
					t.Errorf("%s admitted it, want HTTP %d", name, status)
				case status != 0 && got.status != status:
					t.Errorf("%s: HTTP %d %s, want %d", name, got.status, got.body, status)
				case status != 0 && got.header["X-Warden-Decision"] != "(present)":
					t.Errorf("%s: no X-Warden-Decision on the refusal", name)
				case status != 0 && !strings.Contains(got.body, c.says[name]):
					t.Errorf("%s: %s, want it to say %q", name, got.body, c.says[name])
				}
				if c.by != nil {
					continue // each door answers what it sees
				}
				got.body = strings.ReplaceAll(got.body, "extauthz.max_body_bytes", "max_body_bytes")
				got.body = strings.ReplaceAll(strings.ReplaceAll(got.body, "mcp.max_body_bytes", "max_body_bytes"), "a2a.max_body_bytes", "max_body_bytes")
				if first == "" {
					first, want = name, got
					continue
				}
				if got.admitted != want.admitted || got.status != want.status || got.body != want.body {
					t.Errorf("doors disagree:\n  %s: admitted %v HTTP %d %s\n  %s: admitted %v HTTP %d %s", first, want.admitted, want.status, want.body, name, got.admitted, got.status, got.body)
				}
				for k, v := range want.header {
					if got.header[k] != v {
						t.Errorf("doors disagree on %s: %s %q, %s %q", k, first, v, name, got.header[k])
					}
				}
			}
		})
	}
}

// TestMCPDoors: the MCP sidecar and MCP ext_authz answer every front-door
// case alike.
func TestMCPDoors(t *testing.T) {
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	token := "Bearer " + jwtFor(t, "alice", time.Now().Add(time.Hour), doorSecret)
	base := [][2]string{{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}, {"Authorization", token}, {"Host", "127.0.0.1"}}
	as := []string{"https://as.example"}
	doors := func(t *testing.T, down bool) map[string]func(doorCase) doorAnswer {
		up, n := doorUpstream(t)
		cfg := mcp.Config{AuthorizationServers: as, Resource: "https://mcp.example/mcp"}
		cfg.Listen, cfg.Upstream, cfg.Plaintext, cfg.MaxBodyBytes = "127.0.0.1:3001", up.URL+"/mcp", true, 512
		side, err := mcp.New(cfg, doorEnforcer(t, down), doorKeys(t), up.Client(), nil)
		return doorPair(t, base, n, side, err, extauthz.Config{Listen: "unused", MCP: true, MCPPath: "/mcp", AllowedHosts: []string{"localhost", "127.0.0.1", "[::1]"},
			MaxBodyBytes: 512, AuthorizationServers: as, Resource: "https://mcp.example/mcp"}, down)
	}
	cases := []doorCase{
		{name: "ping (admitted)", method: "POST", path: "/mcp", body: ping},
		{name: "GET stream (admitted)", method: "GET", path: "/mcp", header: [][2]string{{"Content-Type", ""}}},
		{name: "another path", method: "POST", path: "/admin", body: ping, status: 404},
		{name: "the legacy SSE endpoint", method: "POST", path: "/messages?sessionId=1", body: ping, status: 404},
		{name: "an escaped endpoint", method: "POST", path: "/m%63p", body: ping, status: 404},
		{name: "a query on the endpoint (the legacy transport's sessionId)", method: "POST", path: "/mcp?sessionId=1", body: ping, status: 400},
		{name: "an API key in the query", method: "POST", path: "/mcp?key=k", body: ping, status: 400},
		{name: "an empty query", method: "POST", path: "/mcp?", body: ping, status: 400},
		{name: "a query on the GET stream", method: "GET", path: "/mcp?sessionId=1", header: [][2]string{{"Content-Type", ""}}, status: 400},
		{name: "a query on DELETE", method: "DELETE", path: "/mcp?x=1", header: [][2]string{{"Content-Type", ""}}, status: 400},
		{name: "a query on the metadata", method: "GET", path: "/.well-known/oauth-protected-resource/mcp?x=1", status: 400},
		{name: "a query without credentials", method: "POST", path: "/mcp?x=1", header: [][2]string{{"Authorization", ""}}, body: ping, status: 400},
		{name: "X-HTTP-Method-Override", method: "POST", path: "/mcp", header: [][2]string{{"X-HTTP-Method-Override", "DELETE"}}, body: ping, status: 400},
		{name: "X-Original-URL", method: "POST", path: "/mcp", header: [][2]string{{"X-Original-URL", "/admin"}}, body: ping, status: 400},
		{name: "X-Rewrite-URL on the GET stream", method: "GET", path: "/mcp", header: [][2]string{{"Content-Type", ""}, {"X-Rewrite-URL", "/admin"}}, status: 400},
		{name: "a trailing slash", method: "POST", path: "/mcp/", body: ping, status: 404},
		{name: "a doubled slash", method: "POST", path: "//mcp", body: ping, status: 404},
		{name: "a dot segment", method: "POST", path: "/x/../mcp", body: ping, status: 404},
		{name: "the metadata of another resource", method: "GET", path: "/.well-known/oauth-protected-resource/admin", status: 404},
		{name: "POST to the metadata", method: "POST", path: "/.well-known/oauth-protected-resource/mcp", body: ping, status: 405},
		{name: "PUT", method: "PUT", path: "/mcp", body: ping, status: 405},
		{name: "PATCH without credentials", method: "PATCH", path: "/mcp", header: [][2]string{{"Authorization", ""}}, status: 405},
		{name: "GET with a body", method: "GET", path: "/mcp", body: ping, status: 400},
		{name: "a foreign Origin", method: "POST", path: "/mcp", header: [][2]string{{"Origin", "https://evil.example"}}, body: ping, status: 403},
		{name: "an Origin with a path", method: "POST", path: "/mcp", header: [][2]string{{"Origin", "http://localhost/x"}}, body: ping, status: 403},
		{name: "Mcp-Method twice", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Method", "ping"}, {"Mcp-Method", "tasks/cancel"}}, body: ping, status: 400},
		{name: "MCP-Protocol-Version twice in one line", method: "POST", path: "/mcp", header: [][2]string{{"MCP-Protocol-Version", "2025-11-25, 2026-07-28"}}, body: ping, status: 400},
		{name: "a batch", method: "POST", path: "/mcp", body: "[" + ping + "]", status: 400},
		{name: "a member spelled twice", method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tasks/cancel"}`, status: 400},
		{name: "tasks/cancel without an id", method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"t"}}`, status: 400},
		{name: "an id that is not canonical", method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, status: 400},
		{name: "a foreign Origin and no credentials", method: "POST", path: "/mcp", header: [][2]string{{"Origin", "https://evil.example"}, {"Authorization", ""}}, body: ping, status: 403},
		{name: "no credentials and text/plain", method: "POST", path: "/mcp", header: [][2]string{{"Authorization", ""}, {"Content-Type", "text/plain"}}, body: ping, status: 401},
	}
	cases = append(cases, credentialCases(t, "/mcp", ping)...)
	cases = append(cases, overrideCases("/mcp", ping, 400)...)
	cases = append(cases, identityCases("/mcp", ping, 400)...)
	cases = append(cases, doorCase{name: "Mcp-Method (the protocol's own: admitted)", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Method", "ping"}}, body: ping})
	// SEP-2243's Mcp-Param-{Name}: the name is a tool's choice, the header
	// MCP's own (forwarded: intermediaries must).
	cases = append(cases, doorCase{name: "Mcp-Param-Path (the protocol's own: admitted)", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Path", "/a"}}, body: ping})
	// Repeated headers as two field lines: ext_authz sees Envoy's one
	// comma-joined value (the fifteenth pass's third attacker).
	cases = append(cases,
		doorCase{name: "Mcp-Session-Id twice", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Session-Id", "s1"}, {"Mcp-Session-Id", "s2"}}, body: ping, status: 400},
		doorCase{name: "Authorization twice", method: "POST", path: "/mcp", header: [][2]string{{"Authorization", token}, {"Authorization", token}}, body: ping, status: 401},
		doorCase{name: "Content-Type twice", method: "POST", path: "/mcp", header: [][2]string{{"Content-Type", "application/json"}, {"Content-Type", "application/json"}}, body: ping, status: 415},
	)
	// Mcp-Param-* given twice is refused on both doors; a comma in one line
	// is one value to the sidecar, which sees lines (as SEP-2243 clients send
	// "Paris, France" and the SDK servers read it), and refused by ext_authz,
	// which cannot tell it from Envoy's join of two lines (U3).
	twice := map[string]string{"sidecar": "given 2 times", "ext_authz": "=?base64?"}
	refused, comma := map[string]int{"sidecar": 400, "ext_authz": 400}, map[string]int{"sidecar": 0, "ext_authz": 400}
	cases = append(cases,
		doorCase{name: "Mcp-Param-Path twice", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Path", "/a"}, {"Mcp-Param-Path", "/b"}}, body: ping, by: refused, says: twice},
		doorCase{name: "Mcp-Param-Path twice, names spelled otherwise", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Path", "/a"}, {"mcp-param-path", "/b"}}, body: ping, by: refused, says: twice},
		doorCase{name: "Mcp-Param-Path twice, a comma in the first", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Path", "/a,/b"}, {"Mcp-Param-Path", "/c"}}, body: ping, by: refused, says: twice},
		doorCase{name: "Mcp-Param-Path, a list in one line", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Path", "/a,/b"}}, body: ping, by: comma, says: twice},
		doorCase{name: "Mcp-Param-Region, Paris, France in one line", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Region", "Paris, France"}}, body: ping, by: comma, says: twice},
		doorCase{name: "Mcp-Param-Region, Paris, France in base64 (admitted)", method: "POST", path: "/mcp", header: [][2]string{{"Mcp-Param-Region", "=?base64?UGFyaXMsIEZyYW5jZQ==?="}}, body: ping},
	)
	cases = append(cases, contentCases("/mcp", ping, 400)...)
	runDoors(t, doors, cases)
}

// TestA2ADoors: the A2A sidecar and A2A ext_authz answer every front-door
// case alike.
func TestA2ADoors(t *testing.T) {
	const list = `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	token := "Bearer " + jwtFor(t, "alice", time.Now().Add(time.Hour), doorSecret)
	base := [][2]string{{"Content-Type", "application/json"}, {"Authorization", token}}
	doors := func(t *testing.T, down bool) map[string]func(doorCase) doorAnswer {
		up, n := doorUpstream(t)
		cfg := a2a.Config{}
		cfg.Listen, cfg.Upstream, cfg.Plaintext, cfg.MaxBodyBytes = "127.0.0.1:3002", up.URL+"/jsonrpc", true, 512
		side, err := a2a.New(cfg, doorEnforcer(t, down), doorKeys(t), up.Client(), nil)
		return doorPair(t, base, n, side, err, extauthz.Config{Listen: "unused", A2A: true, A2APath: "/jsonrpc", MaxBodyBytes: 512}, down)
	}
	cases := []doorCase{
		{name: "ListTasks (admitted)", method: "POST", path: "/jsonrpc", body: list},
		{name: "a REST path", method: "POST", path: "/v1/tasks/t1:cancel", body: list, status: 404},
		{name: "a REST path without credentials", method: "GET", path: "/v1/tasks", header: [][2]string{{"Authorization", ""}}, status: 404},
		{name: "under the endpoint", method: "POST", path: "/jsonrpc/x", body: list, status: 404},
		{name: "an escaped endpoint", method: "POST", path: "/json%72pc", body: list, status: 404},
		{name: "a query on the endpoint", method: "POST", path: "/jsonrpc?key=k", body: list, status: 200},
		{name: "an empty query", method: "POST", path: "/jsonrpc?", body: list, status: 200},
		{name: "a query without credentials", method: "POST", path: "/jsonrpc?x=1", header: [][2]string{{"Authorization", ""}}, body: list, status: 200},
		{name: "a query on the agent card", method: "GET", path: "/.well-known/agent-card.json?x=1", status: 400},
		{name: "a query on 0.3's agent card", method: "GET", path: "/.well-known/agent.json?x=1", status: 400},
		{name: "a query on GET of the endpoint", method: "GET", path: "/jsonrpc?x=1", status: 405},
		{name: "X-HTTP-Method", method: "POST", path: "/jsonrpc", header: [][2]string{{"X-HTTP-Method", "GET"}}, body: list, status: 200},
		{name: "X-Original-URL on the agent card", method: "GET", path: "/.well-known/agent-card.json", header: [][2]string{{"X-Original-URL", "/v1/tasks"}}, status: 400},
		{name: "a doubled slash", method: "POST", path: "//jsonrpc", body: list, status: 404},
		{name: "POST to the agent card", method: "POST", path: "/.well-known/agent-card.json", body: list, status: 405},
		{name: "DELETE of 0.3's agent card", method: "DELETE", path: "/.well-known/agent.json", status: 405},
		{name: "GET of the endpoint", method: "GET", path: "/jsonrpc", status: 405},
		{name: "PUT of the endpoint", method: "PUT", path: "/jsonrpc", body: list, status: 405},
		{name: "a batch", method: "POST", path: "/jsonrpc", body: "[" + list + "]", status: 200},
		{name: "a notification", method: "POST", path: "/jsonrpc", body: `{"jsonrpc":"2.0","method":"ListTasks","params":{}}`, status: 200},
		{name: "a member folded", method: "POST", path: "/jsonrpc", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"t1"}}`, status: 200},
		{name: "an unknown method", method: "POST", path: "/jsonrpc", body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1"}}`, status: 200},
		{name: "0.3's method name", method: "POST", path: "/jsonrpc", body: `{"jsonrpc":"2.0","id":"a","method":"message/send","params":{}}`, status: 200},
	}
	cases = append(cases, credentialCases(t, "/jsonrpc", list)...)
	cases = append(cases, overrideCases("/jsonrpc", list, 200)...)
	cases = append(cases, identityCases("/jsonrpc", list, 200)...)
	cases = append(cases, contentCases("/jsonrpc", list, 200)...)
	runDoors(t, doors, cases)
}

// doorKeys is a one-key handle keyring for the doors' sidecars.
func doorKeys(t *testing.T) *handle.Ring {
	t.Helper()
	r, err := handle.SingleKey([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
