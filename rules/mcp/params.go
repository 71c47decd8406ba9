package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/agentwarden/warden/rules"
)

// ParamPrefix starts the name of a header mirroring a tool argument
// (SEP-2243: Mcp-Param-{Name}, Name the argument's x-mcp-header).
const ParamPrefix = "Mcp-Param-"

// Param is one Mcp-Param-{Name} header: Name as sent after the prefix, and
// every value the request carries under it (any case of the name).
type Param struct {
	Name   string
	Values []string
}

// Params are a request's Mcp-Param-* headers, read the one way both doors
// read them: names compared without case, every value kept. h is an
// http.Header (the rules do no I/O, so they name no net/http type).
func Params(h map[string][]string) []Param {
	var out []Param
	for k, vs := range h {
		if len(k) <= len(ParamPrefix) || !strings.EqualFold(k[:len(ParamPrefix)], ParamPrefix) {
			continue
		}
		name := k[len(ParamPrefix):]
		i := 0
		for i < len(out) && !strings.EqualFold(out[i].Name, name) {
			i++
		}
		if i == len(out) {
			out = append(out, Param{Name: name})
		}
		out[i].Values = append(out[i].Values, vs...)
	}
	return out
}

// Mirrored maps a tool's x-mcp-header names, lower-cased, to the argument
// each mirrors (SEP-2243), as its inputSchema declares them: the path of
// property names from params.arguments down (nested properties too, as the
// Go SDK's clients mirror them). A name declared twice (in any case) maps
// to nil: no header of that name can be matched to one argument. Nil when
// the schema declares none.
type Mirrored map[string][]string

// schemaProperty is what MirroredArguments reads of a schema property.
type schemaProperty struct {
	Header     *string                   `json:"x-mcp-header"`
	Properties map[string]schemaProperty `json:"properties"`
}

// MirroredArguments reads the properties of a tool's inputSchema that
// carry x-mcp-header (a schema that does not decode declares none).
func MirroredArguments(inputSchema []byte) Mirrored {
	if len(inputSchema) == 0 || !bytes.Contains(inputSchema, []byte("x-mcp-header")) {
		return nil
	}
	var s schemaProperty
	if json.Unmarshal(inputSchema, &s) != nil {
		return nil
	}
	m := Mirrored{}
	m.collect(s.Properties, nil)
	if len(m) == 0 {
		return nil
	}
	return m
}

func (m Mirrored) collect(props map[string]schemaProperty, prefix []string) {
	for name, p := range props {
		path := append(prefix[:len(prefix):len(prefix)], name)
		if p.Header != nil {
			k := strings.ToLower(*p.Header)
			if _, twice := m[k]; twice {
				m[k] = nil
			} else {
				m[k] = path
			}
		}
		m.collect(p.Properties, path)
	}
}

// argument is the value at path in params.arguments (args, decoded one
// level), and whether it is given.
func argument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	v, ok := args[path[0]]
	for _, name := range path[1:] {
		var obj map[string]json.RawMessage
		if !ok || json.Unmarshal(v, &obj) != nil {
			return nil, false
		}
		v, ok = obj[name]
	}
	return v, ok
}

// CheckParamValues refuses Mcp-Param-* headers no reader can take as one
// value, whatever the tool (SEP-2243: servers MUST reject invalid
// characters, intermediaries MUST answer 400): a name given on two field
// lines, a value with a character outside visible ASCII, space and tab, or
// a =?base64?...?= value that does not decode. joined is what the door
// knows of lines: true when it sees repeated lines as one value joined with
// commas (Envoy's CheckRequest headers), where a value holding a comma
// cannot be told from the header given twice and is refused too (a value
// holding a comma is sent =?base64?...?=, whose alphabet has none); false
// when it sees each line apart (net/http), where one line holding a comma
// is one value, as SEP-2243 clients send it and the SDK servers read it.
// Otherwise, with the tool's schema unknown, the headers are forwarded as
// they are (intermediaries MUST forward Mcp-Param-* they do not know).
func CheckParamValues(ps []Param, joined bool) rules.Verdict {
	for _, p := range ps {
		if n := len(p.Values); n != 1 {
			return mismatch(fmt.Sprintf("%s%s header given %d times", ParamPrefix, p.Name, n))
		}
		if joined && strings.Contains(p.Values[0], ",") {
			return mismatch(fmt.Sprintf("%s%s header holds a comma, which here cannot be told from the header given twice (Envoy joins repeated lines with commas): send a value holding a comma as =?base64?...?=", ParamPrefix, p.Name))
		}
		if v := readable(ParamPrefix+p.Name, p.Values[0]); !v.OK() {
			return v
		}
	}
	return rules.Verdict{}
}

