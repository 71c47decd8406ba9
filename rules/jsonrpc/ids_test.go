package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// idSeeds are ids as peers write them and as they should not.
var idSeeds = []string{`"a"`, `7`, `-0`, `0`, `01`, `1.0`, `1e3`, `-`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, `"` + "\xff" + `"`, `"a" "b"`, `12 3`, ` 7 `, `null`, `{}`, `"\t"`, `123456789012345678901234567890`}

// FuzzIDValue: every id IDValue reads is what a decoder with UseNumber reads
// (first value; the MCP sidecar's own fast path for plain ids, plainID,
// was held to the same).
func FuzzIDValue(f *testing.F) {
	for _, s := range idSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := IDValue(raw)
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var want any
		err := d.Decode(&want)
		if ok != (err == nil) || ok && !equalValue(v, want) {
			t.Fatalf("IDValue(%q) = %#v %v; the decoder reads %#v, %v", raw, v, ok, want, err)
		}
	})
}

// equalValue compares decoded ids (maps and slices by their encoding).
func equalValue(a, b any) bool {
	switch a.(type) {
	case map[string]any, []any:
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return bytes.Equal(x, y)
	}
	return a == b
}

// FuzzIsID: IsID answers as SameID of IDValue, the reading it skips for an
// id echoed as written.
func FuzzIsID(f *testing.F) {
	for _, a := range idSeeds {
		for _, b := range []string{`"a"`, `7`, ` 7`, `"é"`, `"\u00e9"`, `"` + "\xff" + `"`, `1.0`} {
			f.Add([]byte(a), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, raw, id []byte) {
		v, ok := IDValue(raw)
		if want := ok && SameID(v, id); IsID(raw, id) != want {
			t.Fatalf("IsID(%q, %q) = %v, SameID of IDValue %v", raw, id, !want, want)
		}
	})
}
