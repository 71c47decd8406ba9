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
//
// One pass over k: every request's every name is read here, and almost
// none is refused, so its words are each looked up once in both lists
// (words), and own and User-Agent are compared only for a name that has
// a listed word.
func Of(k string, own []string) Kind {
	identity, override := false, false // k has a listed word of the kind
	var lo, hi uint64                  // the word being read, lower case (a wordKey)
	start, ascii := 0, true
	for i := 0; i <= len(k); i++ {
		if i < len(k) {
			c := k[i]
			switch {
			case c == '_':
				return Underscore
			case c != '-':
				if c >= utf8.RuneSelf {
					ascii = false
				}
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				if n := uint(i - start); n < 8 {
					lo |= uint64(c) << (8 * n)
				} else if n < longestWord {
					hi |= uint64(c) << (8 * (n - 8))
				}
				continue
			}
		}
		var kind Kind
		switch w := k[start:i]; {
		case !ascii:
			kind = foldKind(w)
		case len(w) <= longestWord:
			kind = words.kindOf(wordKey{lo, hi}, len(w))
		}
		switch kind {
		case Identity:
			identity = true
		case Override:
			override = true
		}
		lo, hi, start, ascii = 0, 0, i+1, true
	}
	switch {
	case !identity && !override, owned(k, own):
		return None
	case identity && !strings.EqualFold(k, "User-Agent"):
		return Identity
	case override:
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

// words are identityTokens and overrideTokens by length, each with its
// Kind.
var words = newWordSet(map[Kind][]string{Identity: identityTokens, Override: overrideTokens})

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

// wordSet is lists of words, each word one entry of an array, grouped by
// length: a name is read on every request, and an ASCII word of it folds
// only to a word of its length, so it is compared with those alone, which
// lie side by side, each as two integers (the lists' strings lie each
// elsewhere in memory: a request's names read every word of the lists for
// every word of theirs, each a cache line or more).
type wordSet struct {
	lists map[Kind][]string
	// entries holds the words, shortest first; those of n bytes are
	// entries[at[n]:at[n+1]].
	entries []wordEntry
	at      [longestWord + 2]uint8
}

// wordEntry is a listed word: its bytes (key) and its list's Kind.
type wordEntry struct {
	key  wordKey
	kind Kind
}

// wordKey is the bytes of a word of at most longestWord bytes, the first
// eight in key[0], the others in key[1], little end first.
type wordKey [2]uint64

// longestWord is the length of the longest word a wordSet holds.
const longestWord = 16

// newWordSet is the wordSet of lists, each the words of its Kind: lower
// case ASCII words of 1 to longestWord bytes, no word in two lists.
func newWordSet(lists map[Kind][]string) wordSet {
	s := wordSet{lists: lists}
	for n := 1; n <= longestWord; n++ {
		s.at[n] = uint8(len(s.entries))
		for _, kind := range []Kind{Identity, Override} {
			for _, w := range lists[kind] {
				if len(w) == n {
					s.entries = append(s.entries, wordEntry{keyOf(w), kind})
				}
			}
		}
	}
	s.at[longestWord+1] = uint8(len(s.entries))
	for _, list := range lists {
		for _, w := range list {
			if len(w) == 0 || len(w) > longestWord || strings.ToLower(w) != w || !isASCII(w) {
				panic("headername: the word " + w + " is empty, longer than longestWord, not ASCII or not lower case")
			}
		}
	}
	return s
}

// keyOf is the wordKey of the ASCII word w, lower case.
func keyOf(w string) wordKey {
	var key wordKey
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		key[i/8] |= uint64(c) << (8 * (i % 8))
	}
	return key
}

// wordKind is the Kind of the list holding w in any case
// (strings.EqualFold), None when no list does: Of's reading of each word
// of a name.
func wordKind(w string) Kind {
	if !isASCII(w) {
		return foldKind(w)
	}
	if len(w) > longestWord {
		return None
	}
	return words.kindOf(keyOf(w), len(w))
}

// kindOf is the Kind of the ASCII word of n bytes whose lower case is
// key. It is only compared with the words of its length (every header
// name net/http reads is ASCII: each request's names are not folded
// against every word).
func (s *wordSet) kindOf(key wordKey, n int) Kind {
	for _, e := range s.entries[s.at[n]:s.at[n+1]] {
		if e.key == key {
			return e.kind
		}
	}
	return None
}

// foldKind is wordKind of a word that is not ASCII (the Kelvin sign K,
// the long s ſ): w folded against every listed word.
func foldKind(w string) Kind {
	for _, kind := range []Kind{Identity, Override} {
		for _, t := range words.lists[kind] {
			if strings.EqualFold(w, t) {
				return kind
			}
		}
	}
	return None
}

// isASCII reports whether s holds only ASCII bytes.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
