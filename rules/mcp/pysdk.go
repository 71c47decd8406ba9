package mcp

import (
	"bytes"
	"encoding/json"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// What the MCP Python SDK does to top-level arguments before validating
// them (pre_parse_json), held against the schema.

// jsonString holds the top-level arguments args to what the MCP Python SDK
// does before validating them (pre_parse_json): a string given for a
// parameter not annotated str is parsed as JSON, and replaced by the
// array, object or null it holds. A string that holds one as Python reads
// JSON (holdsJSONText) for an argument the schema names with anything but
// a string alone is refused: the policy would judge the string, the tool
// act on what it holds. It reports the first such
// argument's name.
func (n *typeNode) jsonString(args []byte) (string, bool) {
	if kindOfRaw(args) != typeObject || n.props == nil {
		return "", true
	}
	for w := walkMembers(args); ; {
		lit, m, more := w.next()
		if !more {
			return "", true
		}
		if m[0] == '"' && holdsJSON(m) {
			name := decodedName(lit)
			if s, named := n.props[name]; named && !s.stringAlone() {
				return name, false
			}
		}
	}
}

// stringAlone reports whether n allows strings only, itself (no union,
// $ref or allOf that could widen what the parameter is annotated as).
func (n *typeNode) stringAlone() bool {
	return n != nil && n.kinds == typeString && n.anyOf == nil && n.allOf == nil && !n.untyped
}

// holdsJSON reports whether the string literal lit may decode to JSON text
// Python's json.loads reads as an array, an object or null.
func holdsJSON(lit []byte) bool {
	if bytes.IndexByte(lit, '\\') < 0 {
		return holdsJSONText(lit[1 : len(lit)-1])
	}
	s, _ := jsonrpc.String(lit)
	return holdsJSONText([]byte(s))
}

// holdsJSONText reports whether Python's json.loads reads s as an array,
// an object or null: what encoding/json reads as JSON, and text holding
// NaN or Infinity besides (which Python reads and Go does not), so that no
// string Python parses is missed; a string that only starts like JSON
// ("[WIP] fix") is left alone, as pre_parse_json leaves it.
func holdsJSONText(s []byte) bool {
	t := bytes.Trim(s, " \t\r\n")
	switch {
	case string(t) == "null":
		return true
	case len(t) == 0 || t[0] != '[' && t[0] != '{':
		return false
	}
	return json.Valid(t) || bytes.Contains(t, []byte("NaN")) || bytes.Contains(t, []byte("Infinity"))
}
