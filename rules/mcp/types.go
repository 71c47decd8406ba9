package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
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
type kinds uint16

const (
	typeString kinds = 1 << iota
	typeNumber
	typeBoolean
	typeNull
	typeArray
	typeObject
	// ambiguous is no type: a value more than one alternative of a union
	// may take, one of them after converting it (CheckTypes' refusal)
	ambiguous
	// misspelt is no type: a member the schema does not declare whose
	// name reads as one it declares (CheckTypes' refusal, spellings)
	misspelt
	// jsonContent is no type: a string the schema says holds JSON, which
	// its reader parses (CheckTypes' refusal, typeNode.jsonText)
	jsonContent

	// unread are the refusals of what a reader reads that the policy
	// never judged (T1, T2), named as such whatever the union
	unread = misspelt | jsonContent
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
	// spellings are the names properties declares, keyed by their
	// spelling (spelling): a member not declared whose spelling is one of
	// them is read as that property by some readers
	spellings map[string][]string
	// patterns is patternProperties: a member whose name one matches is
	// held to its schema (to every one that matches), and not to addl
	patterns []patternNode
	addl     *typeNode // additionalProperties, for members props and patterns do not name
	items    *typeNode
	prefix   []*typeNode // prefixItems (or items given as an array)
	anyOf    []*typeNode // anyOf and oneOf: the value is one of them
	allOf    []*typeNode

	// What tells a union's alternatives apart (refuses): the members an
	// object must have, the strings a value must be (const or enum of
	// strings only; nil when not given that way).
	required []string
	strs     []string
	// plain: a schema that says only its scalar types, or nothing, and
	// notes (title, description, default), so a reader validating
	// strictly takes a value of those types as it is (integer: a number
	// written without fraction or exponent).
	plain   bool
	integer bool
	// untyped: a parameter the MCP Python SDK lists as a string but
	// reads as anything (untypedParameter)
	untyped bool
	// jsonText: a string the schema says holds JSON (contentMediaType
	// application/json, pydantic's Json[T]): its reader parses it and
	// acts on the value it holds, so Warden reads it too (readContent)
	// and the policy judges that value; content is its contentSchema (nil:
	// any JSON), encoded a contentEncoding beside it (base64: no JSON
	// text Warden could read, refused)
	jsonText bool
	encoded  bool
	content  *typeNode
}

// patternNode is one patternProperties entry; a nil re (a pattern Go's
// regexp does not compile, as ECMA-262's lookarounds) matches every name.
type patternNode struct {
	re *regexp.Regexp
	n  *typeNode
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
//
// A string the schema says holds JSON (pydantic's Json[T]) is read as the
// tool's parser reads it, when Warden reads it exactly so, and refused
// when not (typeNode.readContent); the value it holds is held to the
// contentSchema as any argument to its schema. The policy judges that
// value, not the string: CheckTypes returns the arguments with each such
// string replaced by the JSON text it holds (nil when none was read), which
// the policy's input is read from (PolicyArguments) instead of the
// arguments as sent.
func CheckTypes(c Call, t Types) (json.RawMessage, rules.Verdict) {
	if c.Method != MethodToolsCall || t.root == nil || len(c.Arguments) == 0 || kindOfRaw(c.Arguments) == typeNull {
		return nil, rules.Verdict{} // no arguments ("arguments": null is none to the SDKs that accept it)
	}
	args := c.Arguments
	if !jsonrpc.Valid(args) {
		// never from the sidecar (it reads only valid JSON); the reader
		// below trusts its input to be
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("the arguments of tool %q are not JSON", c.Tool)}
	}
	args = args[jsonrpc.SkipSpace(args, 0):jsonrpc.ValueEnd(args, jsonrpc.SkipSpace(args, 0))]
	if name, ok := t.root.jsonString(args); !ok {
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q is a string holding JSON (an array, an object or null), which the tool's reader may parse into that value, and its inputSchema does not declare it a string alone: send the value itself", argPath([]string{name}), c.Tool)}
	}
	ck := &checker{budget: maxSchemaVisits, base: c.Arguments}
	path, want, ok := t.root.check(args, 0, 0, ck)
	if ck.budget < 0 {
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("the arguments of tool %q could not be checked against its inputSchema within %d steps", c.Tool, maxSchemaVisits)}
	}
	if !ok && want == jsonContent {
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q is a string its inputSchema says holds JSON (contentMediaType), which the tool parses and acts on, and Warden cannot read it exactly as the tool's parser would (%s): send strict JSON in it (one value, each member name once, no NaN or Infinity, numbers a 64-bit float holds exactly, no lone surrogate escape, within %d levels)", argPath(path), c.Tool, ck.why, jsonrpc.MaxPolicyDepth)}
	}
	if !ok && want == misspelt {
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q is not a member its inputSchema declares but reads as one it declares in another spelling (another case, or underscores: a pydantic model with populate_by_name reads a field's Python name beside its alias, a case-insensitive decoder any case): send it under the declared name", argPath(path), c.Tool)}
	}
	if !ok && want == ambiguous {
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q may be read as more than one alternative of its inputSchema's union, one after converting its type: send it so that one alternative alone takes it", argPath(path), c.Tool)}
	}
	if !ok {
		return nil, rules.Verdict{Code: rules.CodeInvalidParams, Reason: rules.ReasonMalformedRequest,
			Detail: fmt.Sprintf("argument %s of tool %q is not of the type its inputSchema declares (%s): send it as that type", argPath(path), c.Tool, want)}
	}
	if len(ck.read) == 0 {
		return nil, rules.Verdict{}
	}
	return ck.spliced(), rules.Verdict{}
}

