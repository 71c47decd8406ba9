package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestSetStrLiterals: each string SetStr sets stays what it was set to
// however many follow, long or escaped ones included.
func TestSetStrLiterals(t *testing.T) {
	o, err := ReadObject([]byte(`{"a":"x","list":["p","q","r"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for i := range 60 {
		v := fmt.Sprintf("v%d-%s", i, strings.Repeat("\"é\\\n", i%7*i))
		k := fmt.Sprint("k", i)
		o.SetStr(k, v)
		want[k] = v
	}
	o.SetStr("a", "y")
	want["a"] = "y"
	list, _ := o.Arr("list")
	list.SetStr(1, "Q\u2028")
	want["list"] = []any{"p", "Q\u2028", "r"}
	var got map[string]any
	if err := json.Unmarshal(o.AppendTo(nil), &got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
