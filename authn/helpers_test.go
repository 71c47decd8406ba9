package authn

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "macp-runtime"
)

// t0 is the fake clock's starting time.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// signingKey is a private key with the kid and alg it signs under.
type signingKey = testjwt.Key

// testKeys are generated once per test binary; RSA generation is slow.
type testKeys struct {
	rsa, ec, ed, rsaOther signingKey
}

var keysOnce = sync.OnceValue(func() *testKeys {
	return &testKeys{rsa: testjwt.RS256("rsa-1"), ec: testjwt.ES256("ec-1"), ed: testjwt.EdDSA("ed-1"), rsaOther: testjwt.RS256("rsa-2")}
})

// claimsAt returns valid claims for sub issued at now and expiring in an hour.
func claimsAt(now time.Time, sub string) map[string]any {
	return map[string]any{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": sub,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
		"macp_scopes": map[string]any{
			"can_start_sessions": true,
			"allowed_modes":      []any{"macp.mode.task.v1"},
		},
	}
}

// writeFile writes b into a fresh temp dir and returns its path.
func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// jwksServer serves a JWKS on 127.0.0.1, counts fetches and can be made to fail.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int64
	failing atomic.Bool
	delay   atomic.Int64 // nanoseconds to wait before answering
	holding atomic.Bool  // answer once release is closed (or after heldFor)
	release chan struct{}
	mu      sync.Mutex
	body    []byte
}

// heldFor bounds a held answer, so that a caller that waits for it
// (wrongly) fails its test instead of hanging.
const heldFor = 30 * time.Second

func newJWKSServer(t testing.TB, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if s.holding.Load() {
			select {
			case <-s.release:
			case <-time.After(heldFor):
			case <-r.Context().Done():
				return
			}
		}
		if d := time.Duration(s.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if s.failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		b := s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = b
}

// jwtConfig returns a JWT config against the test issuer and audience.
func jwtConfig() Config {
	return Config{
		Mode: Methods{MethodJWT},
		JWT:  JWTConfig{Issuer: testIssuer, Audience: Audience{testAudience}},
	}
}

// mustNew builds an Authenticator or fails the test.
func mustNew(t testing.TB, cfg Config, clock *fakeClock) *Authenticator {
	t.Helper()
	a, err := New(cfg, Options{Now: clock.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// discardLogger returns a logger that drops everything.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
