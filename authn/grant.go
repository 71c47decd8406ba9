package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"time"
)

// Grant is what a credential proved when it set something that outlives the
// request (an A2A push config), kept without the credential itself: whose it
// was, how it was proven, a fingerprint of the credential, what vouched for
// it and when it stops being valid. Holds answers, later, whether it still
// holds.
type Grant struct {
	Principal string `json:"p"`
	Method    string `json:"m"`
	// Fingerprint is the SHA-256 of the static token, or of the client
	// certificate's DER (hex); "" for JWT and dev.
	Fingerprint string `json:"f,omitempty"`
	// Anchor is Principal.Anchor: the JWT's key (with the issuer,
	// principal claim and audiences checked), the client certificate's CAs
	// (every one a verified chain ended at).
	Anchor string `json:"a,omitempty"`
	// Issued is when the grant was made; Expiry when the credential stops
	// being valid (zero: never). Unix seconds.
	Issued int64 `json:"i"`
	Expiry int64 `json:"e,omitempty"`
}

// GrantOf is the grant p, proven by c, makes at now.
func GrantOf(p Principal, c Credentials, now time.Time) Grant {
	g := Grant{Principal: p.ID, Method: p.Method, Anchor: p.Anchor, Issued: now.Unix()}
	if !p.Expiry.IsZero() {
		g.Expiry = p.Expiry.Unix()
	}
	switch Method(p.Method) {
	case MethodStatic:
		h := sha256.Sum256([]byte(c.Bearer))
		g.Fingerprint = hex.EncodeToString(h[:])
	case MethodMTLS:
		if len(c.PeerCerts) > 0 && c.PeerCerts[0] != nil {
			h := sha256.Sum256(c.PeerCerts[0].Raw)
			g.Fingerprint = hex.EncodeToString(h[:])
		}
	}
	return g
}

// Holds reports whether the credential behind g still holds at now under
// the configuration a holds now (a reload builds a new Authenticator): the
// method is still configured, the credential has not expired (a JWT's exp,
// a certificate's NotAfter, as sealed), a static token is still configured
// for the same principal, a JWT's key is still the HMAC secret or in the
// JWKS (the cached set; fetched, within ctx, only when none was since the
// configuration was loaded) under the same issuer and
// audiences, and one of the CAs a client certificate's verified chains
// ended at is still in its trust domain's bundle (mtls.trust_domain_ca_files)
// and among cas, the CAs the door's TLS stack verifies client certificates
// with now (client_ca_file as last reloaded; nil: not known here, Envoy's).
// The error wraps ErrExpired, ErrInvalidCredentials or, when no JWKS could
// be fetched to decide with, ErrKeysUnavailable.
func (a *Authenticator) Holds(ctx context.Context, g Grant, now time.Time, cas ClientCAs) error {
	if g.Principal == "" {
		return fail("grant", ErrInvalidCredentials, CauseMissing, "no principal")
	}
	if g.Expiry != 0 && now.Unix() >= g.Expiry {
		return fail("grant", ErrExpired, CauseExpired, "the credential expired "+time.Unix(g.Expiry, 0).UTC().Format(time.RFC3339))
	}
	h, ok := a.holds[Method(g.Method)]
	if !ok {
		return fail("grant", ErrInvalidCredentials, CauseOther, fmt.Sprintf("authentication method %q is no longer configured", g.Method))
	}
	return h(ctx, g, cas)
}

// ClientCAs are the CAs a door's TLS stack verifies client certificates
// with, by the hex SHA-256 of each one's DER (ReadCAs); nil when Warden
// does not verify them there.
type ClientCAs map[string]bool

// holdsAlways is Holds for dev, whose credential is the principal itself:
// it holds while configured.
func holdsAlways(context.Context, Grant, ClientCAs) error { return nil }

// holds reports whether a static token with g's fingerprint is still
// configured for g's principal.
func (s *staticTokens) holds(_ context.Context, g Grant, _ ClientCAs) error {
	var h [sha256.Size]byte
	b, err := hex.DecodeString(g.Fingerprint)
	if err != nil || len(b) != len(h) {
		return fail("static", ErrInvalidCredentials, CauseMalformed, "no static token fingerprint")
	}
	copy(h[:], b)
	t, ok := s.byHash[h]
	if !ok || subtle.ConstantTimeCompare([]byte(t.p.ID), []byte(g.Principal)) != 1 {
		return fail("static", ErrInvalidCredentials, CauseOther, "the static token is no longer configured for "+g.Principal)
	}
	return nil
}