// checker is one call's check: the schemas it may still visit, the text
// the values checked are read from, and the strings of JSON read in it.
type checker struct {
	budget int
	// base is the text every value checked is a two-index slice of (the
	// arguments, or the JSON a string holds), so that a value's offset in
	// it is cap(base)-cap(v), without an offset carried down the walk.
	base []byte
	read []splice
	// why is why the last string of JSON refused (jsonContent) could not
	// be read.
	why string
}

// splice is a string of JSON read: the literal's bytes in the checker's
// base, and the JSON text it holds as the policy reads it.
type splice struct {
	start, end int
	text       []byte
}

// spliced is the base with each string of JSON read replaced by the text
// it holds. A string read twice (allOf, a property and a pattern naming
// one member) is replaced once.
func (ck *checker) spliced() []byte {
	if len(ck.read) == 0 {
		return ck.base
	}
	slices.SortStableFunc(ck.read, func(a, b splice) int { return a.start - b.start })
	out := make([]byte, 0, len(ck.base))
	at := 0
	for _, r := range ck.read {
		if r.start < at {
			continue
		}
		out = append(append(out, ck.base[at:r.start]...), r.text...)
		at = r.end
	}
	return append(out, ck.base[at:]...)
}

// readAt reports whether the string v was read as the JSON it holds since
// the reads' mark.
func (ck *checker) readAt(v []byte, mark int) bool {
	start := cap(ck.base) - cap(v)
	for _, r := range ck.read[mark:] {
		if r.start == start {
			return true
		}
	}
	return false
}

