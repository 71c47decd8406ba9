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
	switch scan(b, nil, nil) {
	case scanned:
		return true
	case tooDeep:
		return json.Valid(b)
	}
	return false
}

// Member is one member of an object, as Scan reports it.
type Member struct {
	// Name is the member's name as it came, between its quotes; Escaped
	// reports whether it holds an escape.
	Name    []byte
	Escaped bool
	// Object numbers the object that holds the member, in the order the
	// objects of the message begin (1: the outermost); Depth is how many
	// objects and arrays hold the member (1: a member of the outermost).
	Object, Depth int
	// Start and End are where the value lies: b[Start:End], a string's
	// quotes included; End is -1 for an object or an array (the member is
	// reported where its value begins). ValueEscaped reports whether a
	// string value holds an escape.
	Start, End   int
	ValueEscaped bool
}

// Scan is Valid and a reading of b's members on the same one pass: it
// reports whether b is one JSON value nested at most 64 deep (a deeper one
// is not scanned: ok is false, and Valid tells whether it is JSON), calls
// member (nil: none) for every member of every object in the order they
// come, and counts the places in b's strings that spell fold (ASCII) as
// CountFold counts them in b ("": none counted; no other place in valid
// JSON spells a name). FuzzScan holds it to Valid, CountFold and a
// decoder's reading of the members. A Member's Name is b's bytes.
func Scan(b []byte, fold string, member func(Member)) (folds int, ok bool) {
	st := scanState{members: member != nil}
	if fold != "" {
		st.fold.init(fold)
		st.folding = true
	}
	ok = scan(b, &st, member) == scanned
	return st.folds, ok
}

// The outcomes of a scan.
const (
	invalid = iota
	scanned
	tooDeep
)

// scanState is what Scan keeps on Valid's pass (scan): Valid keeps none,
// and its pass does nothing more (it is on every message's path).
type scanState struct {
	members  bool // a member is called
	fold     foldCounter
	folding  bool // fold is counted
	folds    int
	m        Member
	keyed    bool              // a member's name was read: the value scan reads next is its value
	objects  int32             // the objects begun
	number   [validDepth]int32 // the number of the object at depth d+1 (0: an array)
	ix       indexer           // the message indexed (ReadObject), when indexing
	indexing bool
}

// key notes the member whose name is b[start+1:end-1] (escaped: it holds
// an escape), of the object at depth.
func (st *scanState) key(b []byte, start, end int, escaped bool, depth int) {
	if st.folding {
		st.folds += st.fold.count(b[start+1 : end-1])
	}
	if st.members {
		st.m.Name, st.m.Escaped, st.m.Object, st.m.Depth = b[start+1:end-1], escaped, int(st.number[depth-1]), depth
		st.keyed = true
	}
}

// open notes a container begun at b[i] at depth (the one it is in), the
// value of the member keyed when there is one.
func (st *scanState) open(b []byte, i, depth int, member func(Member)) {
	if st.indexing {
		st.ix.container(i, depth+1)
	}
	if !st.members {
		return
	}
	if st.keyed {
		st.m.Start, st.m.End, st.m.ValueEscaped = i, -1, false
		member(st.m)
		st.keyed = false
	}
	st.number[depth] = 0
	if b[i] == '{' {
		st.objects++
		st.number[depth] = st.objects
	}
}

// value notes the scalar b[start:end], within the container open at
// depth, the value of the member keyed when there is one (escaped: a
// string holding an escape), counting a string's folds.
func (st *scanState) value(b []byte, start, end, depth int, escaped bool, member func(Member)) {
	if st.folding && b[start] == '"' {
		st.folds += st.fold.count(b[start+1 : end-1])
	}
	if st.keyed {
		st.m.Start, st.m.End, st.m.ValueEscaped = start, end, escaped
		member(st.m)
		st.keyed = false
	}
}

// scan is Valid's pass over b, and Scan's when st is not nil (member:
// the Scan's, nil when st is).
func scan(b []byte, st *scanState, member func(Member)) int {
	var objects uint64 // bit d: the container at depth d+1 is an object
	depth := 0
	i := SkipSpace(b, 0)
	for {
		// a value at i
		if i >= len(b) {
			return invalid
		}
		start := i
		escaped := false
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth == validDepth {
				return tooDeep
			}
			if st != nil {
				st.open(b, i, depth, member)
			}
			if c == '{' {
				objects |= 1 << depth
			} else {
				objects &^= 1 << depth
			}
			depth++
			i = SkipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				if st != nil && st.indexing {
					st.ix.close(i+1, depth)
				}
				depth--
				i++
				break
			}
			if c == '{' {
				ks := i
				var ke int
				if i, ke, escaped = validKey(b, i); i < 0 {
					return invalid
				}
				if st != nil {
					st.key(b, ks, ke, escaped, depth)
				}
			}
			continue
		case c == '"':
			i, escaped = validString(b, i)
		case c == '-' || '0' <= c && c <= '9':
			i = validNumber(b, i)
		case c == 't':
			i = validLiteral(b, i, "true")
		case c == 'f':
			i = validLiteral(b, i, "false")
		case c == 'n':
			i = validLiteral(b, i, "null")
		default:
			return invalid
		}
		if i < 0 {
			return invalid
		}
		if st != nil {
			st.value(b, start, i, depth, escaped, member)
		}
		// after a value: the containers it ends, then the next member or
		// element
	after:
		for {
			i = SkipSpace(b, i)
			if depth == 0 {
				if i == len(b) {
					return scanned
				}
				return invalid
			}
			if i >= len(b) {
				return invalid
			}
			object := objects&(1<<(depth-1)) != 0
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
				if object {
					ks := i
					var ke int
					if i, ke, escaped = validKey(b, i); i < 0 {
						return invalid
					}
					if st != nil {
						st.key(b, ks, ke, escaped, depth)
					}
				}
				break after
			case '}', ']':
				if object != (b[i] == '}') {
					return invalid
				}
				if st != nil && st.indexing {
					st.ix.close(i+1, depth)
				}
				depth--
				i++
			default:
				return invalid
			}
		}
	}
}

// validKey reads a member's name and its colon at b[i]: it returns where
// the value starts (or -1), where the name ends (past its closing quote)
// and whether it holds an escape.
func validKey(b []byte, i int) (value, end int, escaped bool) {
	if i >= len(b) || b[i] != '"' {
		return -1, 0, false
	}
	if end, escaped = validString(b, i); end < 0 {
		return -1, 0, false
	}
	if i = SkipSpace(b, end); i >= len(b) || b[i] != ':' {
		return -1, 0, false
	}
	return SkipSpace(b, i+1), end, escaped
}

// validString reads the string at b[i] (its opening quote): the index after
// its closing quote, or -1, and whether it holds an escape.
func validString(b []byte, i int) (end int, escaped bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped
		case c < 0x20:
			return -1, escaped
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				return -1, escaped
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1, escaped
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1, escaped
					}
				}
				i += 4
			default:
				return -1, escaped
			}
		}
	}
	return -1, escaped
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
