package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzPlainID checks that every id plainID reads is what the decoder reads.
func FuzzPlainID(f *testing.F) {
	for _, s := range []string{`"a"`, `7`, `-0`, `01`, `1.0`, `"a\"b"`, `"\u00e9"`, `"é"`, `"` + "\xff" + `"`, `"a" "b"`, `12 3`, `-`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := plainID(raw)
		if !ok {
			return
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil || want != v {
			t.Fatalf("plainID(%q) = %#v; the decoder reads %#v, %v", raw, v, want, err)
		}
	})
}
