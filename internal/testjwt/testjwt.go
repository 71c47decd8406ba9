// Package testjwt builds JWTs and JWKS documents for tests: signing keys
// (ES256, RS256, EdDSA, HS256), tokens signed with them under any kid,
// tokens of any header and signature, and the JWKS of their public halves.
// Tests only: no package but a test may import it.
package testjwt

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a signing key: the kid a JWKS names it by, the algorithm it signs
// under, its private half and its public half (nil for an HMAC secret).
type Key struct {
	KID  string
	Alg  jose.SignatureAlgorithm
	Priv any
	Pub  any
}

// ES256 returns a new P-256 key named kid.
func ES256(kid string) Key {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return Key{KID: kid, Alg: jose.ES256, Priv: k, Pub: &k.PublicKey}
}

// RS256 returns a new 2048-bit RSA key named kid (slow: generate once).
func RS256(kid string) Key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return Key{KID: kid, Alg: jose.RS256, Priv: k, Pub: &k.PublicKey}
}

// EdDSA returns a new Ed25519 key named kid.
func EdDSA(kid string) Key {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return Key{KID: kid, Alg: jose.EdDSA, Priv: priv, Pub: pub}
}

// HS256 is an HMAC key of secret.
func HS256(secret []byte) Key { return Key{Alg: jose.HS256, Priv: secret} }

// JWKS is the JWKS document of keys' public halves ({"keys":[]} for none).
func JWKS(t testing.TB, keys ...Key) []byte {
	t.Helper()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Pub, KeyID: k.KID, Algorithm: string(k.Alg), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sign is a compact JWS (typ JWT) of claims signed with k, naming kid in
// its header unless kid is "" (kid may name another key than k's).
func Sign(t testing.TB, k Key, kid string, claims map[string]any) string {
	t.Helper()
	return SignTyped(t, k, kid, "JWT", claims)
}

// SignTyped is Sign with the header's typ typ (a string, or any other JSON
// value to sign what no issuer should); nil leaves typ out.
func SignTyped(t testing.TB, k Key, kid string, typ any, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != nil {
		opts = opts.WithHeader(jose.HeaderType, typ)
	}
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: k.Priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Raw assembles a token of header and claims with the signature sig, as
// given: what no signer makes.
func Raw(t testing.TB, header, claims map[string]any, sig []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + enc.EncodeToString(sig)
}
