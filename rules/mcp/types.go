package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Types is what a tool's inputSchema declares of the JSON type of its
// arguments, at every depth it declares one (properties, items,
// additionalProperties, anyOf/oneOf/allOf and local $refs followed). The
// policy judges each argument as sent; a tool reads it as its parameter's
// type, and some readers convert on the way: the MCP Python SDK parses a
// string holding JSON into the list or object its parameter declares
// (pre_parse_json, decoding the string's escapes), and pydantic's lax mode
// reads "false", "no" or 0 as the bool false and "12" as the integer 12. A
// rule on the value sent is then not a rule on the value the tool acts on,
// so an argument of a type the schema does not allow is refused
// (CheckTypes) instead. The zero Types (nil root) declares nothing.
type Types struct{ root *typeNode }

// kinds is a set of JSON types (typeString, ...); 0 is any.
type kinds uint8

const (
	typeString kinds = 1 << iota
	typeNumber
	typeBoolean
	typeNull
	typeArray
	typeObject
)

var typeNames = [...]struct {
	name string
	k    kinds
}{{"string", typeString}, {"number", typeNumber}, {"integer", typeNumber}, {"boolean", typeBoolean}, {"null", typeNull}, {"array", typeArray}, {"object", typeObject}}

// typeNode is one schema, compiled: the types it allows and what it says of
// the members and elements inside.
type typeNode struct {
	kinds kinds
	props map[string]*typeNode
	// patterns are patternProperties: a member whose name a pattern
	// matches is held to its schema (with props' too); addl is for the
	// members neither names
	patterns []pattern
	addl     *typeNode // additionalProperties, for members props and patterns do not name
	items    *typeNode
	prefix   []*typeNode // prefixItems (or items given as an array)
	anyOf    []*typeNode // anyOf and oneOf: the value is one of them
	allOf    []*typeNode
	// anything: the MCP Python SDK lists an unannotated parameter as
	// {"title": <its name>, "type": "string"} (WithJsonSchema) while
	// pydantic takes any value for it (Any): the type says string, the
	// tool reads whatever pre_parse_json made of the string
	anything bool
}

// pattern is one member of patternProperties: its regular expression (nil
// when RE2 cannot read it, which then matches every name: fail closed) and
// its schema.
type pattern struct {
	re *regexp.Regexp
	s  *typeNode
}

