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
