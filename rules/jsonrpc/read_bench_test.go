package jsonrpc

import "testing"

// BenchmarkReadRequest reads an A2A SendMessage request as the sidecar
// does before forwarding it: the object read and its names checked, each
// protocol object down to the message, and every object's names held
// unique (the upstream's reading of a name given twice is not Warden's).
func BenchmarkReadRequest(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","taskId":"wt2.a","contextId":"wt2.b","parts":[{"text":"hello there","metadata":{"a":{"b":[1,2]}}}]},"configuration":{"historyLength":1}}}`)
	b.ReportAllocs()
	for b.Loop() {
		o, err := ReadObject(body)
		if err != nil || o.Check([]string{"jsonrpc", "id", "method", "params"}) != nil {
			b.Fatal(err)
		}
		p, _ := o.Obj("params")
		m, _ := p.Obj("message")
		if m.Check([]string{"messageId", "role", "taskId", "contextId", "parts"}) != nil {
			b.Fatal("message")
		}
		if _, ok := m.Str("taskId"); !ok || !Unique(body) {
			b.Fatal("unique")
		}
	}
}