// maxSchemaNodes and maxSchemaDepth bound the schemas compiled for one
// tool: a schema past them is checked as far as it was compiled (the rest
// allows any type); maxSchemaHops bounds the schemas one value is checked
// against without descending into it (allOf, anyOf, $refs: a $ref to
// itself is a cycle), past which the call is refused as maxSchemaVisits.
const (
	maxSchemaNodes = 4096
	maxSchemaDepth = 64
	maxSchemaHops  = 64
	// maxSchemaVisits bounds the work of checking one call: alternatives
	// within alternatives are tried one by one, which a schema could make
	// exponential; past it the call is refused (fail closed).
	maxSchemaVisits = 1 << 16
)

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
	if n.kinds != 0 && s["nullable"] == true {
		n.kinds |= typeNull
	}
	if props, ok := s["properties"].(map[string]any); ok {
		n.props = make(map[string]*typeNode, len(props))
		for name, p := range props {
			// kept when it declares nothing (true): a member it names is
			// no additional property
			n.props[name] = c.compile(p, depth+1)
			if t := n.props[name]; t != nil && unannotated(p, name) {
				t.anything = true
			}
		}
	}
	if pp, ok := s["patternProperties"].(map[string]any); ok {
		for _, expr := range slices.Sorted(maps.Keys(pp)) {
			re, err := regexp.Compile(expr)
			if err != nil {
				re = nil
			}
			n.patterns = append(n.patterns, pattern{re: re, s: c.compile(pp[expr], depth+1)})
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

// kindOfRaw is the JSON type of a value as written (valid JSON).
func kindOfRaw(v json.RawMessage) kinds {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	switch v[0] {
	case '"':
		return typeString
	case 't', 'f':
		return typeBoolean
	case 'n':
		return typeNull
	case '[':
		return typeArray
	case '{':
		return typeObject
	}
	return typeNumber
}

func (k kinds) String() string {
	var names []string
	for _, t := range typeNames {
		if k&t.k != 0 && t.name != "integer" {
			names = append(names, t.name)
		}
	}
	return strings.Join(names, " or ")
}

// CheckTypes refuses a tools/call whose arguments hold a value of a JSON
// type the tool's inputSchema does not allow where it is (-32602,
// malformed_request, naming the argument): the tool's reader may convert it
// into another value than the one the policy judged (Types). Arguments the
// schema says nothing of pass. The arguments are read in place, by byte
// ranges, not decoded: a member given twice is judged as encoding/json
// reads it, by its last value (the policy's reading refuses it anyway:
// jsonrpc.PolicyValue).
func CheckTypes(c Call, t Types) rules.Verdict {
	if c.Method != MethodToolsCall || t.root == nil || len(c.Arguments) == 0 || kindOfRaw(c.Arguments) == typeNull {
		return rules.Verdict{} // no arguments ("arguments": null is none to the SDKs that accept it)
	}
	args := c.Arguments
	if !jsonrpc.Valid(args) {
		// never from the sidecar (it reads only valid JSON); the reader
		// below trusts its input to be
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("the arguments of tool %q are not JSON", c.Tool)}
	}
	args = args[jsonrpc.SkipSpace(args, 0):jsonrpc.ValueEnd(args, jsonrpc.SkipSpace(args, 0))]
	budget := maxSchemaVisits
	path, want, ok := t.root.check(args, 0, 0, &budget)
	if budget < 0 {
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("the arguments of tool %q could not be checked against its inputSchema within %d steps", c.Tool, maxSchemaVisits)}
	}
	if !ok {
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q is not of the type its inputSchema declares (%s): send it as that type", argPath(path), c.Tool, want)}
	}
	if name, held, found := t.root.jsonInString(args); found {
		return rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q is a string holding JSON (%s), which its inputSchema also allows and a tool may read the string as: send the %s itself, not a string holding it", argPath([]string{name}), c.Tool, held, held)}
	}
	return rules.Verdict{}
}

// jsonInString finds a member of the arguments object v sent as a string
// holding JSON (an array, an object or null) where the schema of that
// member allows that JSON too (S2): the MCP Python SDK parses such a string
// into the value it holds before validating (pre_parse_json: each argument
// whose parameter is not declared plainly as str, from mcp 1.x on), so the
// tool reads {"paths": "[\"..\u002fetc\"]"} under list[str] | str as the
// list ["../etc"], while a rule judged the string (escapes and all); and
// so it reads a string sent to a parameter without annotation, which it
// lists as a string (anything). Only
// members the root schema names are parsed so (the arguments model's
// fields); the string is taken as JSON when it is JSON or holds the
// literals Python's json module reads besides (NaN, Infinity), so no
// string it parses is missed. The check is that of the Python SDK's reading
// whatever the server: a string of JSON sent to a string-or-JSON parameter
// of another server is refused too.
func (n *typeNode) jsonInString(v []byte) (name string, held kinds, found bool) {
	if kindOfRaw(v) != typeObject {
		return "", 0, false
	}
	for i := jsonrpc.SkipSpace(v, 1); v[i] != '}'; {
		ks := i
		ke, _ := jsonrpc.StringEnd(v, ks)
		i = jsonrpc.SkipSpace(v, jsonrpc.SkipSpace(v, ke)+1) // past the colon
		end := jsonrpc.ValueEnd(v, i)
		if v[i] == '"' {
			name = decodedName(v[ks:ke])
			if s, named := n.property(name, 0); named && !givenAgain(v, end, v[ks:ke]) {
				str, _ := jsonrpc.String(v[i:end])
				if held = parsedAs(str); held != 0 && (s.anything || s.allowsKind(held)) {
					return name, held, true
				}
			}
		}
		if i = jsonrpc.SkipSpace(v, end); v[i] == ',' {
			i = jsonrpc.SkipSpace(v, i+1)
		}
	}
	return "", 0, false
}

