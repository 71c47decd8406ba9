package headername

import (
	"strings"
	"testing"
)

// hasWord reports whether the header name k has a word, split at '-' or
// '_', in the list of kind, as Of reads it (wordKind).
func hasWord(k string, kind Kind) bool {
	for w := range strings.FieldsFuncSeq(k, func(r rune) bool { return r == '-' || r == '_' }) {
		if wordKind(w) == kind {
			return true
		}
	}
	return false
}

// ofByParts is Of as it was written before its one pass (2026-11-29): a
// pass for '_', the own names compared, a pass for each list, each word
// folded against every word of the list (hasWordByFold). Of must answer
// as it does (FuzzOf).
func ofByParts(k string, own []string) Kind {
	switch {
	case strings.IndexByte(k, '_') >= 0:
		return Underscore
	case owned(k, own):
		return None
	case !strings.EqualFold(k, "User-Agent") && hasWordByFold(k, identityTokens):
		return Identity
	case hasWordByFold(k, overrideTokens):
		return Override
	}
	return None
}

// FuzzOf holds Of to ofByParts, with MCP's own names and with none (MACP).
func FuzzOf(f *testing.F) {
	for _, s := range []string{"X-Http-Method-Override", "x_ſcript", "Content-Type", "pat\u212a", "a--b__c", "", "Mcp-Method", "Mcp-Param-User",
		"MCP-PARAM-path", "User-Agent", "user-agent-path", "X-User-Path", "Mcp-Paramuser", "-user-", "x-macp-agent-id"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		for _, own := range [][]string{{"Mcp-Method", "Mcp-Param-"}, nil} {
			if got, want := Of(k, own), ofByParts(k, own); got != want {
				t.Fatalf("Of(%q, %q) = %d, ofByParts %d", k, own, got, want)
			}
		}
	})
}

// hasWordByFold is hasWord as it was written first: every word folded
// against every one of words. hasWord must answer as it does.
func hasWordByFold(k string, words []string) bool {
	for k != "" {
		i := strings.IndexAny(k, "-_")
		w := k
		if i >= 0 {
			w, k = k[:i], k[i+1:]
		} else {
			k = ""
		}
		for _, t := range words {
			if strings.EqualFold(w, t) {
				return true
			}
		}
	}
	return false
}

// TestHasWord: the header names that could name another method or target
// are found in any case, at any place, split at '-' or '_', with the Kelvin
// sign and the long s folded as strings.EqualFold folds them; so are the
// identity words.
func TestHasWord(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"X-Http-Method-Override", true},
		{"X-Method-Override", true},
		{"X-Original-Url", true},
		{"X-Rewrite-Url", true},
		{"X-Original-Uri", true},
		{"X-Forwarded-Prefix", true},
		{"X-Envoy-Original-Path", true},
		{"X-Script-Name", true},
		{"x_forwarded_uri", true},
		{"METHOD", true},
		{"-Path-", true},
		{"X-ſcript-Name", true},    // the long s folds to s
		{"X-Url\u212a-Path", true}, // Kelvin sign: "Url\u212a" is no token, Path is
		{"X-Pat\u212a", false},
		{"Content-Type", false},
		{"Mcp-Protocol-Version", false},
		{"Authorization", false},
		{"X-Request-Id", false},
		{"Urls", false},
		{"Methods", false},
		{"", false},
		{"-", false},
		{"__", false},
	} {
		if got := hasWord(tc.name, Override); got != tc.want || got != hasWordByFold(tc.name, overrideTokens) {
			t.Errorf("hasWord(%q, overrideTokens) = %v, want %v (by fold: %v)", tc.name, got, tc.want, hasWordByFold(tc.name, overrideTokens))
		}
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"X-Forwarded-User", true},
		{"Remote-User", true},
		{"X-Ms-Client-Principal-Name", true},
		{"x_tenant_id", true},
		{"X-Uſer", true},     // the long s folds to s
		{"User-Agent", true}, // a word of it; asserting leaves User-Agent out
		{"x-macp-agent-id", true},
		{"X-Sender", true},
		{"Agents", false},
		{"Users", false},
		{"Content-Type", false},
	} {
		if got := hasWord(tc.name, Identity); got != tc.want || got != hasWordByFold(tc.name, identityTokens) {
			t.Errorf("hasWord(%q, identityTokens) = %v, want %v (by fold: %v)", tc.name, got, tc.want, hasWordByFold(tc.name, identityTokens))
		}
	}
}

// FuzzHasWord holds hasWord to hasWordByFold, on both lists of words.
func FuzzHasWord(f *testing.F) {
	for _, s := range []string{"X-Http-Method-Override", "x_ſcript", "Content-Type", "pat\u212a", "a--b__c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		for kind, list := range words.lists {
			if got, want := hasWord(k, kind), hasWordByFold(k, list); got != want {
				t.Fatalf("hasWord(%q, %v) = %v, by fold %v", k, list, got, want)
			}
		}
	})
}

// TestOf: the kind of each name, the protocol's own names left alone but
// for a '_', and what gRPC clients send passing.
func TestOf(t *testing.T) {
	own := []string{"Mcp-Method", "Mcp-Param-"}
	for _, tc := range []struct {
		name string
		want Kind
	}{
		{"X-Forwarded-User", Identity},
		{"x-macp-agent-id", Identity},
		{"x-user-bin", Identity},
		{"X-Http-Method-Override", Override},
		{"X-User-Path", Identity},
		{"x_request_id", Underscore},
		{"Mcp-Method", None},
		{"Mcp-Param-User", None},
		{"Mcp_Param_User", Underscore},
		{"user-agent", None},
		{"User-Agent", None},
		{"grpc-accept-encoding", None},
		{"te", None},
		{"traceparent", None},
		{"x-request-id", None},
		{":authority", None},
	} {
		if got := Of(tc.name, own); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestWordSet: each word of both lists is found by its wordSet, as itself,
// in upper case and as a word of a longer name, and a word one byte
// shorter or longer is not.
func TestWordSet(t *testing.T) {
	for kind, list := range words.lists {
		for _, w := range list {
			for _, k := range []string{w, strings.ToUpper(w), "X-" + w + "-Y"} {
				if !hasWord(k, kind) {
					t.Errorf("%q: not found", k)
				}
			}
			for _, k := range []string{w[1:], w + "x"} {
				if hasWord(k, kind) != hasWordByFold(k, list) {
					t.Errorf("%q: read otherwise than by fold", k)
				}
			}
		}
	}
}

// TestOfAllocs: the rule reads a name without allocating.
func TestOfAllocs(t *testing.T) {
	own := []string{"Mcp-Method", "Mcp-Param-"}
	if n := testing.AllocsPerRun(100, func() {
		for _, k := range benchNames {
			Of(k, own)
		}
	}); n != 0 {
		t.Errorf("%v allocations, want none", n)
	}
}

// benchNames are the header names of an MCP client's tasks/get, as the
// sidecar's server reads them.
var benchNames = []string{"Accept", "Accept-Encoding", "Authorization", "Content-Length", "Content-Type", "Mcp-Method", "Mcp-Name",
	"Mcp-Protocol-Version", "Mcp-Session-Id", "User-Agent", "X-Request-Id", "Traceparent"}

// BenchmarkOf reads the names of one MCP request.
func BenchmarkOf(b *testing.B) {
	own := []string{"Mcp-Method", "Mcp-Param-"}
	for b.Loop() {
		for _, k := range benchNames {
			if Of(k, own) != None {
				b.Fatal(k)
			}
		}
	}
}