// readContent reads the string literal v, which n says holds JSON, as the
// tool's parser reads it (pydantic's jiter, for Json[T]), when Warden reads
// it exactly so: the string decoded, its text read by the reader of
// request members the policy judges (jsonrpc.PolicyValue: one JSON value,
// JSON white space around it, each member name once and none folding like
// another, numbers a 64-bit float holds exactly as written, nesting within
// the bound; NaN, Infinity, comments, trailing commas or text refused by
// the JSON grammar), and no lone surrogate escape in the string or in its
// text (jiter refuses one, Go reads U+FFFD). jiter reads more than Warden:
// a name given twice (the last), NaN and Infinity, 1e400 (inf), integers
// of any size; each of these is refused (jsonContent, ck.why saying why)
// rather than read otherwise. The value read is held to n's contentSchema,
// strings of JSON in it read in turn, and recorded for the policy.
func (n *typeNode) readContent(v []byte, depth int, ck *checker) ([]string, kinds, bool) {
	refuse := func(why string) ([]string, kinds, bool) {
		ck.why = why
		return nil, jsonContent, false
	}
	if n.encoded {
		return refuse("its schema names a contentEncoding")
	}
	if !utf8.Valid(v) || jsonrpc.LoneSurrogate(v) {
		return refuse("the string holds a lone surrogate escape or is not UTF-8")
	}
	s, _ := jsonrpc.String(v)
	text := []byte(s)
	if len(text) == 0 {
		return refuse("it is empty")
	}
	if _, bad := jsonrpc.PolicyValue(text, "its JSON"); !bad.OK() {
		return refuse(strings.TrimPrefix(bad.Detail, "invalid params: "))
	}
	if jsonrpc.LoneSurrogate(text) {
		return refuse("its JSON holds a lone surrogate escape")
	}
	in := &checker{budget: ck.budget, base: text}
	at := jsonrpc.SkipSpace(text, 0)
	p, want, ok := n.content.check(text[at:jsonrpc.ValueEnd(text, at)], depth, 0, in)
	ck.budget = in.budget
	if !ok {
		ck.why = in.why
		return p, want, false
	}
	start := cap(ck.base) - cap(v)
	if start < 0 || start+len(v) > len(ck.base) || string(ck.base[start:start+len(v)]) != string(v) {
		return refuse("it could not be placed in the arguments") // never: v is a slice of the base (fail closed)
	}
	ck.read = append(ck.read, splice{start: start, end: start + len(v), text: in.spliced()})
	return nil, 0, true
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
func (n *typeNode) check(v []byte, depth, hops int, ck *checker) ([]string, kinds, bool) {
	if n == nil {
		return nil, 0, true
	}
	if hops > maxSchemaHops {
		ck.budget = -1 // a cycle of $refs, or a chain past the bound
	}
	if ck.budget--; ck.budget < 0 {
		return nil, 0, false // CheckTypes refuses the whole call
	}
	if depth > jsonrpc.MaxPolicyDepth {
		return nil, n.kinds, false // deeper than arguments may be (Parse refuses them first)
	}
	k := kindOfRaw(v)
	if n.kinds != 0 && n.kinds&k == 0 {
		return nil, n.kinds, false
	}
	if n.jsonText && k == typeString {
		if p, want, ok := n.readContent(v, depth, ck); !ok {
			return p, want, false
		}
	}
	for _, a := range n.allOf {
		if p, want, ok := a.check(v, depth, hops+1, ck); !ok {
			return p, want, false
		}
	}
	if len(n.anyOf) > 0 {
		var firstPath []string
		var firstWant kinds
		var firstWhy string
		matched := -1
		mark := len(ck.read) // the strings of JSON read before: an alternative refused reads none
		for i, a := range n.anyOf {
			p, want, ok := a.check(v, depth, hops+1, ck)
			if ok {
				matched = i
				break
			}
			ck.read = ck.read[:mark]
			if i == 0 || want&unread != 0 && firstWant&unread == 0 {
				// the first alternative's refusal, or the first that
				// names what no type can say
				firstPath, firstWant, firstWhy = p, want, ck.why
			}
		}
		// v itself read as the JSON it holds: another alternative taking
		// it as the string it is (pydantic's smart mode takes str | Json[T]
		// as the str) must surely refuse it, whatever its order
		parsed := matched >= 0 && ck.readAt(v, mark)
		if matched >= 0 && !n.anyOf[matched].takesAsIs(v) {
			// The reader picks the alternative, not Warden: pydantic's
			// smart mode takes the first it validates strictly, which
			// constraints Warden does not read (required, const, lengths,
			// patterns) may rule out, then the first it validates laxly,
			// converting the value. So every alternative v is not of the
			// types of must surely refuse it (unless the one it matched
			// takes it as it is).
			for i, a := range n.anyOf {
				if i == matched {
					continue
				}
				if i > matched && !parsed {
					at := len(ck.read)
					_, _, ok := a.check(v, depth, hops+1, ck)
					ck.read = ck.read[:at]
					if ok {
						continue
					}
				}
				if ck.budget < 0 {
					return nil, 0, false
				}
				if !a.refuses(v, depth, ck) {
					return nil, ambiguous, false
				}
			}
		}
		if matched < 0 {
			if len(firstPath) == 0 && firstWant&unread == 0 {
				// refused at this value: name every type the alternatives allow
				firstWant = 0
				for _, a := range n.anyOf {
					firstWant |= a.kinds
				}
			}
			ck.why = firstWhy
			return firstPath, firstWant, false
		}
	}
	switch k {
	case typeObject:
		if n.props == nil && n.addl == nil && n.patterns == nil {
			return nil, 0, true
		}
		for w := walkMembers(v); ; {
			lit, m, more := w.next()
			if !more {
				break
			}
			if p, want, ok := n.memberCheck(lit, m, depth+1, ck); !ok && (ck.budget < 0 || !w.has(decodedName(lit))) {
				return append([]string{decodedName(lit)}, p...), want, false
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
			if p, want, ok := s.check(v[i:end], depth+1, 0, ck); !ok {
				return append([]string{"[" + strconv.Itoa(e) + "]"}, p...), want, false
			}
			if i = jsonrpc.SkipSpace(v, end); v[i] == ',' {
				i = jsonrpc.SkipSpace(v, i+1)
			}
		}
	}
	return nil, 0, true
}

// reach is the JSON types a lax reader may turn a value of type k into:
// pydantic's lax mode reads numeric strings and "false"/"no" as numbers
// and bools, 0 and 1 as bools, bools as numbers (and a config may read
// numbers as strings).
func reach(k kinds) kinds {
	switch k {
	case typeString:
		return typeString | typeNumber | typeBoolean
	case typeNumber:
		return typeNumber | typeBoolean | typeString
	case typeBoolean:
		return typeBoolean | typeNumber | typeString
	}
	return k
}

// refuses reports whether n surely refuses v however laxly it is read, so
// that a union's reader cannot pick n for v: none of n's types is one v can
// be read as, v is a string n's const or enum does not hold, an object
// lacks a member n requires, or a member's own schema refuses it (a
// discriminator: pydantic's tagged unions give each alternative's tag as a
// const). Not sure (false) past the budget.
func (n *typeNode) refuses(v []byte, depth int, ck *checker) bool {
	if n == nil || depth > jsonrpc.MaxPolicyDepth {
		return false
	}
	if ck.budget--; ck.budget < 0 {
		return false
	}
	k := kindOfRaw(v)
	if n.kinds != 0 && n.kinds&reach(k) == 0 {
		return true
	}
	if n.strs != nil && k == typeString {
		s, _ := jsonrpc.String(v)
		found := false
		for _, want := range n.strs {
			found = found || want == s
		}
		if !found {
			return true
		}
	}
	for _, a := range n.allOf {
		if a.refuses(v, depth, ck) {
			return true
		}
	}
	if len(n.anyOf) > 0 {
		all := true
		for _, a := range n.anyOf {
			all = all && a.refuses(v, depth, ck)
		}
		if all {
			return true
		}
	}
	if k != typeObject || (n.required == nil && n.props == nil) {
		return false
	}
	for _, r := range n.required {
		if !walkMembers(v).has(r) {
			return true
		}
	}
	for w := walkMembers(v); ; {
		lit, m, more := w.next()
		if !more {
			return false
		}
		name := decodedName(lit)
		if s, ok := n.props[name]; ok && !w.has(name) && s.refuses(m, depth+1, ck) {
			return true
		}
	}
}

// takesAsIs reports whether a strict reader of n takes v as it is: n is
// plain and v is of its type (an integer written as one).
func (n *typeNode) takesAsIs(v []byte) bool {
	if n == nil || !n.plain || n.kinds != 0 && n.kinds&kindOfRaw(v) == 0 {
		return false
	}
	return !n.integer || kindOfRaw(v) != typeNumber || !bytes.ContainsAny(v, ".eE")
}

// memberCheck holds the member value m, named by the literal lit, to every
// schema n gives it: its property's, each matching pattern's, else
// additionalProperties.
func (n *typeNode) memberCheck(lit, m []byte, depth int, ck *checker) ([]string, kinds, bool) {
	var s *typeNode
	var named bool
	name := lit[1 : len(lit)-1]
	if plain(name) {
		s, named = n.props[string(name)] // no allocation: a map look-up's key
	} else {
		name = []byte(decodedName(lit))
		s, named = n.props[string(name)]
	}
	if named {
		if p, want, ok := s.check(m, depth, 0, ck); !ok {
			return p, want, false
		}
	} else if n.spellings == nil {
		// no properties: no spelling to read a member as
	} else if ds := n.spellings[spelling(string(name))]; len(ds) > 0 && !slices.Contains(ds, string(name)) {
		// not a property of the schema's, but a reader may take it for
		// one: the policy and the types judged the one declared (or its
		// absence), the tool would act on this
		return nil, misspelt, false
	}
	for _, pn := range n.patterns {
		if pn.re == nil || pn.re.Match(name) {
			named = true
			if p, want, ok := pn.n.check(m, depth, 0, ck); !ok {
				return p, want, false
			}
		}
	}
	if !named {
		return n.addl.check(m, depth, 0, ck)
	}
	return nil, 0, true
}
