package authn

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/internal/testjwt"
)

func TestDevMode(t *testing.T) {
	t.Run("rejected without insecure", func(t *testing.T) {
		_, err := New(Config{Mode: Methods{MethodDev}}, Options{})
		if err == nil || !strings.Contains(err.Error(), "insecure: must be true") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("rejected with other methods", func(t *testing.T) {
		_, err := New(Config{Mode: Methods{MethodMTLS, MethodDev}, Insecure: true}, Options{})
		if err == nil || !strings.Contains(err.Error(), "cannot be combined") {
			t.Fatalf("err = %v", err)
		}
	})

	var logs bytes.Buffer
	a, err := New(Config{Mode: Methods{MethodDev}, Insecure: true}, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "DEV MODE") {
		t.Fatalf("no loud warning logged: %s", logs.String())
	}
	tests := []struct {
		name    string
		bearer  string
		wantErr error
	}{
		{name: "valid", bearer: "planner"},
		{name: "empty", bearer: "", wantErr: ErrNoCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), Credentials{Bearer: tt.bearer})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (p.ID != tt.bearer || p.Method != "dev" || p.Claims != nil) {
				t.Fatalf("principal = %+v", p)
			}
		})
	}
}

func TestMultipleMethods(t *testing.T) {
	k := keysOnce()
	clock := newClock()
	cfg := jwtConfig()
	cfg.Mode = Methods{MethodMTLS, MethodJWT, MethodStatic}
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", testjwt.JWKS(t, k.rsa))
	cfg.Static.TokensFile = writeFile(t, "tokens.json", []byte(tokensJSON))
	a := mustNew(t, cfg, clock)

	spiffe := cert(t, "", t0.Add(time.Hour), "spiffe://example.org/agent-m")
	noID := cert(t, "cn", t0.Add(time.Hour))
	jwtTok := testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-j"))
	expired := testjwt.Sign(t, k.rsa, k.rsa.KID, with(claimsAt(t0, "agent-j"), "exp", t0.Add(-time.Hour).Unix()))
	tests := []struct {
		name       string
		c          Credentials
		wantID     string
		wantMethod string
		wantErr    error
	}{
		{name: "mtls first", c: Credentials{Bearer: jwtTok, PeerCerts: []*x509.Certificate{spiffe}}, wantID: "spiffe://example.org/agent-m", wantMethod: "mtls"},
		{name: "falls through to jwt", c: Credentials{Bearer: jwtTok, PeerCerts: []*x509.Certificate{noID}}, wantID: "agent-j", wantMethod: "jwt"},
		{name: "falls through to static", c: Credentials{Bearer: "tok-b"}, wantID: "agent-b", wantMethod: "static"},
		{name: "nothing", c: Credentials{}, wantErr: ErrNoCredentials},
		{name: "expired jwt reported as expired", c: Credentials{Bearer: expired}, wantErr: ErrExpired},
		{name: "unknown token reported as invalid", c: Credentials{Bearer: "nope"}, wantErr: ErrInvalidCredentials},
		{name: "bad cert without bearer reported as invalid", c: Credentials{PeerCerts: []*x509.Certificate{noID}}, wantErr: ErrInvalidCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), tt.c)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if p.ID != tt.wantID || (tt.wantErr == nil && p.Method != tt.wantMethod) {
				t.Fatalf("principal = %+v, want %s via %s", p, tt.wantID, tt.wantMethod)
			}
		})
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("verify jwt: %w: x", ErrNoCredentials), "no_credentials"},
		{fmt.Errorf("verify jwt: %w: x", ErrInvalidCredentials), "invalid_credentials"},
		{fmt.Errorf("verify jwt: %w: x", ErrExpired), "expired"},
		{fmt.Errorf("verify jwt: %w: x", ErrKeysUnavailable), "keys_unavailable"},
		{errors.New("boom"), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Reason(tt.err); got != tt.want {
				t.Fatalf("Reason(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	base := func(edit func(*Config)) Config {
		c := jwtConfig()
		c.JWT.JWKSURL = "https://issuer.test/jwks.json"
		if edit != nil {
			edit(&c)
		}
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" means valid
	}{
		{name: "valid jwt", cfg: base(nil)},
		{name: "valid mtls", cfg: Config{Mode: Methods{MethodMTLS}}},
		{name: "no mode", cfg: Config{}, wantErr: "mode: required"},
		{name: "unknown mode", cfg: Config{Mode: Methods{"oauth"}}, wantErr: `mode: unknown method "oauth"`},
		{name: "mode twice", cfg: Config{Mode: Methods{MethodMTLS, MethodMTLS}}, wantErr: "listed twice"},
		{name: "static without file", cfg: Config{Mode: Methods{MethodStatic}}, wantErr: "static.tokens_file: required"},
		{name: "no jwks", cfg: base(func(c *Config) { c.JWT.JWKSURL = "" }), wantErr: "jwt.jwks_url: required"},
		{name: "both jwks", cfg: base(func(c *Config) { c.JWT.JWKSFile = "/x" }), wantErr: "jwt.jwks_file: set together with jwt.jwks_url"},
		{name: "http jwks", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://auth:3200/.well-known/jwks.json" }), wantErr: "jwt.jwks_url: plain http"},
		// insecure is dev mode's switch: it admits no plain-http JWKS
		// elsewhere than loopback, where anyone on the path serves the keys.
		{name: "http jwks insecure", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://auth:3200/jwks"; c.Insecure = true }), wantErr: "jwt.jwks_url: plain http"},
		{name: "http jwks says the fix", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://10.0.0.7/jwks"; c.Insecure = true }), wantErr: "use https, or jwt.jwks_file"},
		{name: "http jwks loopback", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://127.0.0.1:3200/jwks" })},
		{name: "http jwks loopback 127/8", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://127.0.0.2:3200/jwks" })},
		{name: "http jwks loopback ipv6", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://[::1]:3200/jwks" })},
		{name: "http jwks localhost", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://localhost:3200/jwks" })},
		{name: "http jwks localhost lookalike", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://localhost.attacker.example/jwks"; c.Insecure = true }), wantErr: "jwt.jwks_url: plain http"},
		{name: "http jwks loopback lookalike", cfg: base(func(c *Config) { c.JWT.JWKSURL = "http://127.0.0.1.nip.io/jwks" }), wantErr: "jwt.jwks_url: plain http"},
		{name: "ftp jwks", cfg: base(func(c *Config) { c.JWT.JWKSURL = "ftp://x/jwks" }), wantErr: "jwt.jwks_url: scheme"},
		{name: "no issuer", cfg: base(func(c *Config) { c.JWT.Issuer = "" }), wantErr: "jwt.issuer: required"},
		{name: "no audience", cfg: base(func(c *Config) { c.JWT.Audience = nil }), wantErr: "jwt.audience: required"},
		{name: "alg none", cfg: base(func(c *Config) { c.JWT.Algorithms = []string{"RS256", "none"} }), wantErr: `jwt.algorithms: "none" is never allowed`},
		{name: "alg unknown", cfg: base(func(c *Config) { c.JWT.Algorithms = []string{"RS1"} }), wantErr: `unsupported algorithm "RS1"`},
		{name: "HS256 without secret", cfg: base(func(c *Config) { c.JWT.Algorithms = []string{"HS256"} }), wantErr: "HS256 needs jwt.hmac_secret_file"},
		{name: "secret without HS", cfg: base(func(c *Config) { c.JWT.HMACSecretFile = "/s" }), wantErr: "jwt.hmac_secret_file: set, but no HS"},
		{name: "HS only needs no jwks", cfg: base(func(c *Config) {
			c.JWT.JWKSURL = ""
			c.JWT.Algorithms = []string{"HS256"}
			c.JWT.HMACSecretFile = "/s"
		})},
		{name: "negative leeway", cfg: base(func(c *Config) { c.JWT.Leeway = -time.Second }), wantErr: "jwt.leeway"},
		{name: "negative cache", cfg: base(func(c *Config) { c.JWT.CacheSize = -1 }), wantErr: "jwt.cache_size"},
		{name: "types", cfg: base(func(c *Config) { c.JWT.Types = []string{"at+jwt", "application/JWT"} })},
		{name: "empty type", cfg: base(func(c *Config) { c.JWT.Types = []string{"at+jwt", ""} }), wantErr: `jwt.types: "" is not a media type`},
		{name: "type with a parameter", cfg: base(func(c *Config) { c.JWT.Types = []string{"at+jwt; v=1"} }), wantErr: "jwt.types"},
		{name: "type of three parts", cfg: base(func(c *Config) { c.JWT.Types = []string{"application/at/jwt"} }), wantErr: "jwt.types"},
		{name: "dev without insecure", cfg: Config{Mode: Methods{MethodDev}}, wantErr: "insecure: must be true"},
		{name: "dev", cfg: Config{Mode: Methods{MethodDev}, Insecure: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults().JWT
	if strings.Join(c.Algorithms, ",") != "RS256,ES256,EdDSA" || c.Leeway != 30*time.Second ||
		c.JWKSRefresh != 5*time.Minute || c.JWKSStaleGrace != time.Hour || c.PrincipalClaim != "sub" || c.CacheSize != 10000 {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestConfigDecode(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		wantMode string
		wantAud  string
		wantErr  bool
	}{
		{name: "strings", doc: `{"mode":"jwt","jwt":{"audience":"a"}}`, wantMode: "jwt", wantAud: "a"},
		{name: "lists", doc: `{"mode":["mtls","jwt"],"jwt":{"audience":["a","b"]}}`, wantMode: "mtls,jwt", wantAud: "a,b"},
		{name: "number", doc: `{"mode":7}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tt.doc))
			dec.DisallowUnknownFields()
			var c Config
			err := dec.Decode(&c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			var modes []string
			for _, m := range c.Mode {
				modes = append(modes, string(m))
			}
			if strings.Join(modes, ",") != tt.wantMode || strings.Join(c.JWT.Audience, ",") != tt.wantAud {
				t.Fatalf("decoded %+v", c)
			}
		})
	}

	// The YAML hook follows the func(any) error convention of the YAML libraries.
	var m Methods
	yamlList := func(v any) error {
		if p, ok := v.(*[]string); ok {
			*p = []string{"static", "jwt"}
			return nil
		}
		return errors.New("not a scalar")
	}
	if err := m.UnmarshalYAML(yamlList); err != nil || len(m) != 2 || m[0] != MethodStatic {
		t.Fatalf("UnmarshalYAML = %v, %v", m, err)
	}
}

func TestNewStartsNoGoroutines(t *testing.T) {
	k := keysOnce()
	before := runtime.NumGoroutine()
	cfg := jwtConfig()
	cfg.JWT.JWKSURL = "https://issuer.test/jwks.json"
	for range 10 {
		if _, err := New(cfg, Options{}); err != nil {
			t.Fatal(err)
		}
		cfg2 := jwtConfig()
		cfg2.JWT.JWKSFile = writeFile(t, "jwks.json", testjwt.JWKS(t, k.rsa))
		if _, err := New(cfg2, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines: %d before, %d after", before, after)
	}
}
