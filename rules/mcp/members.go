package mcp

import (
	"unicode/utf8"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// One walk over a JSON object's members, in the bytes as sent.

// plain reports whether a name's bytes (between its quotes) are what it
// decodes to: no escape, no control character, valid UTF-8.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

// decodedName is the name the literal lit spells, decoded as
// encoding/json decodes a member name (invalid UTF-8 as U+FFFD).
func decodedName(lit []byte) string {
	s, _ := jsonrpc.String(lit)
	return s
}

// has reports whether the object w walks has a member named name (as
// decoded) from where w stands: walkMembers(v).has is any member, a copy
// of a walk after next has the ones after it (a name given again).
func (w memberWalk) has(name string) bool {
	for {
		lit, _, more := w.next()
		if !more {
			return false
		}
		if decodedName(lit) == name {
			return true
		}
	}
}

// memberWalk walks the members of a valid JSON object (jsonrpc.Valid's),
// in order, without decoding them: the one walk of an object's members
// here. A copy walks on from where the original stands.
type memberWalk struct {
	v []byte
	i int // the next member's name, or the object's closing brace
}

// walkMembers is a walk of the object v's members from its first.
func walkMembers(v []byte) memberWalk { return memberWalk{v: v, i: jsonrpc.SkipSpace(v, 1)} }

// next returns the next member's name literal (its quotes included) and
// value, and false past the last.
func (w *memberWalk) next() (lit, m []byte, more bool) {
	v, ks := w.v, w.i
	if v[ks] != '"' {
		return nil, nil, false
	}
	ke, _ := jsonrpc.StringEnd(v, ks)
	i := jsonrpc.SkipSpace(v, jsonrpc.SkipSpace(v, ke)+1) // past the colon
	end := jsonrpc.ValueEnd(v, i)
	if w.i = jsonrpc.SkipSpace(v, end); v[w.i] == ',' {
		w.i = jsonrpc.SkipSpace(v, w.i+1)
	}
	return v[ks:ke], v[i:end], true
}

// spelling is the name a member is read under by every reader of tool
// arguments Warden knows: pydantic models with populate_by_name (the MCP
// Python SDK's style, alias_generator=to_camel) read a field's Python
// name (dry_run) beside the alias the schema lists (dryRun), and
// AliasChoices each of its aliases though the schema lists the first;
// case-insensitive decoders (encoding/json) any case. Two names with one
// spelling are one member to some reader (jsonrpc.Misspells' relation).
func spelling(name string) string { return jsonrpc.Fold(jsonrpc.Unscored(name)) }
