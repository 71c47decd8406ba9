package mcp

import (
	"strconv"
	"strings"

	"github.com/agentwarden/warden/rules"
)

// PolicyURI checks params.uri of resources/read before an operator policy
// reads it. Servers read a resource URI as a URL and look it up in the
// spelling URL parsing gives it (the TypeScript SDK: new URL(uri).toString(),
// WHATWG's; the Python SDK's pydantic URLs alike): DEMO://vault/secret,
// demo://vault/public/../secret, demo://vault/%2e/secret or a tab inside it
// all read demo://vault/secret there, so a rule on input.mcp.uri would judge
// a spelling the server never reads. A URI is refused (-32602) unless it is
// in the one spelling URL parsing leaves as it is (canonicalURI); a server
// that looks URIs up as exact strings (the Go SDK) then reads the same one.
func PolicyURI(uri string) rules.Verdict {
	if why := canonicalURI(uri); why != "" {
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: "Invalid params: params.uri is not in its canonical spelling (" + why + "); send it as resources/list names it"}
	}
	return rules.Verdict{}
}

// specialPorts are WHATWG's special schemes and their default ports (file
// has none): their URLs have a host, a path that is never empty, and the
// default port left out.
var specialPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21", "file": ""}

// canonicalURI returns why WHATWG URL parsing could give uri another
// spelling ("" when it leaves it unchanged, or cannot parse it at all: the
// server then refuses it itself). It is conservative: a few spellings URL
// parsing would keep are refused too (an IPv6 host, userinfo), never one it
// would change.
func canonicalURI(uri string) string {
	for i := 0; i < len(uri); i++ {
		// Parsing strips leading and trailing C0 controls and spaces,
		// removes tabs and newlines anywhere, reads \ as / (special
		// schemes) and percent-encodes the rest of these.
		if c := uri[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>\\^`{}|", c) >= 0 {
			return "a control character, a space, a byte that is not ASCII or one of \" < > \\ ^ ` { } |"
		}
	}
	colon := strings.IndexByte(uri, ':')
	if colon < 1 || !validScheme(uri[:colon]) {
		return "" // not a URL: the server cannot parse it either
	}
	scheme := uri[:colon]
	if strings.ToLower(scheme) != scheme {
		return "a scheme in capitals"
	}
	rest := uri[colon+1:]
	rest, _, _ = strings.Cut(rest, "#")
	rest, query, _ := strings.Cut(rest, "?")
	defaultPort, special := specialPorts[scheme]
	if special && strings.IndexByte(query, '\'') >= 0 {
		return "a ' in the query"
	}
	path := rest
	if auth, ok := strings.CutPrefix(rest, "//"); ok {
		host, p, _ := strings.Cut(auth, "/")
		if p != "" || strings.HasSuffix(auth, "/") {
			p = "/" + p
		}
		if why := canonicalAuthority(scheme, host, defaultPort, special); why != "" {
			return why
		}
		path = p
		if special && path == "" {
			return "no path (read as /)"
		}
	} else if special {
		return "no // before the host"
	}
	if strings.HasPrefix(path, "/") {
		for seg := range strings.SplitSeq(path[1:], "/") {
			switch strings.ToLower(seg) {
			case ".", "..", "%2e", ".%2e", "%2e.", "%2e%2e":
				return "a dot segment"
			}
		}
		if special && strings.HasPrefix(path, "//") && scheme != "file" {
			return "an empty first path segment"
		}
	}
	return ""
}

// canonicalAuthority returns why URL parsing could spell an authority
// (host and port, after //) otherwise.
func canonicalAuthority(scheme, authority, defaultPort string, special bool) string {
	if strings.ContainsAny(authority, "@[]") {
		return "userinfo or an IPv6 host"
	}
	host, port, hasPort := strings.Cut(authority, ":")
	if hasPort {
		switch {
		case strings.IndexByte(port, ':') >= 0, port == "", strings.Trim(port, "0123456789") != "":
			return "a malformed port"
		case len(port) > 1 && port[0] == '0':
			return "a port with a leading zero"
		case special && (port == defaultPort || scheme == "file"):
			return "the scheme's default port"
		}
	}
	if !special {
		return "" // an opaque host: kept as written
	}
	switch {
	case host == "" && scheme != "file":
		return "an empty host"
	case strings.ToLower(host) != host:
		return "a host in capitals"
	case strings.IndexByte(host, '%') >= 0:
		return "a percent-encoded host"
	case scheme == "file" && host == "localhost":
		return "file://localhost (read as file:///)"
	case numericHost(host) && !dottedQuad(host):
		return "an IPv4 address not in dotted-decimal form"
	}
	return ""
}

// validScheme reports whether s is a URL scheme: a letter, then letters,
// digits, +, - and .
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !('a' <= c && c <= 'z') && (i == 0 || !('0' <= s[i] && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.')) {
			return false
		}
	}
	return s != ""
}

// numericHost reports whether URL parsing reads host as an IPv4 address:
// its last label (a trailing dot aside) is a number (decimal, octal or hex).
func numericHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	x, ok := strings.CutPrefix(strings.ToLower(last), "0x")
	return ok && strings.Trim(x, "0123456789abcdef") == ""
}

// dottedQuad reports whether host is an IPv4 address as URL parsing writes
// it: four decimal numbers up to 255, without leading zeros.
func dottedQuad(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" || len(p) > 1 && p[0] == '0' {
			return false
		}
		if n, _ := strconv.Atoi(p); n > 255 {
			return false
		}
	}
	return true
}
