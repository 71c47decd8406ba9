package macp

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// serde reads JSON exactly as the runtime's serde_json 1.0 does (read.rs and
// de.rs of serde_json 1.0.154, the version macp-runtime 0.13.0 locks), for
// the few shapes the runtime reads from client bytes: a struct of one string
// field and values it skips. Go's encoding/json reads other bytes as JSON
// (invalid UTF-8 and lone surrogates become U+FFFD, nesting stops at 10,000,
// a one-element array is no struct), and a payload both read differently is
// a payload with two readings: Warden would decide on a message the runtime
// does not see.
//
// The input must be valid UTF-8 (the runtime parses from a str).
type serde struct {
	b []byte
	i int
}

// eof is what peek returns at the end of the input.
const eof = -1

func (p *serde) peek() int {
	if p.i < len(p.b) {
		return int(p.b[p.i])
	}
	return eof
}

// ws skips JSON whitespace and peeks (parse_whitespace).
func (p *serde) ws() int {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\n', '\t', '\r':
			p.i++
		default:
			return int(p.b[p.i])
		}
	}
	return eof
}

// oneStringField reads the input as serde_json::from_str reads a struct
// whose only field is the string key (#[derive(Deserialize)], unknown keys
// ignored): an object with key exactly once, or an array of exactly one
// string, and nothing after but whitespace.
func (p *serde) oneStringField(key string) (string, bool) {
	var v string
	var ok bool
	switch p.ws() {
	case '[':
		p.i++
		v, ok = p.seqOfOne()
	case '{':
		p.i++
		v, ok = p.objectWith(key)
	default:
		return "", false
	}
	return v, ok && p.ws() == eof
}

// seqOfOne is the derived visit_seq of a one-field struct and end_seq.
func (p *serde) seqOfOne() (string, bool) {
	if c := p.ws(); c != '"' { // ']' is a missing element; anything else not a string
		return "", false
	}
	p.i++
	v, ok := p.str()
	if !ok || p.ws() != ']' {
		return "", false
	}
	p.i++
	return v, true
}

// objectWith is the derived visit_map of a one-field struct and end_map.
func (p *serde) objectWith(key string) (string, bool) {
	value, found := "", false
	for first := true; ; first = false {
		c := p.ws()
		if c == '}' {
			break
		}
		if !first {
			if c != ',' {
				return "", false
			}
			p.i++
			c = p.ws()
		}
		if c != '"' {
			return "", false // a key must be a string; a trailing comma
		}
		p.i++
		k, ok := p.str()
		if !ok || p.ws() != ':' {
			return "", false
		}
		p.i++
		if k != key {
			if !p.skipValue() {
				return "", false
			}
			continue
		}
		if found || p.ws() != '"' {
			return "", false // a duplicate field; not a string
		}
		p.i++
		if value, ok = p.str(); !ok {
			return "", false
		}
		found = true
	}
	p.i++ // '}'
	return value, found
}

// str reads a string after its opening quote as parse_str does: control
// characters refused, escapes decoded, surrogates only in pairs.
func (p *serde) str() (string, bool) {
	var out []byte
	start := p.i
	for {
		if p.i >= len(p.b) {
			return "", false
		}
		switch c := p.b[p.i]; {
		case c == '"':
			out = append(out, p.b[start:p.i]...)
			p.i++
			return string(out), true
		case c == '\\':
			out = append(out, p.b[start:p.i]...)
			p.i++
			var ok bool
			if out, ok = p.escape(out); !ok {
				return "", false
			}
			start = p.i
		case c < 0x20:
			return "", false
		default:
			p.i++
		}
	}
}

// escape decodes one escape after its backslash into out (parse_escape
// with validation, as for a str).
func (p *serde) escape(out []byte) ([]byte, bool) {
	if p.i >= len(p.b) {
		return out, false
	}
	c := p.b[p.i]
	p.i++
	switch c {
	case '"', '\\', '/':
		return append(out, c), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
	default:
		return out, false
	}
	n, ok := p.hex4()
	switch {
	case !ok, n >= 0xDC00 && n <= 0xDFFF:
		return out, false // a trailing surrogate alone
	case n < 0xD800 || n > 0xDBFF:
		return utf8.AppendRune(out, rune(n)), true
	}
	if p.peek() != '\\' || p.i+1 >= len(p.b) || p.b[p.i+1] != 'u' {
		return out, false // a leading surrogate alone
	}
	p.i += 2
	n2, ok := p.hex4()
	if !ok || n2 < 0xDC00 || n2 > 0xDFFF {
		return out, false
	}
	return utf8.AppendRune(out, rune((n-0xD800)<<10|(n2-0xDC00))+0x10000), true
}