// unannotated reports whether p, the schema of property name, is the one
// the MCP Python SDK lists for a parameter without annotation: its title is
// the name as written (pydantic's own titles are title-cased: "Paths" for
// paths), its type string, and nothing else but a default.
func unannotated(p any, name string) bool {
	m, ok := p.(map[string]any)
	if !ok || m["title"] != name || m["type"] != "string" {
		return false
	}
	for k := range m {
		if k != "title" && k != "type" && k != "default" {
			return false
		}
	}
	return true
}

// property is the schema n, or a schema n is held to as a whole (allOf, a
// $ref), gives the member name, and whether one names it.
func (n *typeNode) property(name string, hops int) (*typeNode, bool) {
	if n == nil || hops > maxSchemaHops {
		return nil, false
	}
	if s, ok := n.props[name]; ok {
		return s, true
	}
	for _, a := range n.allOf {
		if s, ok := a.property(name, hops+1); ok {
			return s, true
		}
	}
	return nil, false
}

// parsedAs is what Python's json.loads reads s as when it is an array, an
// object or null (0 otherwise: not JSON, or a string, number or bool, which
// pre_parse_json leaves as sent). It errs towards JSON: a string holding
// NaN or Infinity, which encoding/json refuses, is taken as JSON.
func parsedAs(s string) kinds {
	t := strings.Trim(s, " \t\n\r") // json's whitespace, as Python's json reads it
	switch {
	case t == "null":
		return typeNull
	case t == "" || t[0] != '[' && t[0] != '{':
		return 0
	case !json.Valid([]byte(t)) && !strings.Contains(t, "NaN") && !strings.Contains(t, "Infinity"):
		return 0
	case t[0] == '[':
		return typeArray
	}
	return typeObject
}

// allowsKind reports whether n allows some value of kind k where it is:
// the emptiest such value ([], {}, null) passes its check.
func (n *typeNode) allowsKind(k kinds) bool {
	v := "null"
	switch k {
	case typeArray:
		v = "[]"
	case typeObject:
		v = "{}"
	}
	budget := maxSchemaVisits
	_, _, ok := n.check([]byte(v), 1, 0, &budget)
	return ok && budget >= 0
}

// argPath spells an argument's path for a message: ["a",0,"b"] as a[0].b.
func argPath(path []string) string {
	if len(path) == 0 {
		return "params.arguments"
	}
	var b strings.Builder
	for i, p := range path {
		if strings.HasPrefix(p, "[") {
			b.WriteString(p)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Quote(p))
	}
	return b.String()
}

