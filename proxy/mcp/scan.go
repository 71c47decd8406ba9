package mcp

import (
	"bytes"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// span is one string member of interest found in a JSON message: its key,
// the object that holds it (numbered in order of appearance), that object's
// depth (1 for the message itself) and the value's bytes without quotes.
type span struct {
	key        string
	obj, depth int
	start, end int // b[start:end] is the value, between its quotes
}

// ownMembers are the message's own members scanStrings reports (start and
// end: the value's, quotes included; end -1 for an object or an array).
var ownMembers = [...]string{"id", "result", "error", "method"}

// scanStrings finds, in one pass and without decoding, every member named
// one of keys whose value is a string, on the pass that checks b is JSON
// (jsonrpc.Scan: valid reports jsonrpc.Valid's answer, but for a message
// nested over 64 deep, which is not valid here) and counts the spellings
// of fold in its strings (jsonrpc.CountFold's count). readable is false
// when the message cannot be read this way (not JSON, not an object, an
// escape in a key or in a wanted value, a key that folds like a wanted one
// or is not ASCII); callers then take the reading path. It never reads a
// string's content as structure, so a "taskId" inside a text is not a
// member. The spans are appended to dst (a caller's buffer on its stack).
// FuzzScanStrings holds it to the three passes it replaced (Valid,
// CountFold, and a scan of the spans).
func scanStrings(dst []span, b []byte, fold string, keys ...string) (spans []span, folds int, valid, readable bool) {
	i := jsonrpc.SkipSpace(b, 0)
	readable = i < len(b) && b[i] == '{'
	spans = dst[:0]
	folds, valid = jsonrpc.Scan(b, fold, func(m jsonrpc.Member) {
		if !readable {
			return
		}
		if m.Escaped || misspells(m.Name, m.Depth == 1, keys) {
			// "task\u0049d" is taskId to a decoder, "TaskId" to a reader
			// matching names without case
			readable = false
			return
		}
		if m.Depth == 1 {
			// The message's own members: where they are, for the id and
			// the kind of message.
			for _, own := range ownMembers {
				if string(m.Name) == own {
					spans = append(spans, span{key: own, obj: m.Object, depth: 1, start: m.Start, end: m.End})
				}
			}
		}
		for _, k := range keys {
			if string(m.Name) != k || m.End < 0 || b[m.Start] != '"' {
				continue
			}
			if m.ValueEscaped {
				readable = false
				return
			}
			spans = append(spans, span{key: k, obj: m.Object, depth: m.Depth, start: m.Start + 1, end: m.End - 1})
		}
	})
	if !readable || !valid {
		return nil, folds, valid, false
	}
	return spans, folds, valid, true
}

// misspells reports whether a key may be read as one of keys (or, at the
// top, one of the message's own members) without being it: it folds like
// one (jsonrpc.Misspells), or it is not ASCII (the read path then compares it
// folded).
func misspells(key []byte, top bool, keys []string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return true
		}
	}
	for _, k := range keys {
		if jsonrpc.Misspells(key, k) {
			return true
		}
	}
	if top {
		for _, k := range ownMembers {
			if jsonrpc.Misspells(key, k) {
				return true
			}
		}
	}
	return false
}

// repeated reports whether two spans are one member of one object given
// twice: readers take either, the read path refuses it.
func repeated(spans []span) bool {
	if len(spans) > 16 {
		type at struct {
			key string
			obj int
		}
		seen := make(map[at]bool, len(spans))
		for _, s := range spans {
			if seen[at{s.key, s.obj}] {
				return true
			}
			seen[at{s.key, s.obj}] = true
		}
		return false
	}
	for j := range spans {
		for k := range j {
			if spans[k].key == spans[j].key && spans[k].obj == spans[j].obj {
				return true
			}
		}
	}
	return false
}

// scalarEnd returns the end of a string, number or literal value starting
// at i (quotes included), or -1 for an object or array (its presence is what
// matters) and for a value that does not end.
func scalarEnd(b []byte, i int) int {
	if i < len(b) && (b[i] == '{' || b[i] == '[') {
		return -1
	}
	return jsonrpc.ValueEnd(b, i)
}

// splice replaces spans of b with the given strings (spans in order).
func splice(b []byte, spans []span, with []string) []byte {
	out := make([]byte, 0, len(b)+64*len(spans))
	last := 0
	for k, s := range spans {
		out = append(out, b[last:s.start]...)
		out = append(out, with[k]...)
		last = s.end
	}
	return append(out, b[last:]...)
}

// head is what the first bytes of a message show of its own members: the
// method (hasMethod for any method member), and the id's raw value when it
// came whole.
type head struct {
	method    string
	hasMethod bool
	id        []byte
}

// scanHead reads the top-level members of a message that may be cut short
// (the part of an oversized message Warden held), without decoding. It never
// reads a string's content as structure; it stops at the first thing it
// cannot read (an escape in a key).
func scanHead(b []byte) head {
	var h head
	i := jsonrpc.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return h
	}
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '{', '[':
			depth++
			i++
		case '}', ']':
			depth--
			i++
			if depth == 0 {
				return h
			}
		case '"':
			end, escaped := jsonrpc.StringEnd(b, i)
			if end < 0 {
				return h
			}
			key := b[i+1 : end-1]
			i = jsonrpc.SkipSpace(b, end)
			if depth != 1 || i >= len(b) || b[i] != ':' {
				continue // a value, or a member of a nested object
			}
			if escaped && bytes.IndexByte(key, '\\') >= 0 {
				return h
			}
			i = jsonrpc.SkipSpace(b, i+1)
			switch string(key) {
			case "method":
				h.hasMethod = true
				if e := scalarEnd(b, i); e > i+1 && e <= len(b) && b[i] == '"' {
					h.method = string(b[i+1 : e-1])
				}
			case "id":
				if e := scalarEnd(b, i); e > i && e < len(b) {
					h.id = b[i:e]
				}
			}
		default:
			i++
		}
	}
	return h
}
