package mcp

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// checkDecoded is CheckTypes' check as it was before the arguments were
// read in place: each object and array decoded with encoding/json
// (map[string]json.RawMessage, []json.RawMessage), nine allocations for
// the smallest typed call. FuzzCheckTypesDecoded holds the reader in place
// to it.
func (n *typeNode) checkDecoded(v json.RawMessage, path []string, depth, hops int, budget *int) ([]string, kinds, bool) {
	if n == nil {
		return nil, 0, true
	}
	if hops > maxSchemaHops {
		*budget = -1
	}
	if *budget--; *budget < 0 {
		return path, 0, false
	}
	if depth > jsonrpc.MaxPolicyDepth {
		return path, n.kinds, false
	}
	k := kindOfRaw(v)
	if n.kinds != 0 && n.kinds&k == 0 {
		return path, n.kinds, false
	}
	for _, a := range n.allOf {
		if p, want, ok := a.checkDecoded(v, path, depth, hops+1, budget); !ok {
			return p, want, false
		}
	}
	if len(n.anyOf) > 0 {
		var firstPath []string
		var firstWant kinds
		matched := false
		for i, a := range n.anyOf {
			p, want, ok := a.checkDecoded(v, path, depth, hops+1, budget)
			if ok {
				matched = true
				break
			}
			if i == 0 {
				firstPath, firstWant = p, want
			}
		}
		if !matched {
			if len(firstPath) == len(path) {
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
		if n.props == nil && n.addl == nil {
			return nil, 0, true
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(v, &members) != nil {
			return path, n.kinds, false
		}
		for name, m := range members {
			s, ok := n.props[name]
			if !ok {
				s = n.addl
			}
			if p, want, ok := s.checkDecoded(m, append(path[:len(path):len(path)], name), depth+1, 0, budget); !ok {
				return p, want, false
			}
		}
	case typeArray:
		if n.items == nil && n.prefix == nil {
			return nil, 0, true
		}
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) != nil {
			return path, n.kinds, false
		}
		for i, e := range elems {
			s := n.items
			if i < len(n.prefix) {
				s = n.prefix[i]
			}
			if p, want, ok := s.checkDecoded(e, append(path[:len(path):len(path)], "["+strconv.Itoa(i)+"]"), depth+1, 0, budget); !ok {
				return p, want, false
			}
		}
	}
	return nil, 0, true
}

// FuzzCheckTypesDecoded: on valid JSON arguments, CheckTypes reading them
// in place allows and refuses what the decoding check did (checkDecoded),
// naming the same argument when one argument alone is refused (but for
// what S1 added: patternProperties, strings of JSON, unions). Only a
// schema's step bound may differ, for a name given twice (the decoder
// never visits the first value).
func FuzzCheckTypesDecoded(f *testing.F) {
	f.Add(pydanticSchema, `{"paths":["a"],"opts":{"force":true}}`)
	f.Add(pydanticSchema, `{"paths":["a",1],"opts":{"force":true}}`)
	f.Add(pydanticSchema, `{"paths":"a","paths":["a"],"opts":{"force":true}}`)
	f.Add(pydanticSchema, `{"paths":["a"],"paths":"a","opts":{"force":true}}`)
	f.Add(pydanticSchema, `{ "opts" : { "fo\u0072ce" : "x" } , "paths" : [ ] }`)
	f.Add(pydanticSchema, "{\"tags\":{\"\xff\":\"1\"},\"paths\":[],\"opts\":{\"force\":true}}")
	f.Add(`{"type":"object","properties":{"\ufffd":{"type":"string"}}}`, "{\"\xff\":1}")
	f.Add(`{"type":"object","properties":{"a":{"anyOf":[{"type":"array","items":{"type":"string"}},{"type":"integer"}]}}}`, `{"a":[1]}`)
	f.Add(`{"items":[{"type":"string"}],"additionalItems":{"$ref":"#/items/0"}}`, `["a",1]`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		if !json.Valid([]byte(args)) {
			return
		}
		types := ArgumentTypes([]byte(schema))
		_, got := CheckTypes(Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t", Arguments: []byte(args)}, types)
		if types.root == nil || kindOfRaw([]byte(args)) == typeNull {
			if !got.OK() {
				t.Fatalf("refused without a schema: %s", got.Detail)
			}
			return
		}
		if strings.Contains(schema, "patternProperties") || strings.Contains(schema, "contentMediaType") || strings.Contains(got.Detail, "string holding JSON") || strings.Contains(got.Detail, "more than one alternative") || strings.Contains(got.Detail, "another spelling") || strings.Contains(got.Detail, "contentMediaType") {
			return // S1's, T1's and T2's rules, which the decoding check never had
		}
		budget := maxSchemaVisits
		raw := []byte(strings.TrimSpace(args))
		path, _, ok := types.root.checkDecoded(raw, nil, 0, 0, &budget)
		if budget < 0 || strings.Contains(got.Detail, "could not be checked") {
			return
		}
		if ok != got.OK() {
			t.Fatalf("in place: %v %q; decoded: allowed %v (at %q)", got.OK(), got.Detail, ok, argPath(path))
		}
		// map order picks one of several refused arguments: the one read
		// in place must be one the decoder may pick
		if !ok && !strings.Contains(got.Detail, "argument "+argPath(path)+" ") {
			for range 200 {
				b := maxSchemaVisits
				if p, _, _ := types.root.checkDecoded(raw, nil, 0, 0, &b); strings.Contains(got.Detail, "argument "+argPath(p)+" ") {
					return
				}
			}
			t.Fatalf("in place: %q; decoded refuses %s", got.Detail, argPath(path))
		}
	})
}
