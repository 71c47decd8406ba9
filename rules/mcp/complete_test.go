package mcp

import (
	"maps"
	"testing"
)

// TestCompletionContext: completion/complete's params.context.arguments
// (the arguments already resolved) is read strictly into ContextArguments,
// as params.argument is: an object of strings, each name once in one
// spelling; anything else is refused -32600 naming params.context. Before,
// it was not read: every row gave no ContextArguments and no error.
func TestCompletionContext(t *testing.T) {
	const head = `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"}`
	for _, tc := range []struct {
		name, context string
		want          map[string]string
		refused       string
	}{
		{"absent", ``, nil, ""},
		{"two arguments", `,"context":{"arguments":{"section":"public","year":"2026"}}`, map[string]string{"section": "public", "year": "2026"}, ""},
		{"empty", `,"context":{"arguments":{}}`, map[string]string{}, ""},
		{"no arguments", `,"context":{}`, nil, ""},
		{"escaped name", `,"context":{"arguments":{"s\u0065ction":"public"}}`, map[string]string{"section": "public"}, ""},
		{"a name twice", `,"context":{"arguments":{"section":"public","section":"secret"}}`, nil, "appears twice"},
		{"a name twice, escaped", `,"context":{"arguments":{"section":"public","s\u0065ction":"secret"}}`, nil, "appears twice"},
		{"names differing in case", `,"context":{"arguments":{"section":"public","SECTION":"secret"}}`, nil, "differ only in case"},
		{"arguments in capitals", `,"context":{"Arguments":{"section":"secret"}}`, nil, `must be spelled "arguments"`},
		{"arguments twice in two spellings", `,"context":{"arguments":{},"ARGUMENTS":{"section":"secret"}}`, nil, "differ only in case"},
		{"context in capitals", `,"Context":{"arguments":{"section":"secret"}}`, nil, `must be spelled "context"`},
		{"a number", `,"context":{"arguments":{"section":1}}`, nil, `"section" must be a string`},
		{"null value", `,"context":{"arguments":{"section":null}}`, nil, `"section" must be a string`},
		{"arguments a list", `,"context":{"arguments":["secret"]}`, nil, "arguments must be an object"},
		{"context a string", `,"context":"secret"`, nil, "params.context: must be an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head + tc.context + `}}`))
			if !parsedUnlessRefused(t, err, tc.refused) {
				return
			}
			if (c.ContextArguments == nil) != (tc.want == nil) || !maps.Equal(c.ContextArguments, tc.want) {
				t.Fatalf("context arguments %v, want %v", c.ContextArguments, tc.want)
			}
		})
	}
}