// check reports whether v (one valid JSON value, no space around it), at
// depth in the arguments, is of a type n allows, at every depth n declares
// one; when not, the path to the value from v (built only then) and the
// types n allows there. hops counts the schemas v was checked against so
// far.
func (n *typeNode) check(v []byte, depth, hops int, budget *int) ([]string, kinds, bool) {
	if n == nil {
		return nil, 0, true
	}
	if hops > maxSchemaHops {
		*budget = -1 // a cycle of $refs, or a chain past the bound
	}
	if *budget--; *budget < 0 {
		return nil, 0, false // CheckTypes refuses the whole call
	}
	if depth > jsonrpc.MaxPolicyDepth {
		return nil, n.kinds, false // deeper than arguments may be (Parse refuses them first)
	}
	k := kindOfRaw(v)
	if n.kinds != 0 && n.kinds&k == 0 {
		return nil, n.kinds, false
	}
	for _, a := range n.allOf {
		if p, want, ok := a.check(v, depth, hops+1, budget); !ok {
			return p, want, false
		}
	}
	if len(n.anyOf) > 0 {
		var firstPath []string
		var firstWant kinds
		matched := false
		for i, a := range n.anyOf {
			p, want, ok := a.check(v, depth, hops+1, budget)
			if ok {
				matched = true
				break
			}
			if i == 0 {
				firstPath, firstWant = p, want
			}
		}
		if !matched {
			if len(firstPath) == 0 {
				// refused at this value: name every type the alternatives allow
				firstWant = 0
				for _, a := range n.anyOf {
					firstWant |= a.kinds
				}
			}
			return firstPath, firstWant, false
		}
	}
	switch k {
	case typeObject:
		if n.props == nil && n.addl == nil && n.patterns == nil {
			return nil, 0, true
		}
		for i := jsonrpc.SkipSpace(v, 1); v[i] != '}'; {
			ks := i
			ke, _ := jsonrpc.StringEnd(v, ks)
			i = jsonrpc.SkipSpace(v, jsonrpc.SkipSpace(v, ke)+1) // past the colon
			end := jsonrpc.ValueEnd(v, i)
			name := v[ks+1 : ke-1]
			if !plain(name) {
				name = []byte(decodedName(v[ks:ke]))
			}
			var room [4]*typeNode
			for _, s := range n.memberSchemas(room[:0], name) {
				if p, want, ok := s.check(v[i:end], depth+1, 0, budget); !ok && (*budget < 0 || !givenAgain(v, end, v[ks:ke])) {
					return append([]string{decodedName(v[ks:ke])}, p...), want, false
				}
			}
			if i = jsonrpc.SkipSpace(v, end); v[i] == ',' {
				i = jsonrpc.SkipSpace(v, i+1)
			}
		}
	case typeArray:
		if n.items == nil && n.prefix == nil {
			return nil, 0, true
		}
		for e, i := 0, jsonrpc.SkipSpace(v, 1); v[i] != ']'; e++ {
			end := jsonrpc.ValueEnd(v, i)
			s := n.items
			if e < len(n.prefix) {
				s = n.prefix[e]
			}
			if p, want, ok := s.check(v[i:end], depth+1, 0, budget); !ok {
				return append([]string{"[" + strconv.Itoa(e) + "]"}, p...), want, false
			}
			if i = jsonrpc.SkipSpace(v, end); v[i] == ',' {
				i = jsonrpc.SkipSpace(v, i+1)
			}
		}
	}
	return nil, 0, true
}

// memberSchemas appends to room the schemas n holds a member named name
// (decoded) to: its property's, each pattern's that matches the name, and
// additionalProperties' when neither names it. A pattern RE2 cannot read
// matches every name; so does every pattern for a name that matches none
// of them: the tool's reader (pydantic's regex engines, ECMA-262) may
// match a name RE2 does not (\d, \w and $ read otherwise), and a value
// checked against no pattern would pass unchecked. A name matching no
// pattern is refused by pydantic anyway, so this refuses valid calls only
// under schemas whose patterns declare different types and that also
// allow other names.
func (n *typeNode) memberSchemas(room []*typeNode, name []byte) []*typeNode {
	s, named := n.props[string(name)] // no allocation: a map look-up's key
	if named {
		room = append(room, s)
	}
	matched := false
	for _, p := range n.patterns {
		if p.re == nil || p.re.Match(name) {
			room, matched = append(room, p.s), true
		}
	}
	if !named && !matched {
		for _, p := range n.patterns {
			room = append(room, p.s)
		}
		room = append(room, n.addl)
	}
	return room
}

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

// givenAgain reports whether the object v, after index from, has another
// member named as lit (decoded): encoding/json reads a name given twice by
// its last value, so only the last is judged.
func givenAgain(v []byte, from int, lit []byte) bool {
	name := decodedName(lit)
	for i := jsonrpc.SkipSpace(v, from); v[i] == ','; {
		i = jsonrpc.SkipSpace(v, i+1)
		ke, _ := jsonrpc.StringEnd(v, i)
		if decodedName(v[i:ke]) == name {
			return true
		}
		i = jsonrpc.SkipSpace(v, jsonrpc.SkipSpace(v, ke)+1)
		i = jsonrpc.ValueEnd(v, i)
		i = jsonrpc.SkipSpace(v, i)
	}
	return false
}