// hex4 reads the four hex digits of a \u escape.
func (p *serde) hex4() (uint32, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var n uint32
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | uint32(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | uint32(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return n, true
}

// skipStr skips a string after its opening quote (ignore_str): control
// characters refused, escapes checked for form only (a lone surrogate
// passes).
func (p *serde) skipStr() bool {
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '"':
			return true
		case c == '\\':
			if p.i >= len(p.b) {
				return false
			}
			e := p.b[p.i]
			p.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := p.hex4(); !ok {
					return false
				}
			default:
				return false
			}
		case c < 0x20:
			return false
		}
	}
	return false
}

// skipValue skips one value (ignore_value: no depth limit, the enclosing
// containers kept on a stack).
func (p *serde) skipValue() bool {
	var stack []byte
	for {
		var frame byte
		switch c := p.ws(); c {
		case 'n':
			if !p.ident("null") {
				return false
			}
		case 't':
			if !p.ident("true") {
				return false
			}
		case 'f':
			if !p.ident("false") {
				return false
			}
		case '-':
			p.i++
			if !p.skipNumber() {
				return false
			}
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			if !p.skipNumber() {
				return false
			}
		case '"':
			p.i++
			if !p.skipStr() {
				return false
			}
		case '[', '{':
			p.i++
			frame = byte(c)
		default:
			return false
		}
		acceptComma := frame == 0
		if frame == 0 {
			if len(stack) == 0 {
				return true
			}
			frame, stack = stack[len(stack)-1], stack[:len(stack)-1]
		}
		for {
			c := p.ws()
			if c == ',' && acceptComma {
				p.i++
				break
			}
			if c == ']' && frame == '[' || c == '}' && frame == '{' {
				p.i++
				if len(stack) == 0 {
					return true
				}
				frame, stack = stack[len(stack)-1], stack[:len(stack)-1]
				acceptComma = true
				continue
			}
			if c == eof || acceptComma {
				return false
			}
			break
		}
		if frame == '{' {
			if p.ws() != '"' {
				return false
			}
			p.i++
			if !p.skipStr() || p.ws() != ':' {
				return false
			}
			p.i++
		}
		stack = append(stack, frame)
	}
}

// ident reads a literal whose first byte was peeked.
func (p *serde) ident(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

// skipNumber skips a number from its first digit (ignore_integer,
// ignore_decimal, ignore_exponent).
func (p *serde) skipNumber() bool {
	digits := func() int {
		n := 0
		for c := p.peek(); c >= '0' && c <= '9'; c = p.peek() {
			p.i++
			n++
		}
		return n
	}
	switch c := p.peek(); {
	case c == '0':
		p.i++
		if d := p.peek(); d >= '0' && d <= '9' {
			return false
		}
	case c >= '1' && c <= '9':
		digits()
	default:
		return false
	}
	if p.peek() == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// valueDepth is serde_json's recursion limit: a container nested 128 deep
// is refused.
const valueDepth = 128

// document reports whether serde_json::from_str::<serde_json::Value> reads
// the input: one value, nothing after but whitespace.
func (p *serde) document() bool {
	return p.value(valueDepth) && p.ws() == eof
}

// value reads one value as the Value deserializer does: strings, keys
// included, as parse_str (a lone surrogate refused), containers within the
// recursion limit, numbers as finite floats.
func (p *serde) value(depth int) bool {
	switch c := p.ws(); c {
	case 'n':
		return p.ident("null")
	case 't':
		return p.ident("true")
	case 'f':
		return p.ident("false")
	case '"':
		p.i++
		_, ok := p.str()
		return ok
	case '[', '{':
		if depth--; depth == 0 {
			return false
		}
		p.i++
		return p.container(byte(c), depth)
	default:
		start := p.i
		if c == '-' {
			p.i++
		}
		if !p.skipNumber() {
			return false
		}
		f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
		return err == nil && !math.IsInf(f, 0) // serde_json: number out of range
	}
}

// container reads the rest of an array or object whose opening bracket was
// read.
func (p *serde) container(open byte, depth int) bool {
	close := byte(']')
	if open == '{' {
		close = '}'
	}
	for first := true; ; first = false {
		c := p.ws()
		if c == int(close) && first {
			p.i++
			return true
		}
		if !first {
			switch c {
			case int(close):
				p.i++
				return true
			case ',':
				p.i++
			default:
				return false
			}
			if p.ws() == int(close) {
				return false // a trailing comma
			}
		}
		if open == '{' {
			if p.ws() != '"' {
				return false
			}
			p.i++
			if _, ok := p.str(); !ok || p.ws() != ':' {
				return false
			}
			p.i++
		}
		if !p.value(depth) {
			return false
		}
	}
}
