package authn

import "errors"

// Cause is why authentication failed, from a closed set: a metric label and
// a log field for the operator. It is never sent to the client, which gets
// the generic challenge (Reason) so that a caller cannot probe the
// verifier's configuration one claim at a time.
type Cause string

// The causes CauseOf returns.
const (
	// CauseMissing: no credential any configured method accepts was present.
	CauseMissing Cause = "missing"
	// CauseAmbiguous: more than one credential, or a credential header that is not one bearer value.
	CauseAmbiguous Cause = "ambiguous"
	// CauseMalformed: a bearer value that is not a compact JWS, or whose header or claims do not parse.
	CauseMalformed Cause = "malformed"
	// CauseAlgorithm: the token's alg is not among the allowed algorithms.
	CauseAlgorithm Cause = "algorithm"
	// CauseUnknownKeyID: no key of the key set has the token's kid (and fits its alg), even after a refresh.
	CauseUnknownKeyID Cause = "unknown_key_id"
	// CauseSignature: a key fits but the signature does not verify.
	CauseSignature Cause = "signature"
	// CauseExpired: the token's exp (plus leeway), or the client certificate's NotAfter, has passed.
	CauseExpired Cause = "expired"
	// CauseNotYetValid: the token's nbf or iat is in the future (beyond the leeway).
	CauseNotYetValid Cause = "not_yet_valid"
	// CauseAudience: the token's aud names none of the configured audiences.
	CauseAudience Cause = "audience"
	// CauseIssuer: the token's iss is not the configured issuer.
	CauseIssuer Cause = "issuer"
	// CauseType: the token's typ header is absent or not among jwt.types (a token the issuer signed for another purpose).
	CauseType Cause = "type"
	// CauseClaims: a required claim (exp, the principal claim) is missing or of the wrong type.
	CauseClaims Cause = "claims"
	// CauseUnknownToken: a static token that is not in the token file (never issued, or revoked by removing it).
	CauseUnknownToken Cause = "unknown_token"
	// CauseCertificate: a verified client certificate that names no acceptable identity.
	CauseCertificate Cause = "certificate"
	// CauseKeysUnavailable: the verification keys could not be obtained, so nothing could be decided.
	CauseKeysUnavailable Cause = "keys_unavailable"
	// CauseOther: a failure outside the set (kept so that the label set stays closed).
	CauseOther Cause = "other"
)

// Error is an authentication failure: one of the package's sentinels (class,
// what adapters map onto the wire with errors.Is) and its cause, for the
// operator. Its message is the one the package always produced.
type Error struct {
	// Cause is why the credential was refused.
	Cause Cause
	where string
	class error
	what  string
}

func (e *Error) Error() string {
	s := e.where + ": " + e.class.Error()
	if e.what != "" {
		s += ": " + e.what
	}
	return s
}

// Unwrap returns the sentinel (ErrInvalidCredentials, ErrExpired, ...).
func (e *Error) Unwrap() error { return e.class }

// fail builds an *Error: where is the method ("verify jwt", "mtls", ...),
// class the sentinel, what the detail for logs.
func fail(where string, class error, cause Cause, what string) *Error {
	return &Error{Cause: cause, where: where, class: class, what: what}
}

// CauseOf returns why err refused a credential: the Cause of the *Error it
// wraps, else the cause its sentinel implies; "" for nil.
func CauseOf(err error) Cause {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Cause
	case errors.Is(err, ErrKeysUnavailable):
		return CauseKeysUnavailable
	case errors.Is(err, ErrAmbiguousCredentials):
		return CauseAmbiguous
	case errors.Is(err, ErrExpired):
		return CauseExpired
	case errors.Is(err, ErrNoCredentials):
		return CauseMissing
	default:
		return CauseOther
	}
}
