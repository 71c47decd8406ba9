package jsonrpc

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// This file reads JSON without decoding it, for the hot path: the members of
// an object as sub-slices of the message, string literals that need no
// unescaping, and where a value ends. Every reader here trusts its input to
// be valid JSON (json.Valid), which every caller checked first for the
// whole message; on other input it returns nonsense, never panics.

// maxScanned is the most members scan compares pairwise; a larger object
// takes the decoding path.
const maxScanned = 16

// scan is members without decoding: one pass over raw that returns every
// member (all) or those named in known as sub-slices of raw, and refuses
// exactly what decode refuses, with the same messages. scanned is false when it cannot read the object this
// way (not an object, an escape or a byte outside ASCII in a name, more than
// maxScanned members): the caller then decodes. With every name in ASCII,
// two names are equal under Fold exactly when they are equal ignoring ASCII
// case, which needs no allocation to test.
func scan(raw []byte, known []string, all bool) (m map[string]json.RawMessage, scanned bool, err error) {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false, nil
	}
	var names [maxScanned][]byte
	var values [maxScanned]json.RawMessage
	var keys [maxScanned]string // the name each kept member is kept under
	var keep [maxScanned]bool
	n, kept := 0, 0
	i = SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil, SkipSpace(raw, i+1) == len(raw), nil
	}
	for n < maxScanned {
		if i >= len(raw) || raw[i] != '"' {
			return nil, false, nil
		}
		end, escaped := StringEnd(raw, i)
		if end < 0 || escaped {
			return nil, false, nil
		}
		k := raw[i+1 : end-1]
		if !isASCII(k) {
			return nil, false, nil
		}
		i = SkipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false, nil
		}
		vs := SkipSpace(raw, i+1)
		ve := ValueEnd(raw, vs)
		if ve < 0 {
			return nil, false, nil
		}
		for _, p := range names[:n] {
			if foldEqual(p, k) {
				if string(p) == string(k) {
					return nil, true, fmt.Errorf("member %q appears twice", k)
				}
				return nil, true, fmt.Errorf("members %q and %q differ only in case", p, k)
			}
		}
		keep[n] = false
		for _, name := range known {
			switch {
			case string(k) == name:
				keys[n], keep[n] = name, true // the caller's copy of the name: no allocation
			case foldEqual(k, name):
				return nil, true, fmt.Errorf("member %q must be spelled %q", k, name)
			}
		}
		if !keep[n] && all {
			keys[n], keep[n] = string(k), true
		}
		if keep[n] {
			kept++
		}
		names[n], values[n] = k, raw[vs:ve:ve]
		n++
		i = SkipSpace(raw, ve)
		switch {
		case i < len(raw) && raw[i] == ',':
			i = SkipSpace(raw, i+1)
		case i < len(raw) && raw[i] == '}':
			if SkipSpace(raw, i+1) != len(raw) {
				return nil, false, nil
			}
			if kept == 0 {
				return nil, true, nil // nil reads as an empty map, and costs nothing
			}
			m = make(map[string]json.RawMessage, kept)
			for j := range n {
				if keep[j] {
					m[keys[j]] = values[j]
				}
			}
			return m, true, nil
		default:
			return nil, false, nil
		}
	}
	return nil, false, nil
}

// PlainString returns the value of a JSON string literal that needs no
// unescaping (no backslash, no control character, valid UTF-8): exactly what
// encoding/json decodes it to. ok is false for any other literal.
func PlainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false // encoding/json reads invalid bytes as U+FFFD
	}
	return string(in), true
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

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
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
