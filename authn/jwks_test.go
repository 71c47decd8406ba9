package authn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

// urlJWTAuthenticator returns a JWT authenticator fetching its JWKS from srv.
func urlJWTAuthenticator(t *testing.T, srv *jwksServer, clock *fakeClock) *Authenticator {
	t.Helper()
	cfg := jwtConfig()
	cfg.JWT.JWKSURL = srv.URL + "/.well-known/jwks.json"
	a, err := New(cfg, Options{Now: clock.Now, HTTPClient: srv.Client(), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// expect authenticates tok and checks the outcome.
func expect(t *testing.T, a *Authenticator, tok string, wantErr error) {
	t.Helper()
	p, err := a.Authenticate(context.Background(), Credentials{Bearer: tok})
	if !errors.Is(err, wantErr) {
		t.Fatalf("err = %v, want %v", err, wantErr)
	}
	if wantErr == nil && p.ID == "" {
		t.Fatal("no principal")
	}
}

// expectFetches checks the server's fetch count.
func expectFetches(t *testing.T, srv *jwksServer, want int64) {
	t.Helper()
	if got := srv.fetches.Load(); got != want {
		t.Fatalf("fetches = %d, want %d", got, want)
	}
}

func TestJWKSURLLazyAndCached(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa, k.ec))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	expectFetches(t, srv, 0) // New does not fetch a URL

	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	expect(t, a, tok, nil)
	expectFetches(t, srv, 1)
	expect(t, a, testjwt.Sign(t, k.ec, k.ec.KID, claimsAt(t0, "agent-b")), nil)
	expect(t, a, tok, nil)
	expectFetches(t, srv, 1) // keys cached

	clock.Advance(5*time.Minute + time.Second) // past jwks_refresh
	expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-c")), nil)
	expectFetches(t, srv, 2)
}

func TestJWKSURLUnknownKidRefresh(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a")), nil)
	expectFetches(t, srv, 1)

	// The issuer rotates in a new key; a token naming it triggers a refresh,
	// but not within minRefreshInterval of the previous fetch.
	srv.setBody(testjwt.JWKS(t, k.rsa, k.rsaOther))
	rotated := testjwt.Sign(t, k.rsaOther, k.rsaOther.KID, claimsAt(t0, "agent-b"))
	expect(t, a, rotated, ErrInvalidCredentials)
	expectFetches(t, srv, 1)

	clock.Advance(minRefreshInterval)
	expect(t, a, rotated, nil)
	expectFetches(t, srv, 2)

	// Unknown kids cannot make Warden hammer the issuer.
	for i := range 20 {
		expect(t, a, testjwt.Sign(t, k.ec, fmt.Sprintf("bogus-%d", i), claimsAt(t0, "x")), ErrInvalidCredentials)
	}
	expectFetches(t, srv, 2)
	clock.Advance(minRefreshInterval)
	expect(t, a, testjwt.Sign(t, k.ec, "bogus", claimsAt(t0, "x")), ErrInvalidCredentials)
	expectFetches(t, srv, 3)
}

func TestJWKSURLStaleWhileError(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a")), nil)

	srv.failing.Store(true)
	clock.Advance(30 * time.Minute) // stale, within the grace
	expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-b")), nil)
	expectFetches(t, srv, 2) // the refresh was tried
	expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-c")), nil)
	expectFetches(t, srv, 2) // and is not retried on every request

	// An unknown kid cannot be decided while the issuer is down.
	clock.Advance(minRefreshInterval)
	expect(t, a, testjwt.Sign(t, k.rsaOther, k.rsaOther.KID, claimsAt(clock.Now(), "agent-d")), ErrKeysUnavailable)

	clock.Advance(time.Hour) // past jwks_refresh + jwks_stale_grace
	_, err := a.Authenticate(context.Background(), Credentials{Bearer: testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-e"))})
	if !errors.Is(err, ErrKeysUnavailable) || Reason(err) != "keys_unavailable" {
		t.Fatalf("err = %v, want keys_unavailable", err)
	}

	srv.failing.Store(false)
	clock.Advance(minRefreshInterval)
	expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-f")), nil)
}

func TestJWKSURLUnavailableFromStart(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, nil)
	srv.failing.Store(true)
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	for range 5 {
		expect(t, a, tok, ErrKeysUnavailable)
	}
	expectFetches(t, srv, 1) // failures are rate-limited too

	tests := []struct {
		name string
		body string
	}{
		{name: "not JSON", body: "<html>"},
		{name: "not a JWKS", body: `{"issuer":"x"}`},
		{name: "keys not an array", body: `{"keys":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, []byte(tt.body))
			a := urlJWTAuthenticator(t, srv, newClock())
			expect(t, a, tok, ErrKeysUnavailable)
		})
	}
}

func TestJWKSURLCacheHitWhileDown(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, with(claimsAt(t0, "agent-a"), "exp", t0.Add(30*time.Minute).Unix()))
	expect(t, a, tok, nil)

	srv.Close() // the issuer is gone
	clock.Advance(20 * time.Minute)
	expect(t, a, tok, nil)
	expectFetches(t, srv, 1) // answered from the verified-token cache

	clock.Advance(11 * time.Minute) // past exp + leeway
	expect(t, a, tok, ErrExpired)
}

func TestJWKSURLSingleFlight(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
	srv.delay.Store(int64(100 * time.Millisecond))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)

	const n = 32
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, fmt.Sprintf("agent-%d", i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, tok := range tokens {
		wg.Go(func() {
			_, err := a.Authenticate(context.Background(), Credentials{Bearer: tok})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	expectFetches(t, srv, 1)
}

// TestJWKSURLCallerCancel: a caller that gives up gets its error at once,
// but the fetch it triggered runs on: the next caller gets its keys, and
// callers hanging up over and over cannot make Warden fetch again within
// minRefreshInterval.
func TestJWKSURLCallerCancel(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
	srv.holding.Store(true) // the fetch answers when the callers are done (a 300 ms delay raced a 200 ms bound)
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	other := testjwt.Sign(t, k.ec, "unknown-kid", claimsAt(t0, "agent-b"))

	for i := range 50 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		start := time.Now()
		_, err := a.Authenticate(ctx, Credentials{Bearer: []string{tok, other}[i%2]})
		cancel()
		if !errors.Is(err, ErrKeysUnavailable) {
			t.Fatalf("caller %d: err = %v, want keys unavailable", i, err)
		}
		if d := time.Since(start); d > 5*time.Second { // a caller waiting for the fetch waits heldFor
			t.Fatalf("caller %d waited %v after giving up", i, d)
		}
	}
	close(srv.release)
	expect(t, a, tok, nil) // waits for the one fetch
	expectFetches(t, srv, 1)
	// An unknown key within minRefreshInterval fetches nothing more.
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, _ = a.Authenticate(ctx, Credentials{Bearer: other})
		cancel()
	}
	expectFetches(t, srv, 1)
}

func TestJWKSKeyRemovalInvalidatesCache(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa, k.ec))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	rsaTok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	expect(t, a, rsaTok, nil)

	// The issuer revokes the RSA key; the next refresh notices.
	srv.setBody(testjwt.JWKS(t, k.ec))
	clock.Advance(6 * time.Minute)
	expect(t, a, testjwt.Sign(t, k.ec, k.ec.KID, claimsAt(clock.Now(), "agent-b")), nil)
	expectFetches(t, srv, 2)
	expect(t, a, rsaTok, ErrInvalidCredentials)
}

func TestJWKSFile(t *testing.T) {
	k := keysOnce()
	tests := []struct {
		name    string
		body    []byte
		missing bool
		wantErr bool
	}{
		{name: "good", body: testjwt.JWKS(t, k.rsa)},
		{name: "missing", missing: true, wantErr: true},
		{name: "not JSON", body: []byte("nope"), wantErr: true},
		{name: "no usable keys", body: []byte(`{"keys":[{"kty":"oct","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := jwtConfig()
			cfg.JWT.JWKSFile = writeFile(t, "jwks.json", tt.body)
			if tt.missing {
				cfg.JWT.JWKSFile += ".missing"
			}
			_, err := New(cfg, Options{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("New err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// A token verified before its key left the JWKS stops working within
// jwks_refresh, not jwks_refresh + jwks_stale_grace: the cached verification
// is redone once the key set is due for a refresh.
func TestJWKSRemovedKeyStopsCachedToken(t *testing.T) {
	k := keysOnce()
	srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa, k.rsaOther))
	clock := newClock()
	a := urlJWTAuthenticator(t, srv, clock)
	tok := testjwt.Sign(t, k.rsaOther, k.rsaOther.KID, claimsAt(t0, "agent-a"))
	expect(t, a, tok, nil)

	srv.setBody(testjwt.JWKS(t, k.rsa)) // the issuer revokes rsaOther
	clock.Advance(time.Minute)
	expect(t, a, tok, nil) // still within jwks_refresh: cached
	clock.Advance(defaultJWKSRefresh)
	expect(t, a, tok, ErrInvalidCredentials)
}

// TestJWKSEmptySetWithdrawsKeys: a valid JWKS with no usable key is the
// issuer withdrawing its keys, not a failed download. Tokens stop verifying
// as soon as Warden has read it (at the next refresh, or at once when a
// token names a key it lacks), not jwks_refresh + jwks_stale_grace later,
// and the log says why. Before, {"keys":[]} was a failed refresh: the old
// key kept verifying (the "after refresh" rows passed with a nil error).
func TestJWKSEmptySetWithdrawsKeys(t *testing.T) {
	k := keysOnce()
	tests := []struct {
		name  string
		empty string
		// forced: a token naming an unknown kid triggers the refresh
		// within jwks_refresh, instead of the refresh falling due.
		forced bool
	}{
		{name: "no keys, after refresh", empty: `{"keys":[]}`},
		{name: "no keys, unknown kid", empty: `{"keys":[]}`, forced: true},
		{name: "only unusable keys", empty: `{"keys":[{"kty":"oct","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, testjwt.JWKS(t, k.rsa))
			clock := newClock()
			var logs bytes.Buffer
			cfg := jwtConfig()
			cfg.JWT.JWKSURL = srv.URL + "/.well-known/jwks.json"
			a, err := New(cfg, Options{Now: clock.Now, HTTPClient: srv.Client(),
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatal(err)
			}
			cached := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
			expect(t, a, cached, nil)

			srv.setBody([]byte(tt.empty))
			if tt.forced {
				clock.Advance(minRefreshInterval)
				expect(t, a, testjwt.Sign(t, k.rsaOther, k.rsaOther.KID, claimsAt(clock.Now(), "agent-b")), ErrInvalidCredentials)
			} else {
				clock.Advance(defaultJWKSRefresh + time.Second)
			}
			expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-c")), ErrInvalidCredentials)
			expect(t, a, cached, ErrInvalidCredentials)
			expectFetches(t, srv, 2)
			if !strings.Contains(logs.String(), "jwks has no usable signature keys") {
				t.Fatalf("no log reason; logs:\n%s", logs.String())
			}

			// The issuer publishes keys again: they verify from the next
			// refresh on.
			srv.setBody(testjwt.JWKS(t, k.rsa))
			clock.Advance(defaultJWKSRefresh + time.Second)
			expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(clock.Now(), "agent-d")), nil)
		})
	}
}

// TestJWKSFileEmptiedWithdrawsKeys: the same for jwks_file, read again every
// jwks_refresh.
func TestJWKSFileEmptiedWithdrawsKeys(t *testing.T) {
	k := keysOnce()
	cfg := jwtConfig()
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", testjwt.JWKS(t, k.rsa))
	clock := newClock()
	a := mustNew(t, cfg, clock)
	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a"))
	expect(t, a, tok, nil)
	if err := os.WriteFile(cfg.JWT.JWKSFile, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.Advance(defaultJWKSRefresh + time.Second)
	expect(t, a, tok, ErrInvalidCredentials)
}

// roundTrip is an http.RoundTripper from a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestJWKSURLRedirect: a JWKS fetch follows a redirect only to where
// jwt.jwks_url itself may point (https, or plain http to loopback). Before,
// https://issuer redirecting to http://elsewhere was followed, so anyone on
// the path to elsewhere served the keys: the first row's token verified.
func TestJWKSURLRedirect(t *testing.T) {
	k := keysOnce()
	jwks := testjwt.JWKS(t, k.rsa)
	const start = "https://issuer.test/.well-known/jwks.json"
	for _, tt := range []struct {
		name, to string
		want     error
	}{
		{"to plain http", "http://keys.example/jwks.json", ErrKeysUnavailable},
		{"to plain http, relative", "http:/jwks.json", ErrKeysUnavailable},
		{"to https", "https://keys.example/jwks.json", nil},
		{"to plain http on loopback", "http://127.0.0.1:8080/jwks.json", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				asked = append(asked, r.URL.String())
				mu.Unlock()
				if r.URL.String() == start {
					return &http.Response{StatusCode: http.StatusFound, Header: http.Header{"Location": {tt.to}}, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(jwks)), Request: r}, nil
			})}
			cfg := jwtConfig()
			cfg.JWT.JWKSURL = start
			a, err := New(cfg, Options{Now: newClock().Now, HTTPClient: client, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a")), tt.want)
			mu.Lock()
			defer mu.Unlock()
			if tt.want != nil && len(asked) != 1 {
				t.Fatalf("asked %q: the plain-http URL was fetched", asked)
			}
		})
	}
}

// TestJWKSURLFetchBounds: what the fetch of a JWKS URL refuses (a guard:
// each held before). The default client verifies the server's certificate
// (the control row, with a client trusting the test CA, verifies); a
// document over 1 MiB is refused.
func TestJWKSURLFetchBounds(t *testing.T) {
	k := keysOnce()
	jwks := testjwt.JWKS(t, k.rsa)
	// The key that verifies, padded past the bound.
	big := append(append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), maxJWKSBytes)...), append([]byte(`",`), jwks[1:]...)...)
	tls := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) }))
	tls.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	tls.StartTLS()
	t.Cleanup(tls.Close)
	large := newJWKSServer(t, big)
	for _, tt := range []struct {
		name   string
		url    string
		client *http.Client
		want   error
	}{
		{"untrusted certificate", tls.URL, nil, ErrKeysUnavailable},
		{"trusted certificate", tls.URL, tls.Client(), nil},
		{"over 1 MiB", large.URL, nil, ErrKeysUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := jwtConfig()
			cfg.JWT.JWKSURL = tt.url + "/.well-known/jwks.json"
			a, err := New(cfg, Options{Now: newClock().Now, HTTPClient: tt.client, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, a, testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-a")), tt.want)
		})
	}
}

// TestJWKSURLFetchTimeout: a JWKS server that never answers fails the
// fetch at the source's timeout, whatever the client's.
func TestJWKSURLFetchTimeout(t *testing.T) {
	srv := newJWKSServer(t, []byte(`{"keys":[]}`))
	srv.holding.Store(true)
	t.Cleanup(func() { close(srv.release) })
	s := &keySource{fetch: urlFetcher(&http.Client{}, srv.URL), where: srv.URL, ttl: time.Minute,
		timeout: 100 * time.Millisecond, now: time.Now, log: discardLogger()}
	start := time.Now()
	_, err := s.get(context.Background(), false)
	if !errors.Is(err, ErrKeysUnavailable) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err = %v, want keys unavailable after the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the fetch took %v", d)
	}
}
