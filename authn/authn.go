// Package authn turns the credentials a transport adapter extracted from a
// request or stream (a bearer token, a verified TLS client chain) into an
// authenticated Principal, or into an error from a small closed set.
//
// Four methods exist: JWT bearer tokens checked against a JWKS, static tokens
// from a file in the MACP runtime's shape, mTLS client certificates (a SPIFFE
// ID becomes the principal) and an explicitly insecure dev mode in which the
// bearer value is the principal. A configuration lists one or more of them;
// they are tried in order and the first that succeeds wins.
//
// The package starts no goroutines: JWKS documents are fetched on the request
// path, at most one fetch at a time, and verified tokens are cached until they
// expire so that the hot path does not pay a signature check per message.
package authn

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// Credentials are what a transport adapter extracted from one request or stream.
type Credentials struct {
	// Bearer is the value after "Bearer " (adapters strip the scheme); "" if absent.
	Bearer string
	// PeerCerts is the verified client chain from TLS, leaf first; nil if none.
	PeerCerts []*x509.Certificate
	// Chains is every chain the TLS stack verified the leaf to, each
	// ending at a CA of its client CA bundle (PeerCerts is the first); nil
	// when not known (a chain Envoy verified).
	Chains [][]*x509.Certificate
}

// Principal is an authenticated identity.
type Principal struct {
	// ID is the identity: the JWT principal claim (sub by default), the static
	// token's sender, the SPIFFE ID or certificate subject, or the dev bearer value.
	ID string
	// Method is how the principal was authenticated: "jwt", "static", "mtls" or "dev".
	Method string
	// Claims holds the JWT claims, or a static token's attributes (allowed_modes,
	// can_start_sessions, ...), and is nil for dev and mtls. It is shared between
	// callers and must be treated as read-only.
	Claims map[string]any
	// Expiry is when the credential stops being valid; zero if it never does.
	Expiry time.Time
	// Anchor is what vouched for the credential, for Holds to ask later
	// whether it still does: for a JWT a digest of the key that verified
	// it and the issuer, principal claim, audiences and types checked; for a
	// client certificate whose trust domain is bound
	// (mtls.trust_domain_ca_files) the hex SHA-256 of the CA certificate
	// its chain ends at; "" otherwise.
	Anchor string
}

// Same reports whether q, the same credential authenticated again (a
// long-lived call's check, after a reload perhaps), grants what p did: the
// same principal with the same claims (a static token's attributes, which a
// reload may change for a token it keeps; a JWT's, read from the same
// token), the claims being what a policy reads of the caller's rights.
func (p Principal) Same(q Principal) bool {
	return p.ID == q.ID && reflect.DeepEqual(p.Claims, q.Claims)
}

// Errors returned by Authenticate wrap exactly one of these sentinels, so that
// adapters can map them onto the wire with errors.Is or Reason.
var (
	// ErrNoCredentials means the request carried no credential that any configured method accepts.
	ErrNoCredentials = errors.New("no credentials")
	// ErrInvalidCredentials means a credential was present but is malformed, badly signed, unknown or fails a check.
	ErrInvalidCredentials = errors.New("invalid credentials")
	// ErrExpired means the credential was valid once and has expired.
	ErrExpired = errors.New("credentials expired")
	// ErrKeysUnavailable means the verification keys could not be obtained, so no decision
	// could be made; the request must be refused (and may be retried).
	ErrKeysUnavailable = errors.New("verification keys unavailable")
)

// Reason returns a stable lower_snake label for err, suitable as a metric label
// or log field: "no_credentials", "invalid_credentials", "expired",
// "keys_unavailable", "" for a nil error and "unknown" for anything else.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrKeysUnavailable):
		return "keys_unavailable"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrInvalidCredentials):
		return "invalid_credentials"
	case errors.Is(err, ErrNoCredentials):
		return "no_credentials"
	default:
		return "unknown"
	}
}

// rank orders errors by how much they tell the caller, so that when several
// methods fail the most useful error is returned.
func rank(err error) int {
	switch {
	case errors.Is(err, ErrKeysUnavailable):
		return 3
	case errors.Is(err, ErrExpired):
		return 2
	case errors.Is(err, ErrInvalidCredentials):
		return 1
	default:
		return 0
	}
}

// Options are the dependencies of an Authenticator.
type Options struct {
	// Logger receives warnings (dev mode, stale keys) and debug lines; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HTTPClient fetches a JWKS URL; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
}

