package jsonrpc

import "unicode/utf8"

// This file reads JSON without decoding it, for the hot path (Object): string
// literals that need no unescaping, and where a value ends. Every reader here trusts its input to
// be valid JSON (json.Valid), which every caller checked first for the
// whole message; on other input it returns nonsense, never panics.

// PlainString returns the value of a JSON string literal that needs no
// unescaping (no backslash, no control character, valid UTF-8): exactly what
// encoding/json decodes it to. ok is false for any other literal.
func PlainString(raw []byte) (string, bool) {
	if !plainLiteral(raw) {
		return "", false // escapes to decode; encoding/json reads invalid bytes as U+FFFD
	}
	return string(raw[1 : len(raw)-1]), true
}

// Misspells reports whether a member named key is read as name by some
// peer without being it: equal under Fold, or under Fold once both are
// Unscored (Unscored tells which peers). Every place that holds a name
// Warden reads to its spelling asks this.
func Misspells(key []byte, name string) bool {
	switch {
	case string(key) == name:
		return false
	case len(key) == len(name) && foldEqual(key, name):
		return true
	}
	return underscored(key, name) && foldEqualUnscored(key, name)
}

// foldEqualUnscored is foldEqualString(Unscored(a), Unscored(b)), without
// making either when both are ASCII (as member names are): Misspells runs
// on every member name of every message. (Removing '_' from other bytes
// may join two into a rune: those take the definition.)
func foldEqualUnscored(a []byte, b string) bool {
	if !ascii(a) || !ascii(b) {
		return foldEqualString(Unscored(string(a)), Unscored(b))
	}
	for {
		for len(a) > 0 && a[0] == '_' {
			a = a[1:]
		}
		for len(b) > 0 && b[0] == '_' {
			b = b[1:]
		}
		if len(a) == 0 || len(b) == 0 {
			return len(a) == 0 && len(b) == 0
		}
		if foldASCII(rune(a[0])) != foldASCII(rune(b[0])) {
			return false
		}
		a, b = a[1:], b[1:]
	}
}

// ascii reports whether s holds only ASCII bytes.
func ascii[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldEqual reports whether two ASCII names are equal ignoring case.
func foldEqual[A, B ~string | ~[]byte](a A, b B) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// asciiUnder reports whether b is ASCII, and whether it holds an
// underscore, in one pass.
func asciiUnder(b []byte) (ascii, under bool) {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false, under
		}
		under = under || c == '_'
	}
	return true, under
}

// hasUnderscore is strings.IndexByte(s, '_') >= 0 for the short names
// Warden reads, without its call.
func hasUnderscore(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '_' {
			return true
		}
	}
	return false
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// StringEnd returns the index just past the string literal that starts at
// b[i] (a quote), -1 when it does not end, and whether it holds an escape.
func StringEnd(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// ValueEnd returns the index just past the JSON value that starts at b[i],
// or -1 when it does not end. It finds where a value ends; it does not check
// the value.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := StringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			case '"':
				end, _ := StringEnd(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			}
		}
		return -1
	}
	j := i // a number, true, false or null
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
		j++
	}
	return j
}

// CountFold counts the places in b that spell name (ASCII) as a reader
// matching names without case reads it (Fold): each ASCII letter in either
// case, the Kelvin sign K for k, the long s ſ for s, and underscores
// between the letters (Unscored: task_id for taskId). Escapes are not
// decoded: a caller that needs them counted looks for a backslash apart.
func CountFold(b []byte, name string) int {
	if name == "" {
		return 0
	}
	var f foldCounter
	f.init(name)
	return f.count(b)
}

// foldCounter is CountFold of one name, for counting in many slices
// (Scan: each string of a message).
type foldCounter struct {
	name  string
	first [256]bool // the bytes a spelling of name may begin with
}

// init makes f the foldCounter of name (not "").
func (f *foldCounter) init(name string) {
	f.name = name
	c := upper(name[0])
	if 'A' <= c && c <= 'Z' {
		f.first[c|0x20] = true
	}
	f.first[c] = true
	f.first[0xe2] = c == 'K' // K
	f.first[0xc5] = c == 'S' // ſ
}

// count is CountFold(b, f.name).
func (f *foldCounter) count(b []byte) int {
	n := 0
	for i := range b {
		if f.first[b[i]] && foldsAt(b[i:], f.name) {
			n++
		}
	}
	return n
}

// foldsAt reports whether b begins with a spelling of name under Fold,
// underscores between its letters skipped (Unscored).
func foldsAt(b []byte, name string) bool {
	j := 0
	for k := 0; k < len(name); k++ {
		c := upper(name[k])
		for k > 0 && j < len(b) && b[j] == '_' && c != '_' {
			j++
		}
		switch {
		case j < len(b) && upper(b[j]) == c:
			j++
		case c == 'K' && len(b)-j >= 3 && string(b[j:j+3]) == "\u212a":
			j += 3
		case c == 'S' && len(b)-j >= 2 && string(b[j:j+2]) == "\u017f":
			j += 2
		default:
			return false
		}
	}
	return true
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}
