package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules/mcp"
)

// TestJSONContentReadAsPydantic (T2 in docs/security.md): every string of
// JSON Warden accepts for a Json argument, pydantic (2.14.3, its parser
// jiter, as the MCP Python SDK validates a tool's arguments) reads too, as
// the same value the policy judges: each text below (white space, escapes,
// numbers, literals, structures, nesting at and past the bound, each
// alone and inside an array and an object) is read by both, one Python
// process for all. What Warden refuses that pydantic reads (a name given
// twice, NaN, integers past 2^53) is T2's cost, counted, not failed.
func TestJSONContentReadAsPydantic(t *testing.T) {
	py := peer(t, ".peers/mcp-venv/bin/python")
	var texts []string
	for _, ws := range []string{" ", "\t", "\n", "\r", "\f", "\v", "\u00a0", "\ufeff", "\u2028", "\x00", "\x85"} {
		texts = append(texts, ws+"[1]", "[1]"+ws, "["+ws+"1]")
	}
	scalars := []string{`"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9"`, `"\uD83D\uDE00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\udc00\ud800"`,
		`"\x41"`, `"\a"`, `"\'"`, `"\U0001F600"`, "\"a\tb\"", "\"a\x7fb\"", "\"\u00e9\u2028\"", `'a'`, `"\u0000"`, `"a\\"`,
		`0`, `-0`, `01`, `1.`, `.1`, `1e5`, `1E+5`, `1e-400`, `1e400`, `9007199254740992`, `9007199254740993`, `-9007199254740993`,
		`0.1`, `1.5e300`, `5e-324`, `2.2250738585072011e-308`, `1.00000000000000000001`, `+1`, `0x1`, `1_000`, `Infinity`, `-Infinity`, `NaN`, `inf`,
		`true`, `True`, `null`, `None`, `nul`, `[]`, `{}`, `[1,]`, `{"a":1,}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":1,"A":2}`, `{'a':1}`,
		`[1 2]`, `{"a" 1}`, `{"a":1}//x`, `[1]/*x*/`, `[1] [2]`, `[1]x`, ``, ` `, `{"\ud800":1}`, `{"a":{"b":[1,{"b":2,"b":3}]}}`}
	for _, s := range scalars {
		texts = append(texts, s, "["+s+"]", `{"k":`+s+`}`)
	}
	for _, n := range []int{13, 14, 15} { // the string stands at depth 2: 14 more levels at most
		texts = append(texts, strings.Repeat("[", n)+strings.Repeat("]", n))
	}

	// m: M, M a model with v: Json: in a model, as a top-level string of
	// JSON is the SDK's own to parse first
	types := mcp.ArgumentTypes([]byte(`{"properties": {"m": {"properties": {"v": {"contentMediaType": "application/json", "contentSchema": {}, "type": "string"}}, "type": "object"}}, "type": "object"}`))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := `import json, sys
from pydantic import Json, TypeAdapter
ta = TypeAdapter(Json)
for line in sys.stdin:
    try:
        v = ta.validate_python(json.loads(line))
        print(json.dumps({"ok": True, "v": json.dumps(v)}))
    except Exception as e:
        print(json.dumps({"ok": False, "v": str(e).splitlines()[1] if len(str(e).splitlines()) > 1 else str(e)}))
`
	var in bytes.Buffer
	for _, s := range texts {
		lit, _ := json.Marshal(s)
		in.Write(append(lit, '\n'))
	}
	cmd := exec.CommandContext(ctx, py, "-c", script)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	type reading struct {
		OK bool   `json:"ok"`
		V  string `json:"v"`
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	accepted, costs := 0, 0
	for i := 0; sc.Scan(); i++ {
		var py reading
		if err := json.Unmarshal(sc.Bytes(), &py); err != nil || i >= len(texts) {
			t.Fatalf("python answered %s (%v)", sc.Bytes(), err)
		}
		text := texts[i]
		lit, _ := json.Marshal(text)
		args := `{"m":{"v":` + string(lit) + `}}`
		policy, v := mcp.CheckTypes(mcp.Call{Kind: mcp.KindRequest, Method: mcp.MethodToolsCall, Tool: "t", Arguments: []byte(args)}, types)
		var got any
		if v.OK() {
			doc, pv := mcp.PolicyArguments(policy)
			if !pv.OK() {
				v = pv
			} else {
				got = doc.(map[string]any)["m"].(map[string]any)["v"]
			}
		}
		switch {
		case v.OK() && !py.OK:
			t.Errorf("%s: Warden reads %v, pydantic refuses it (%s)", strconv.Quote(text), got, py.V)
		case v.OK():
			accepted++
			d := json.NewDecoder(strings.NewReader(py.V))
			d.UseNumber()
			var want any
			if err := d.Decode(&want); err != nil || !sameValue(got, want) {
				t.Errorf("%s: the policy reads %#v, pydantic %s", strconv.Quote(text), got, py.V)
			}
		case py.OK:
			costs++
			t.Logf("refused, read by pydantic as %s: %s", py.V, strconv.Quote(text))
		}
	}
	if accepted == 0 || sc.Err() != nil {
		t.Fatalf("%d texts read alike (%v)", accepted, sc.Err())
	}
	t.Logf("%d texts: %d read alike, %d refused that pydantic reads", len(texts), accepted, costs)
}

// sameValue reports whether the policy's value a and pydantic's b (both
// decoded with numbers as json.Number) are one JSON value, numbers
// compared as the float64 they read as.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, err1 := strconv.ParseFloat(string(a), 64)
		y, err2 := strconv.ParseFloat(string(bn), 64)
		return err1 == nil && err2 == nil && x == y
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if w, ok := bm[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}
