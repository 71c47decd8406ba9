package mcp

import "testing"

// BenchmarkCheckTypes: one tools/call's arguments held to the Python
// SDK's schema of five typed parameters (the sidecar's per-call cost of
// P1 and S1).
func BenchmarkCheckTypes(b *testing.B) {
	types := ArgumentTypes([]byte(pydanticSchema))
	c := Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t",
		Arguments: []byte(`{"paths":["a.txt","b/c.txt"],"dry_run":false,"limit":3,"opts":{"force":true},"tags":{"x":1,"y":2},"any":"some text"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, v := CheckTypes(c, types); !v.OK() {
			b.Fatal(v.Detail)
		}
	}
}

// BenchmarkCheckTypesJSON: a call whose argument is a string holding JSON
// (T2: pydantic's Json[list[str]] in a model), read, checked against its
// contentSchema and spliced into the arguments the policy reads.
func BenchmarkCheckTypesJSON(b *testing.B) {
	types := ArgumentTypes([]byte(pydanticJSON))
	c := Call{Kind: KindRequest, Method: MethodToolsCall, Tool: "t",
		Arguments: []byte(`{"b":{"paths":"[\"a.txt\",\"b/c.txt\"]"},"n":"3"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if args, v := CheckTypes(c, types); !v.OK() || args == nil {
			b.Fatal(v.Detail)
		}
	}
}
