package jsonrpc

import "encoding/json"

// validDepth is the deepest nesting Valid reads itself; a deeper message is
// left to json.Valid (whose own bound, 10000, it then keeps).
const validDepth = 64

// Valid reports whether b is one JSON value, as json.Valid does (FuzzValid
// holds it to json.Valid), in one pass without the decoder's scanner
// states: every message Warden reads is checked so before it is read, and
// json.Valid was a tenth of a sidecar's own CPU per request. As json.Valid,
// it does not check that strings are UTF-8.
func Valid(b []byte) bool {
	var objects uint64 // bit d: the container at depth d+1 is an object
	depth := 0
	i := SkipSpace(b, 0)
	for {
		// a value at i
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth == validDepth {
				return json.Valid(b)
			}
			if c == '{' {
				objects |= 1 << depth
			} else {
				objects &^= 1 << depth
			}
			depth++
			i = SkipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				depth--
				i++
				break
			}
			if c == '{' {
				if i = validKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			i = validString(b, i)
		case c == '-' || '0' <= c && c <= '9':
			i = validNumber(b, i)
		case c == 't':
			i = validLiteral(b, i, "true")
		case c == 'f':
			i = validLiteral(b, i, "false")
		case c == 'n':
			i = validLiteral(b, i, "null")
		default:
			return false
		}
		if i < 0 {
			return false
		}
		// after a value: the containers it ends, then the next member or
		// element
	after:
		for {
			i = SkipSpace(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			object := objects&(1<<(depth-1)) != 0
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
				if object {
					if i = validKey(b, i); i < 0 {
						return false
					}
				}
				break after
			case '}', ']':
				if object != (b[i] == '}') {
					return false
				}
				depth--
				i++
			default:
				return false
			}
		}
	}
}

// validKey reads a member's name and its colon at b[i]; it returns where
// the value starts, or -1.
func validKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}

// validString reads the string at b[i] (its opening quote): the index after
// its closing quote, or -1.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// validNumber reads the number at b[i]: the index after it, or -1.
func validNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return -1
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = digits(b, i)
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// validLiteral reads lit at b[i]: the index after it, or -1.
func validLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// LoneSurrogate reports whether the JSON text b (valid: Valid's) holds a
// \u escape of a UTF-16 surrogate that is not a high one followed by a low
// one: encoding/json reads it as U+FFFD, JavaScript and Python keep it,
// Rust's readers (serde_json, pydantic's jiter) refuse it. Every backslash
// in valid JSON starts an escape in a string, so the escapes are found
// without reading the rest.
func LoneSurrogate(b []byte) bool {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // a one-character escape: its character is no backslash
			continue
		}
		r := hex4(b[i+2:])
		i += 5 // the escape's last digit
		switch {
		case r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00:
			return true // a low surrogate first
		case i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u':
			return true // a high surrogate alone
		default:
			if lo := hex4(b[i+3:]); lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 is the value of the four hex digits b starts with (Valid checked
// them).
func hex4(b []byte) rune {
	var r rune
	for _, h := range b[:4] {
		switch {
		case '0' <= h && h <= '9':
			h -= '0'
		case 'a' <= h && h <= 'f':
			h -= 'a' - 10
		default:
			h -= 'A' - 10
		}
		r = r<<4 | rune(h)
	}
	return r
}
