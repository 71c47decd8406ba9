// Package jsonrpctest holds the ambiguous spellings every door that reads a
// name from a JSON object is tested with (jsonrpc.Object's one rule).
package jsonrpctest

import (
	"fmt"
	"strings"
	"testing"
)

// Spelling is one way an answer may give a name Warden reads, with value v
// (and v2, another value, for a second member).
type Spelling struct {
	Name string
	// Members writes the members for name; "" when the spelling does not
	// apply to it (a Kelvin sign for a name without k).
	Members func(name, v, v2 string) string
	// Protocol: refused in a protocol object. Walked: refused in an object
	// Warden only walks through (a tool's output) and reads the name from.
	Protocol, Walked bool
}

// Spellings are the spellings of a name: as written, given twice, escaped,
// in another case alone and beside it, with the Kelvin sign for k and the
// long s for s (how Go's encoding/json folds names), raw or escaped, and
// its Python name (task_id for taskId, meta for _meta: how ProtoJSON and
// pydantic's populate_by_name read it) alone and beside it.
var Spellings = []Spelling{
	{"as written", func(n, v, _ string) string { return q(n) + ":" + v }, false, false},
	{"escaped", func(n, v, _ string) string { return esc(n) + ":" + v }, false, false},
	{"twice", func(n, v, v2 string) string { return q(n) + ":" + v + "," + q(n) + ":" + v2 }, true, true},
	{"twice, escaped", func(n, v, v2 string) string { return q(n) + ":" + v + "," + esc(n) + ":" + v2 }, true, true},
	{"in another case", func(n, v, _ string) string { return q(flip(n)) + ":" + v }, true, false},
	{"in another case, escaped", func(n, v, _ string) string { return esc(flip(n)) + ":" + v }, true, false},
	{"upper case", func(n, v, _ string) string { return q(strings.ToUpper(n)) + ":" + v }, true, false},
	{"in two cases", func(n, v, v2 string) string { return q(n) + ":" + v + "," + q(flip(n)) + ":" + v2 }, true, true},
	{"in two cases, the other first", func(n, v, v2 string) string { return q(flip(n)) + ":" + v2 + "," + q(n) + ":" + v }, true, true},
	{"two other cases", func(n, v, v2 string) string { return q(flip(n)) + ":" + v + "," + q(strings.ToUpper(n)) + ":" + v2 }, true, true},
	{"Kelvin sign", func(n, v, _ string) string { return member(sub(n, "k", "\u212a"), v) }, true, false},
	{"Kelvin sign, escaped", func(n, v, _ string) string { return member(sub(n, "k", `\u212a`), v) }, true, false},
	{"Kelvin sign beside", func(n, v, v2 string) string { return pair(n, v, sub(n, "k", "\u212a"), v2) }, true, true},
	{"long s", func(n, v, _ string) string { return member(sub(n, "s", "\u017f"), v) }, true, false},
	{"long s beside", func(n, v, v2 string) string { return pair(n, v, sub(n, "s", `\u017f`), v2) }, true, true},
	{"Python name", func(n, v, _ string) string { return member(snake(n), v) }, true, false},
	{"Python name beside", func(n, v, v2 string) string { return pair(n, v, snake(n), v2) }, true, true},
}

func q(s string) string { return `"` + s + `"` }

// esc writes s's first letter as a \u escape.
func esc(s string) string { return fmt.Sprintf(`"\u%04x%s"`, s[0], s[1:]) }

// flip changes the case of s's first letter.
func flip(s string) string {
	c := s[0]
	switch {
	case 'a' <= c && c <= 'z':
		c -= 'a' - 'A'
	case 'A' <= c && c <= 'Z':
		c += 'a' - 'A'
	}
	return string(c) + s[1:]
}

// sub replaces the first of old (either case) in n with r; "" when n has
// none.
func sub(n, old, r string) string {
	i := strings.Index(strings.ToLower(n), old)
	if i < 0 {
		return ""
	}
	return n[:i] + r + n[i+1:]
}

func member(name, v string) string {
	if name == "" {
		return ""
	}
	return q(name) + ":" + v
}

func pair(n, v, other, v2 string) string {
	if other == "" {
		return ""
	}
	return q(n) + ":" + v + "," + q(other) + ":" + v2
}

// Run runs fn as door/<spelling> for every spelling that applies to name,
// with the members it writes.
func Run(t *testing.T, door, name, v, v2 string, fn func(t *testing.T, sp Spelling, members string)) {
	t.Helper()
	for _, sp := range Spellings {
		if members := sp.Members(name, v, v2); members != "" {
			t.Run(door+"/"+sp.Name, func(t *testing.T) { fn(t, sp, members) })
		}
	}
}

// snake is name's Python name: its leading underscores dropped, an
// underscore before each upper-case letter, all in lower case; "" when
// that is name itself.
func snake(n string) string {
	var b strings.Builder
	for i, c := range strings.TrimLeft(n, "_") {
		if 'A' <= c && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	if b.String() == n {
		return ""
	}
	return b.String()
}
