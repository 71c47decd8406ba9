package mcp

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// The compilation of a tool's inputSchema into the Types CheckTypes holds
// arguments to.

// ArgumentTypes compiles a tool's inputSchema (a schema that does not decode,
// or declares no type anywhere, gives the zero Types).
func ArgumentTypes(inputSchema []byte) Types {
	if len(inputSchema) == 0 || !bytes.Contains(inputSchema, []byte(`"type"`)) && !bytes.Contains(inputSchema, []byte(`"enum"`)) && !bytes.Contains(inputSchema, []byte(`"const"`)) {
		return Types{}
	}
	var root any
	if json.Unmarshal(inputSchema, &root) != nil {
		return Types{}
	}
	c := &schemaCompiler{root: root, refs: map[string]*typeNode{}}
	return Types{root: c.compile(root, 0)}
}

type schemaCompiler struct {
	root  any
	refs  map[string]*typeNode // a $ref compiled once, so that recursive schemas end
	nodes int
}

func (c *schemaCompiler) compile(v any, depth int) *typeNode {
	s, ok := v.(map[string]any)
	if !ok || c.nodes >= maxSchemaNodes || depth > maxSchemaDepth {
		return nil // true, false or not a schema: no type declared here
	}
	c.nodes++
	n := &typeNode{}
	if ref, ok := s["$ref"].(string); ok {
		if target, ok := c.refs[ref]; ok {
			n.allOf = append(n.allOf, target)
		} else if at, ok := c.resolve(ref); ok {
			t := &typeNode{}
			c.refs[ref] = t
			if got := c.compile(at, depth+1); got != nil {
				*t = *got
			}
			n.allOf = append(n.allOf, t)
		}
	}
	switch t := s["type"].(type) {
	case string:
		n.kinds = kindNamed(t)
		n.integer = t == "integer"
	case []any:
		for _, e := range t {
			if name, ok := e.(string); ok {
				n.kinds |= kindNamed(name)
			}
		}
	}
	if n.kinds == 0 {
		// enum and const alone say the types too
		if vs, ok := s["enum"].([]any); ok {
			for _, e := range vs {
				n.kinds |= kindOf(e)
			}
		} else if e, ok := s["const"]; ok {
			n.kinds = kindOf(e)
		}
	}
	n.plain = n.kinds&(typeArray|typeObject) == 0 && onlyNotes(s)
	if mt, ok := s["contentMediaType"].(string); ok && jsonMediaType(mt) {
		n.jsonText = true
		_, n.encoded = s["contentEncoding"]
		n.content = c.compile(s["contentSchema"], depth+1)
	}
	n.strs = stringValues(s)
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				n.required = append(n.required, name)
			}
		}
	}
	if n.kinds != 0 && s["nullable"] == true {
		n.kinds |= typeNull
	}
	if props, ok := s["properties"].(map[string]any); ok {
		n.props = make(map[string]*typeNode, len(props))
		n.spellings = make(map[string][]string, len(props))
		for name, p := range props {
			sp := spelling(name)
			n.spellings[sp] = append(n.spellings[sp], name)
			if t := c.compile(p, depth+1); t != nil {
				t.untyped = untypedParameter(name, p)
				n.props[name] = t
			}
		}
	}
	if pats, ok := s["patternProperties"].(map[string]any); ok {
		for pat, p := range pats {
			if t := c.compile(p, depth+1); t != nil {
				n.patterns = append(n.patterns, patternNode{re: wideRegexp(pat), n: t})
			}
		}
	}
	n.addl = c.compile(s["additionalProperties"], depth+1)
	switch items := s["items"].(type) {
	case map[string]any:
		n.items = c.compile(items, depth+1)
	case []any:
		n.prefix = c.compileAll(items, depth+1)
		n.items = c.compile(s["additionalItems"], depth+1)
	}
	if pre, ok := s["prefixItems"].([]any); ok {
		n.prefix = c.compileAll(pre, depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok {
			all := c.compileAll(alts, depth+1)
			for _, a := range all {
				if a == nil {
					all = nil // an alternative allowing anything: the whole allows anything
					break
				}
			}
			if all != nil {
				n.allOf = append(n.allOf, &typeNode{anyOf: all})
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, a := range c.compileAll(all, depth+1) {
			if a != nil {
				n.allOf = append(n.allOf, a)
			}
		}
	}
	return n
}

func (c *schemaCompiler) compileAll(vs []any, depth int) []*typeNode {
	out := make([]*typeNode, len(vs))
	for i, v := range vs {
		out[i] = c.compile(v, depth)
	}
	return out
}

// resolve finds a local $ref ("#", "#/$defs/Name", any JSON pointer into
// the schema, "#name" for a $anchor); a remote one is not followed.
func (c *schemaCompiler) resolve(ref string) (any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	at := c.root
	if ptr == "" {
		return at, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return anchored(c.root, ptr, 0) // "#name": the schema whose $anchor is name
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := at.(type) {
		case map[string]any:
			if at, ok = v[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			at = v[i]
		default:
			return nil, false
		}
	}
	return at, true
}

// anchored finds the schema within v whose $anchor is name.
func anchored(v any, name string, depth int) (any, bool) {
	if depth > maxSchemaDepth {
		return nil, false
	}
	switch v := v.(type) {
	case map[string]any:
		if a, ok := v["$anchor"].(string); ok && a == name {
			return v, true
		}
		for _, e := range v {
			if at, ok := anchored(e, name, depth+1); ok {
				return at, true
			}
		}
	case []any:
		for _, e := range v {
			if at, ok := anchored(e, name, depth+1); ok {
				return at, true
			}
		}
	}
	return nil, false
}

func kindNamed(name string) kinds {
	for _, t := range typeNames {
		if t.name == name {
			return t.k
		}
	}
	return 0
}

// kindOf is the JSON type of a value encoding/json decoded.
func kindOf(v any) kinds {
	switch v.(type) {
	case string:
		return typeString
	case float64:
		return typeNumber
	case bool:
		return typeBoolean
	case nil:
		return typeNull
	case []any:
		return typeArray
	case map[string]any:
		return typeObject
	}
	return 0
}

// notes are the keywords that say nothing a validator checks.
var notes = map[string]bool{"type": true, "title": true, "description": true, "default": true, "examples": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true, "nullable": true}

// onlyNotes reports whether schema s says nothing but its type and notes.
func onlyNotes(s map[string]any) bool {
	for k := range s {
		if !notes[k] {
			return false
		}
	}
	return true
}

// stringValues is what const or enum allow when every value is a string,
// else nil.
func stringValues(s map[string]any) []string {
	var vs []any
	if e, ok := s["enum"].([]any); ok {
		vs = e
	} else if c, ok := s["const"]; ok {
		vs = []any{c}
	} else {
		return nil
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		str, ok := v.(string)
		if !ok {
			return nil
		}
		out = append(out, str)
	}
	return out
}

// wideRegexp compiles a patternProperties pattern (ECMA-262) so that it
// matches at least the names the server's engine matches: \d, \w and \s
// as Unicode classes (Python's re and Rust's regex read them so, Go's
// regexp as ASCII), $ also before a final newline (Python's re), \uXXXX
// as Go spells it. A pattern Go cannot compile gives nil: it matches every
// name (fail closed: the member is held to its schema).
func wideRegexp(pat string) *regexp.Regexp {
	var b strings.Builder
	class := false
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch {
		case c == '\\' && i+1 < len(pat):
			i++
			switch d := pat[i]; {
			case d == 'd' && class:
				b.WriteString(`\p{Nd}`)
			case d == 'd':
				b.WriteString(`[\p{Nd}]`)
			case d == 'w' && class:
				b.WriteString(`\p{L}\p{N}\p{M}\p{Pc}`)
			case d == 'w':
				b.WriteString(`[\p{L}\p{N}\p{M}\p{Pc}]`)
			case d == 's' && class:
				b.WriteString(`\s\p{Z}\x{0b}\x{85}\x{feff}`)
			case d == 's':
				b.WriteString(`[\s\p{Z}\x{0b}\x{85}\x{feff}]`)
			case d == 'u' && i+4 < len(pat):
				b.WriteString(`\x{` + pat[i+1:i+5] + `}`)
				i += 4
			default:
				b.WriteByte('\\')
				b.WriteByte(d)
			}
		case c == '[' && !class:
			class = true
			b.WriteByte(c)
			if i+1 < len(pat) && pat[i+1] == ']' { // "[]...]": a literal ] first
				i++
				b.WriteString(`\]`)
			}
		case c == ']' && class:
			class = false
			b.WriteByte(c)
		case c == '$' && !class:
			b.WriteString(`(?:\n?\z)`)
		default:
			b.WriteByte(c)
		}
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}

// jsonMediaType reports whether a contentMediaType names JSON
// (application/json, any +json type; parameters and case aside).
func jsonMediaType(mt string) bool {
	mt, _, _ = strings.Cut(mt, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// untypedParameter reports whether p is the schema the MCP Python SDK
// (2.3.0, func_metadata) lists for a parameter without an annotation,
// {"title": <its name>, "type": "string"}, which it reads as Any (a string
// of JSON parsed first); pydantic titles an annotated str parameter from
// its name in title case ("my_path" as "My Path"), so a parameter whose
// name is already its title (Path) is taken as untyped too. A default
// (def read(paths, mode="r")) is listed beside them.
func untypedParameter(name string, p any) bool {
	s, ok := p.(map[string]any)
	if !ok || s["title"] != name || s["type"] != "string" {
		return false
	}
	_, dflt := s["default"]
	return len(s) == 2 || len(s) == 3 && dflt
}
