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
	switch _, res := scan(b, nil, nil); res {
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
	var f *foldCounter
	if fold != "" {
		f = new(foldCounter)
		f.init(fold)
	}
	folds, res := scan(b, f, member)
	return folds, res == scanned
}

// The outcomes of a scan.
const (
	invalid = iota
	scanned
	tooDeep
)

// scan is Valid's pass over b, calling member for each member (nil: none)
// and counting fold's spellings in b's strings (nil: none).
func scan(b []byte, fold *foldCounter, member func(Member)) (folds, res int) {
	var objects uint64           // bit d: the container at depth d+1 is an object
	var number [validDepth]int32 // the number of the object at depth d+1 (0: an array)
	var m Member
	count, depth := 0, 0 // objects begun, containers open
	keyed := false       // a member's name was read: the value at i is its value
	i := SkipSpace(b, 0)
	for {
		// a value at i
		if i >= len(b) {
			return folds, invalid
		}
		start := i
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth == validDepth {
				return folds, tooDeep
			}
			if keyed && member != nil {
				m.Start, m.End, m.ValueEscaped = i, -1, false
				member(m)
			}
			keyed = false
			if c == '{' {
				objects |= 1 << depth
				count++
				number[depth] = int32(count)
			} else {
				objects &^= 1 << depth
				number[depth] = 0
			}
			depth++
			i = SkipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				depth--
				i++
				break
			}
			if c == '{' {
				m.Object, m.Depth = int(number[depth-1]), depth
				if i = scanKey(b, i, fold, &folds, &m); i < 0 {
					return folds, invalid
				}
				keyed = true
			}
			continue
		case c == '"':
			var escaped bool
			i, escaped = validString(b, i)
			if i >= 0 && fold != nil {
				folds += fold.count(b[start+1 : i-1])
			}
			m.ValueEscaped = escaped
		case c == '-' || '0' <= c && c <= '9':
			i = validNumber(b, i)
			m.ValueEscaped = false
		case c == 't':
			i = validLiteral(b, i, "true")
			m.ValueEscaped = false
		case c == 'f':
			i = validLiteral(b, i, "false")
			m.ValueEscaped = false
		case c == 'n':
			i = validLiteral(b, i, "null")
			m.ValueEscaped = false
		default:
			return folds, invalid
		}
		if i < 0 {
			return folds, invalid
		}
		if keyed && member != nil {
			m.Start, m.End = start, i
			member(m)
		}
		keyed = false
		// after a value: the containers it ends, then the next member or
		// element
	after:
		for {
			i = SkipSpace(b, i)
			if depth == 0 {
				if i == len(b) {
					return folds, scanned
				}
				return folds, invalid
			}
			if i >= len(b) {
				return folds, invalid
			}
			object := objects&(1<<(depth-1)) != 0
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
				if object {
					m.Object, m.Depth = int(number[depth-1]), depth
					if i = scanKey(b, i, fold, &folds, &m); i < 0 {
						return folds, invalid
					}
					keyed = true
				}
				break after
			case '}', ']':
				if object != (b[i] == '}') {
					return folds, invalid
				}
				depth--
				i++
			default:
				return folds, invalid
			}
		}
	}
}

// scanKey reads a member's name and its colon at b[i] into m, adding the
// name's spellings of fold to folds; it returns where the value starts, or
// -1.
func scanKey(b []byte, i int, fold *foldCounter, folds *int, m *Member) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	start := i
	if i, m.Escaped = validString(b, i); i < 0 {
		return -1
	}
	m.Name = b[start+1 : i-1]
	if fold != nil {
		*folds += fold.count(m.Name)
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
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
