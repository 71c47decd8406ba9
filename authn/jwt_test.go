package authn

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentwarden/warden/internal/testjwt"
)

// fileJWTAuthenticator returns a JWT authenticator reading a JWKS file with
// the RSA, EC and Ed25519 test keys.
func fileJWTAuthenticator(t *testing.T, clock *fakeClock, edit func(*Config)) *Authenticator {
	t.Helper()
	k := keysOnce()
	cfg := jwtConfig()
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", testjwt.JWKS(t, k.rsa, k.ec, k.ed))
	if edit != nil {
		edit(&cfg)
	}
	return mustNew(t, cfg, clock)
}

// with returns a copy of claims with the given changes; a nil value deletes.
func with(claims map[string]any, kv ...any) map[string]any {
	out := maps.Clone(claims)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func TestAuthenticateJWT(t *testing.T) {
	k := keysOnce()
	good := claimsAt(t0, "agent-a")
	enc := base64.RawURLEncoding

	rsaPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(k.rsa.Pub)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	hsWithRSAPub := testjwt.Sign(t, testjwt.HS256(rsaPEM), k.rsa.KID, good)
	embeddedJWK := func() string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.rsaOther.Priv},
			(&jose.SignerOptions{EmbedJWK: true}).WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := json.Marshal(good)
		obj, err := s.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := obj.CompactSerialize()
		return tok
	}()
	valid := testjwt.Sign(t, k.rsa, k.rsa.KID, good)
	parts := strings.Split(valid, ".")
	tamperedPayload := func() string {
		c, _ := json.Marshal(with(good, "sub", "agent-b"))
		return parts[0] + "." + enc.EncodeToString(c) + "." + parts[2]
	}()
	tamperedSig := func() string {
		sig, _ := enc.DecodeString(parts[2])
		sig[10] ^= 0x01
		return parts[0] + "." + parts[1] + "." + enc.EncodeToString(sig)
	}()
	rs384 := k.rsa
	rs384.Alg = jose.RS384
	ps256 := k.rsa
	ps256.Alg = jose.PS256

	tests := []struct {
		name    string
		token   string
		wantErr error
		wantID  string
	}{
		{name: "valid RS256", token: valid, wantID: "agent-a"},
		{name: "valid ES256", token: testjwt.Sign(t, k.ec, k.ec.KID, good), wantID: "agent-a"},
		{name: "valid EdDSA", token: testjwt.Sign(t, k.ed, k.ed.KID, good), wantID: "agent-a"},
		{name: "valid without kid", token: testjwt.Sign(t, k.ec, "", good), wantID: "agent-a"},
		{name: "valid audience list", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "aud", []any{"other", testAudience})), wantID: "agent-a"},
		{name: "expired within leeway", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "exp", t0.Add(-10*time.Second).Unix())), wantID: "agent-a"},
		{name: "expired", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "iat", t0.Add(-2*time.Hour).Unix(), "nbf", t0.Add(-2*time.Hour).Unix(), "exp", t0.Add(-time.Hour).Unix())), wantErr: ErrExpired},
		{name: "not yet valid", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "nbf", t0.Add(time.Hour).Unix(), "exp", t0.Add(2*time.Hour).Unix())), wantErr: ErrInvalidCredentials},
		{name: "issued in the future", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "nbf", nil, "iat", t0.Add(time.Hour).Unix())), wantErr: ErrInvalidCredentials},
		{name: "wrong audience", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "aud", "someone-else")), wantErr: ErrInvalidCredentials},
		{name: "no audience", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "aud", nil)), wantErr: ErrInvalidCredentials},
		{name: "wrong issuer", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "iss", "https://evil.test")), wantErr: ErrInvalidCredentials},
		{name: "unknown kid", token: testjwt.Sign(t, k.rsaOther, k.rsaOther.KID, good), wantErr: ErrInvalidCredentials},
		{name: "known kid, other key", token: testjwt.Sign(t, k.rsaOther, k.rsa.KID, good), wantErr: ErrInvalidCredentials},
		{name: "no kid, unknown key", token: testjwt.Sign(t, k.rsaOther, "", good), wantErr: ErrInvalidCredentials},
		{name: "embedded jwk is ignored", token: embeddedJWK, wantErr: ErrInvalidCredentials},
		{name: "kid of another key type", token: testjwt.Sign(t, k.ec, k.rsa.KID, good), wantErr: ErrInvalidCredentials},
		{name: "alg not in allow-list RS384", token: testjwt.Sign(t, rs384, rs384.KID, good), wantErr: ErrInvalidCredentials},
		{name: "alg not in allow-list PS256", token: testjwt.Sign(t, ps256, ps256.KID, good), wantErr: ErrInvalidCredentials},
		{name: "alg none empty signature", token: testjwt.Raw(t, map[string]any{"alg": "none", "typ": "JWT"}, good, nil), wantErr: ErrInvalidCredentials},
		{name: "alg none with signature", token: testjwt.Raw(t, map[string]any{"alg": "none", "kid": k.rsa.KID}, good, []byte("sig")), wantErr: ErrInvalidCredentials},
		{name: "alg None", token: testjwt.Raw(t, map[string]any{"alg": "None"}, good, []byte("sig")), wantErr: ErrInvalidCredentials},
		{name: "HS256 with the RSA public key as secret", token: hsWithRSAPub, wantErr: ErrInvalidCredentials},
		{name: "tampered payload", token: tamperedPayload, wantErr: ErrInvalidCredentials},
		{name: "tampered signature", token: tamperedSig, wantErr: ErrInvalidCredentials},
		{name: "signature of another token", token: parts[0] + "." + strings.Split(testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", "x")), ".")[1] + "." + parts[2], wantErr: ErrInvalidCredentials},
		{name: "missing sub", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", nil)), wantErr: ErrInvalidCredentials},
		{name: "empty sub", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", "")), wantErr: ErrInvalidCredentials},
		{name: "sub not a string", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", 42)), wantErr: ErrInvalidCredentials},
		{name: "sub with a line break (a header the principal is named in)", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", "alice\r\nx-admin: 1")), wantErr: ErrInvalidCredentials},
		{name: "sub with a NUL", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", "alice\x00")), wantErr: ErrInvalidCredentials},
		{name: "sub with a tab and non-ASCII", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "sub", "ålice\tb")), wantID: "ålice\tb"},
		{name: "missing exp", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "exp", nil)), wantErr: ErrInvalidCredentials},
		{name: "exp as string", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "exp", "2099-01-01")), wantErr: ErrInvalidCredentials},
		{name: "aud as number", token: testjwt.Sign(t, k.rsa, k.rsa.KID, with(good, "aud", 7)), wantErr: ErrInvalidCredentials},
		{name: "garbage", token: "not a token", wantErr: ErrInvalidCredentials},
		{name: "three dots of garbage", token: "a.b.c", wantErr: ErrInvalidCredentials},
		{name: "empty segments", token: "..", wantErr: ErrInvalidCredentials},
		{name: "four segments", token: valid + ".x", wantErr: ErrInvalidCredentials},
		{name: "JWE shape", token: "eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d", wantErr: ErrInvalidCredentials},
		{name: "line break inside", token: valid[:20] + "\n" + valid[20:], wantErr: ErrInvalidCredentials},
		{name: "JSON serialization", token: `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, wantErr: ErrInvalidCredentials},
		{name: "payload not an object", token: rawTokenWithPayload(parts[0], "[1,2]", parts[2]), wantErr: ErrInvalidCredentials},
		{name: "empty bearer", token: "", wantErr: ErrNoCredentials},
	}
	clock := newClock()
	a := fileJWTAuthenticator(t, clock, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), Credentials{Bearer: tt.token})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if p.ID != "" {
					t.Fatalf("principal %+v returned with an error", p)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if p.ID != tt.wantID || p.Method != "jwt" {
				t.Fatalf("principal = %+v, want ID %q method jwt", p, tt.wantID)
			}
			if _, ok := p.Claims["macp_scopes"].(map[string]any); !ok {
				t.Fatalf("claims lack macp_scopes: %v", p.Claims)
			}
			if p.Expiry.IsZero() {
				t.Fatal("expiry not set")
			}
		})
	}
}

func rawTokenWithPayload(header, payload, sig string) string {
	return header + "." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + sig
}

func TestAuthenticateJWTPrincipalClaim(t *testing.T) {
	k := keysOnce()
	clock := newClock()
	a := fileJWTAuthenticator(t, clock, func(c *Config) { c.JWT.PrincipalClaim = "agent_id" })
	tests := []struct {
		name    string
		claims  map[string]any
		wantID  string
		wantErr error
	}{
		{name: "claim present", claims: with(claimsAt(t0, "user"), "agent_id", "planner"), wantID: "planner"},
		{name: "claim missing", claims: claimsAt(t0, "user"), wantErr: ErrInvalidCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), Credentials{Bearer: testjwt.Sign(t, k.ec, k.ec.KID, tt.claims)})
			if !errors.Is(err, tt.wantErr) || p.ID != tt.wantID {
				t.Fatalf("got %+v, %v; want %q, %v", p, err, tt.wantID, tt.wantErr)
			}
		})
	}
}

func TestAuthenticateJWTHMAC(t *testing.T) {
	k := keysOnce()
	secret := []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	clock := newClock()
	a := fileJWTAuthenticator(t, clock, func(c *Config) {
		c.JWT.Algorithms = []string{"RS256", "HS256"}
		c.JWT.HMACSecretFile = writeFile(t, "secret", append(secret, '\n'))
	})
	hs := func(key []byte, kid string) string {
		return testjwt.Sign(t, signingKey{Alg: jose.HS256, Priv: key}, kid, claimsAt(t0, "agent-h"))
	}
	der, err := x509.MarshalPKIXPublicKey(k.rsa.Pub)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	tests := []struct {
		name    string
		token   string
		wantErr error
	}{
		{name: "HS256 with the secret", token: hs(secret, "")},
		{name: "HS256 with the RSA public key PEM", token: hs(rsaPEM, k.rsa.KID), wantErr: ErrInvalidCredentials},
		{name: "HS256 with the RSA public key DER", token: hs(der, k.rsa.KID), wantErr: ErrInvalidCredentials},
		{name: "HS256 with another secret", token: hs([]byte(strings.Repeat("x", 32)), ""), wantErr: ErrInvalidCredentials},
		{name: "RS256 still works", token: testjwt.Sign(t, k.rsa, k.rsa.KID, claimsAt(t0, "agent-h"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(context.Background(), Credentials{Bearer: tt.token})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && p.ID != "agent-h" {
				t.Fatalf("principal = %+v", p)
			}
		})
	}
}

func TestJWTCacheExpiry(t *testing.T) {
	k := keysOnce()
	clock := newClock()
	a := fileJWTAuthenticator(t, clock, nil)
	tok := testjwt.Sign(t, k.rsa, k.rsa.KID, with(claimsAt(t0, "agent-a"), "exp", t0.Add(10*time.Minute).Unix()))
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, Credentials{Bearer: tok}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10*time.Minute + 20*time.Second) // past exp, within leeway
	if _, err := a.Authenticate(ctx, Credentials{Bearer: tok}); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	clock.Advance(11 * time.Second) // past exp + leeway
	_, err := a.Authenticate(ctx, Credentials{Bearer: tok})
	if !errors.Is(err, ErrExpired) || Reason(err) != "expired" {
		t.Fatalf("err = %v, want expired", err)
	}
}

func TestParseJWKSSkipsUnusableKeys(t *testing.T) {
	k := keysOnce()
	good := jose.JSONWebKey{Key: k.ec.Pub, KeyID: "ec", Use: "sig"}
	enc := jose.JSONWebKey{Key: k.rsa.Pub, KeyID: "enc", Use: "enc"}
	oct := jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "oct"}
	priv := jose.JSONWebKey{Key: k.ed.Priv, KeyID: "ed-private"}
	raw := func(keys ...any) []byte {
		b, err := json.Marshal(map[string]any{"keys": keys})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name     string
		doc      []byte
		wantKids []string
		wantErr  bool
	}{
		{name: "mixed", doc: raw(good, enc, oct, priv, map[string]any{"kty": "weird"}), wantKids: []string{"ec", "ed-private"}},
		{name: "only symmetric", doc: raw(oct)},
		{name: "empty", doc: []byte(`{"keys":[]}`)},
		{name: "no keys member", doc: []byte(`{}`), wantErr: true},
		{name: "null keys", doc: []byte(`{"keys":null}`), wantErr: true},
		{name: "not JSON", doc: []byte(`<html>`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := parseJWKS(tt.doc, discardLogger())
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			var kids []string
			for _, k := range set.keys {
				kids = append(kids, k.kid)
			}
			if strings.Join(kids, ",") != strings.Join(tt.wantKids, ",") {
				t.Fatalf("kids = %v, want %v", kids, tt.wantKids)
			}
		})
	}
}

func TestCanonicalB64URL(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", true},
		{"QQ", true},  // "A"
		{"QR", false}, // non-zero padding bits
		{"QUI", true}, // "AB"
		{"QUJ", false},
		{"QUJD", true},
		{"Q", false},
		{"QU+D", false},
		{"QUJD=", false},
		{"QU\nJD", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := canonicalB64URL(tt.in); got != tt.want {
				t.Fatalf("canonicalB64URL(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