// defaultHTTPTimeout bounds a JWKS fetch when no HTTPClient is injected.
const defaultHTTPTimeout = 10 * time.Second

// method authenticates one kind of credential. It returns an error wrapping
// ErrNoCredentials when the credential it consumes is absent.
type method func(ctx context.Context, c Credentials) (Principal, error)

// Authenticator turns Credentials into a Principal. It is safe for concurrent use.
type Authenticator struct {
	methods []method
	// holds answers Holds, per configured method.
	holds map[Method]func(context.Context, Grant, ClientCAs) error
}

// New builds an Authenticator from cfg, reading the files it names (JWKS file,
// static tokens, HMAC secret). A JWKS URL is fetched lazily, on first use. New
// starts no goroutines.
func New(cfg Config, opts Options) (*Authenticator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("authn config: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: defaultHTTPTimeout}
	}

	a := &Authenticator{holds: map[Method]func(context.Context, Grant, ClientCAs) error{}}
	for _, m := range cfg.Mode {
		switch m {
		case MethodJWT:
			v, err := newJWTVerifier(cfg.JWT, client, now, log)
			if err != nil {
				return nil, err
			}
			a.methods = append(a.methods, v.authenticate)
			a.holds[m] = v.holds
		case MethodStatic:
			s, err := loadStatic(cfg.Static.TokensFile)
			if err != nil {
				return nil, err
			}
			a.methods = append(a.methods, s.authenticate)
			a.holds[m] = s.holds
		case MethodMTLS:
			v, err := newMTLSVerifier(cfg.MTLS, now)
			if err != nil {
				return nil, err
			}
			a.methods = append(a.methods, v.authenticate)
			a.holds[m] = v.holds
		case MethodDev:
			log.Warn("authn: DEV MODE IS ON: any bearer value is accepted as the principal, with no verification; never use this in production",
				"mode", string(MethodDev), "insecure", cfg.Insecure)
			a.methods = append(a.methods, authenticateDev)
			a.holds[m] = holdsAlways
		}
	}
	return a, nil
}

// Authenticate returns the principal the credentials prove, trying the
// configured methods in order; the first success wins. When every method
// fails, the most informative error is returned (keys_unavailable, then
// expired, then invalid_credentials, then no_credentials).
func (a *Authenticator) Authenticate(ctx context.Context, c Credentials) (Principal, error) {
	p, err := a.authenticate(ctx, c)
	if err == nil && !headerSafe(p.ID) {
		return Principal{}, fmt.Errorf("%w: the principal holds a control character or U+FFFD, or begins or ends with a space or tab", ErrInvalidCredentials)
	}
	return p, err
}

// headerSafe reports whether a principal can be named in a header field
// (ext_authz's principal header, the upstream's metadata) as it is, and is
// read back as the same name by every reader: no control character but
// tab, and no space or tab at either end (header readers strip them, RFC
// 9110 §5.5, so "alice " would be decided apart from "alice" by Warden and
// read as "alice" upstream), and no U+FFFD or invalid UTF-8: JSON decoders
// read a lone surrogate escape (a JWT's "x\ud800" and "x\udc00") as U+FFFD,
// so two names an IdP tells apart would be one principal here. Encoding it
// instead would let two principals read alike upstream too.
func headerSafe(id string) bool {
	if id != "" && (isBlank(id[0]) || isBlank(id[len(id)-1])) {
		return false
	}
	if !utf8.ValidString(id) || strings.ContainsRune(id, utf8.RuneError) {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// isBlank reports whether c is what header readers strip around a value.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func (a *Authenticator) authenticate(ctx context.Context, c Credentials) (Principal, error) {
	if len(a.methods) == 1 {
		return a.methods[0](ctx, c)
	}
	var best error
	for _, m := range a.methods {
		p, err := m(ctx, c)
		if err == nil {
			return p, nil
		}
		if best == nil || rank(err) > rank(best) {
			best = err
		}
	}
	return Principal{}, best
}

// errDevNoBearer is returned by dev mode for a request without a bearer token.
var errDevNoBearer = fail("dev", ErrNoCredentials, CauseMissing, "no bearer token")

// authenticateDev accepts any non-empty bearer value as the principal.
func authenticateDev(_ context.Context, c Credentials) (Principal, error) {
	if c.Bearer == "" {
		return Principal{}, errDevNoBearer
	}
	return Principal{ID: c.Bearer, Method: string(MethodDev)}, nil
}