// readable refuses a header value that readers read differently (OK when
// every reader reads it alike): a byte outside visible ASCII, space and
// tab (Go keeps UTF-8, Node and Starlette decode Latin-1), or a
// =?base64?...?= value that does not decode (SEP-2243 readers refuse it,
// others read it as written).
func readable(name, v string) rules.Verdict {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return mismatch(fmt.Sprintf("%s header holds a character outside visible ASCII, space and tab (send =?base64?...?=)", name))
		}
	}
	if _, ok := paramValue(v); !ok {
		return mismatch(fmt.Sprintf("%s header is not valid =?base64?...?=", name))
	}
	return rules.Verdict{}
}

// paramValue decodes a header value (SEP-2243): =?base64?...?=, exactly so
// spelled, is standard base64 with padding; any other value is literal.
func paramValue(v string) (string, bool) {
	const pre, suf = "=?base64?", "?="
	if len(v) < len(pre)+len(suf) || !strings.HasPrefix(v, pre) || !strings.HasSuffix(v, suf) {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len(pre) : len(v)-len(suf)])
	return string(b), err == nil
}

// CheckParams checks a tools/call's Mcp-Param-* headers against the
// arguments, the tool's schema known (m, from a tools/list answer): each
// header must name an argument the schema mirrors and equal its value
// (SEP-2243's encoding: a string as is, an integer in decimal, a boolean
// as true or false), so a router or server reading the header reads what
// the policy judged; an argument the schema mirrors that is given and not
// null must have its header from protocol 2026-07-28 on (older clients do
// not send them). Headers whose values do not read are CheckParamValues'.
func CheckParams(c Call, ps []Param, m Mirrored, protocolVersion string) rules.Verdict {
	if c.Method != MethodToolsCall || (len(ps) == 0 && len(m) == 0) {
		return rules.Verdict{}
	}
	var args map[string]json.RawMessage
	if len(c.Arguments) > 0 && json.Unmarshal(c.Arguments, &args) != nil {
		args = nil // not an object: no argument is given
	}
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		k := strings.ToLower(p.Name)
		seen[k] = true
		path, ok := m[k]
		switch {
		case !ok:
			return mismatch(fmt.Sprintf("%s%s header names no argument tool %q mirrors", ParamPrefix, p.Name, c.Tool))
		case path == nil:
			return mismatch(fmt.Sprintf("tool %q declares x-mcp-header %q twice: its %s%s header names no one argument", c.Tool, p.Name, ParamPrefix, p.Name))
		}
		prop := strings.Join(path, ".")
		got, _ := paramValue(p.Values[0])
		want, given := argument(args, path)
		if !given || string(want) == "null" {
			return mismatch(fmt.Sprintf("%s%s header given, argument %q is not", ParamPrefix, p.Name, prop))
		}
		if !sameParam(got, want) {
			return mismatch(fmt.Sprintf("%s%s header does not match argument %q", ParamPrefix, p.Name, prop))
		}
	}
	if protocolVersion < Era2026 {
		return rules.Verdict{}
	}
	for k, path := range m {
		if path == nil || seen[k] {
			continue
		}
		if v, given := argument(args, path); given && string(v) != "null" {
			return mismatch(fmt.Sprintf("argument %q is given: tool %q mirrors it in an %s header, which is missing", strings.Join(path, "."), c.Tool, ParamPrefix))
		}
	}
	return rules.Verdict{}
}

// sameParam reports whether header value h (decoded) is the argument's
// value as SEP-2243 encodes it: a string as is, true or false, a number
// in decimal (compared as the tool reads it, a 64-bit float); any other
// JSON value cannot be mirrored.
func sameParam(h string, arg json.RawMessage) bool {
	switch arg[0] {
	case '"':
		var s string
		return json.Unmarshal(arg, &s) == nil && s == h
	case 't', 'f':
		return string(arg) == h
	case '[', '{', 'n':
		return false
	}
	a, err1 := strconv.ParseFloat(string(arg), 64)
	b, err2 := strconv.ParseFloat(h, 64)
	return err1 == nil && err2 == nil && a == b && !math.IsInf(b, 0) && strings.TrimLeft(h, "-0123456789.eE+") == ""
}
