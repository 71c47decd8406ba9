// Package headername is the one rule on the names of a request's header
// fields, HTTP headers and gRPC metadata alike, that every door of Warden
// applies before credentials (the JSON-RPC gate, MACP's admission, and
// ext_authz through both): a field whose name a server behind Warden could
// read as the caller's identity, or as another method or target than the
// request's, or that CGI and WSGI servers read as another name, is refused,
// never forwarded. A rule on the words of a name, not a list of names: the
// next framework's spelling of the same idea is refused too.
package headername

import (
	"strings"
	"unicode/utf8"
)

// Kind is why a name is refused (None: it is not).
type Kind uint8

const (
	// None: the name is not refused.
	None Kind = iota
	// Underscore: the name holds '_', which CGI and WSGI servers read as
	// '-' (Mcp_Name as Mcp-Name, X_Warden_Principal as X-Warden-Principal):
	// a field Warden decides or owns would reach such a server without
	// Warden having seen it.
	Underscore
	// Identity: a word of the name is one of identityTokens.
	Identity
	// Override: a word of the name is one of overrideTokens.
	Override
)

// Of is the Kind of the header name k (any case; HTTP/2 and gRPC names
// are lower case). The protocol's own fields, which it defines and decides
// (own: a name, or a prefix ending in '-' such as MCP's Mcp-Param-, in
// canonical HTTP spelling), are refused only for a '_'.
func Of(k string, own []string) Kind {
	switch {
	case strings.IndexByte(k, '_') >= 0:
		return Underscore
	case owned(k, own):
		return None
	case asserting(k):
		return Identity
	case hasWord(k, &overrides):
		return Override
	}
	return None
}

// Why is the reason a refusal of the field k of Kind kind gives the client.
func (kind Kind) Why(k string) string {
	switch kind {
	case Underscore:
		return "the " + k + " header is not accepted (a name with '_' reads as its '-' spelling to CGI and WSGI servers)"
	case Identity:
		return "the " + k + " header is not accepted (a server could read it as the caller's identity; Warden names the caller it authenticated)"
	case Override:
		return "the " + k + " header is not accepted (it would name another method or target than the request line's)"
	}
	return ""
}

// overrideTokens are the words that make a header name one some server,
// framework or proxy reads in place of the request line's method or target:
// X-HTTP-Method-Override and X-Method-Override (Express, Rails, Laravel,
// ASP.NET, Hono), X-Original-URL and X-Rewrite-URL (IIS, Symfony,
// Laminas), X-Original-URI (nginx auth_request), X-Forwarded-Uri,
// -Method and -Prefix (Traefik, Spring, Werkzeug's ProxyFix),
// X-Envoy-Original-Path, X-Script-Name (WSGI prefix middleware). Under
// ext_authz a header of the CheckRequest came from the client or a hop
// before Envoy's authorization filter: Envoy's router sets
// X-Envoy-Original-Path after it, on a rewrite of a path Warden decided.
var overrideTokens = []string{"method", "override", "url", "uri", "path", "prefix", "rewrite", "script"}

// overrides and identities are overrideTokens and identityTokens by length.
var overrides, identities = newWordSet(overrideTokens), newWordSet(identityTokens)

// identityTokens are the words that make a header name one a server behind
// another authenticating proxy reads as the caller's identity in place of
// Warden's: X-Forwarded-User, -Email, -Groups, -Preferred-Username
// (oauth2-proxy), X-Auth-Request-User, Remote-User, X-Remote-User,
// X-WEBAUTH-USER (Grafana), X-Goog-Authenticated-User-Email, X-Amzn-Oidc-
// Identity, X-MS-Client-Principal-Name (App Service), Impersonate-User and
// -Group (Kubernetes), X-Tenant-Id, X-User-Roles, a client's own
// X-Warden-Principal, and the agent protocols' own spellings of the sender:
// x-macp-agent-id (which MACP runtimes before 0.13.0 read as the sender in
// dev mode), X-Agent-Id, X-Sender. The client would assert an identity, a
// tenant or a grant Warden never authenticated. User-Agent is not one of
// them.
var identityTokens = []string{"user", "username", "login", "email", "group", "groups", "role", "roles", "scope", "scopes",
	"principal", "identity", "subject", "tenant", "impersonate", "oidc", "jwt", "assertion", "claim", "claims", "agent", "sender"}

// owned reports whether the header name k is one of own (a name, or a
// prefix ending in '-'), in any case.
func owned(k string, own []string) bool {
	for _, o := range own {
		if strings.EqualFold(k, o) || strings.HasSuffix(o, "-") && len(k) > len(o) && strings.EqualFold(k[:len(o)], o) {
			return true
		}
	}
	return false
}

// asserting reports whether the header name k would assert an identity
// (a word of identityTokens; User-Agent is not).
func asserting(k string) bool {
	return !strings.EqualFold(k, "User-Agent") && hasWord(k, &identities)
}

// hasWord reports whether the header name k has one of words as a word,
// split at '-' or '_', in any case.
func hasWord(k string, words *wordSet) bool {
	start := 0
	for i := 0; i <= len(k); i++ {
		if i < len(k) && k[i] != '-' && k[i] != '_' {
			continue
		}
		if isWord(k[start:i], words) {
			return true
		}
		start = i + 1
	}
	return false
}

// wordSet is a list of words, and its words by length in one string: a
// name is read on every request, and an ASCII word of it folds only to a
// word of its length, so it is compared with those alone, which lie side
// by side (the list's strings lie each elsewhere in memory: a request's
// names read every word of both lists for every word of theirs, each a
// cache line or more, where the packed words of one length are one).
type wordSet struct {
	all []string
	// packed holds the words, shortest first; those of n bytes are
	// packed[at[n]:at[n+1]], one after another.
	packed string
	at     [longestWord + 2]uint16
}

// longestWord is the length of the longest word a wordSet holds.
const longestWord = 11

// newWordSet is the wordSet of words: ASCII words of 1 to longestWord
// bytes.
func newWordSet(words []string) wordSet {
	s := wordSet{all: words}
	var b strings.Builder
	for n := 1; n <= longestWord; n++ {
		s.at[n] = uint16(b.Len())
		for _, w := range words {
			if len(w) == n {
				b.WriteString(w)
			}
		}
	}
	s.at[longestWord+1] = uint16(b.Len())
	for _, w := range words {
		if len(w) == 0 || len(w) > longestWord {
			panic("headername: the word " + w + " is empty or longer than longestWord")
		}
	}
	s.packed = b.String()
	return s
}

// isWord reports whether w is one of words in any case (strings.EqualFold).
// An ASCII word is only compared with the words of its length (every
// header name net/http reads is ASCII: each request's names are not folded
// against every word); a word with other bytes (the Kelvin sign K, the long
// s ſ) is folded against them all.
func isWord(w string, words *wordSet) bool {
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			for _, t := range words.all {
				if strings.EqualFold(w, t) {
					return true
				}
			}
			return false
		}
	}
	n := len(w)
	if n == 0 || n > longestWord {
		return false
	}
	for i, end := int(words.at[n]), int(words.at[n+1]); i < end; i += n {
		if strings.EqualFold(w, words.packed[i:i+n]) {
			return true
		}
	}
	return false
}
