package policies

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	decisionv1 "github.com/agentwarden/warden/wire/modes/decision/v1"
)

// TestEveryInputFieldKeyed: for every field of Input, two inputs that differ
// in that field alone differ in the memo key exactly when they differ in the
// document the policy sees (value), for MACP, MCP and A2A inputs. A field added to
// one of value and appendKey and not the other fails here: equal keys for
// different inputs would be stale decisions.
func TestEveryInputFieldKeyed(t *testing.T) {
	gov := func(id string, rulesDoc map[string]any) *macp.Governance {
		g, err := macp.Bind(macp.PolicyDescriptor{PolicyID: id, Mode: macp.ModeDecision, Rules: rulesDoc})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	bases := map[string]Input{
		"macp": {
			Protocol:   "macp",
			Principal:  Principal{ID: "alice", Method: "jwt", Scopes: map[string]any{"can_start_sessions": true}},
			Message:    Message{Mode: macp.ModeDecision, Type: "Vote", Sender: "alice", ID: "m1", SessionID: "s1"},
			Session:    Session{State: "Open", Policy: "p"},
			Roles:      []string{macp.RoleParticipant},
			Facts:      map[string]any{"votes": 2},
			Governance: gov("p", map[string]any{"voting": map[string]any{"algorithm": "majority"}}),
			Verdict:    rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonNotAuthorized, Detail: "d", Rank: rules.RankMode},
			MACP:       MACP{Present: true, Payload: macp.PayloadOf(&decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE"}), Size: 9, TimestampUnixMs: 1_700_000_000_000},
			Now:        time.Date(2026, 11, 27, 10, 30, 15, 0, time.UTC),
		},
		"mcp": {
			Protocol:  "mcp",
			Principal: Principal{ID: "bob", Method: "dev"},
			Message:   Message{Type: "tasks/steer", Sender: "bob", SessionID: "task-1"},
			Session:   Session{State: "working"},
			Roles:     []string{"owner"},
			MCP:       &MCP{Tool: "echo", Arguments: map[string]any{"a": "b"}, Argument: &CompletionArgument{Name: "entry", Value: "s"}, ContextArguments: map[string]string{"section": "public"}, InputResponses: map[string]any{"confirm": map[string]any{"action": "accept"}}},
		},
		"a2a": {
			Protocol:  "a2a",
			Principal: Principal{ID: "carol", Method: "dev"},
			Message:   Message{Type: "SendMessage", Sender: "carol"},
			Roles:     []string{"new"},
			A2A:       &A2A{Skill: "weather", Parts: []string{"text"}, Metadata: map[string]any{"skill": "weather"}},
		},
	}
	every := [][]string{{}} // a policy that reads input whole
	key := func(in *Input) string {
		var b []byte
		for _, p := range normalizePaths(every) {
			b = in.appendKey(b, p)
		}
		return string(b)
	}
	doc := func(in *Input) string {
		b, err := json.Marshal(in.value(true))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for proto, base := range bases {
		// Every leaf field, changed by reflection.
		var walk func(path string, v reflect.Value)
		check := func(path string) {
			in := cloneInput(base)
			mutate(t, reflect.ValueOf(&in).Elem(), path)
			b := base
			if (key(&in) != key(&b)) != (doc(&in) != doc(&b)) {
				t.Errorf("%s: changing %s changes the memo key: %v, the policy's input: %v", proto, path, key(&in) != key(&b), doc(&in) != doc(&b))
			}
		}
		walk = func(path string, v reflect.Value) {
			switch v.Kind() {
			case reflect.Struct:
				for i := range v.NumField() {
					f := v.Type().Field(i)
					if f.IsExported() {
						walk(path+"."+f.Name, v.Field(i))
					}
				}
			default:
				check(path)
			}
		}
		walk("", reflect.ValueOf(base))
		// Governance is keyed by its canonical form: another policy.
		in := cloneInput(base)
		in.Governance = gov("q", map[string]any{"voting": map[string]any{"algorithm": "unanimous"}})
		if key(&in) == key(&base) {
			t.Errorf("%s: another governance policy gives the same memo key", proto)
		}
	}
	// input.mcp.argument (completion/complete), read whole or alone: its
	// value, its name, or its absence.
	mbase := bases["mcp"]
	for name, a := range map[string]*CompletionArgument{"value": {Name: "entry", Value: "sec"}, "name": {Name: "entri", Value: "s"}, "absent": nil} {
		in := cloneInput(mbase)
		m := *mbase.MCP
		m.Argument = a
		in.MCP = &m
		if key(&in) == key(&mbase) || doc(&in) == doc(&mbase) {
			t.Errorf("mcp: another argument %s leaves the memo key or the input unchanged", name)
		}
		if string(in.appendKey(nil, []string{"mcp", "argument"})) == string(mbase.appendKey(nil, []string{"mcp", "argument"})) {
			t.Errorf("mcp: a policy reading input.mcp.argument alone keys another argument %s the same", name)
		}
	}
	// input.macp: the payload and the timestamp, read whole or alone;
	// input.time: the decision's minute, not its second.
	base := bases["macp"]
	for name, m := range map[string]MACP{
		"payload":           {Present: true, Payload: macp.PayloadOf(&decisionv1.VotePayload{ProposalId: "p1", Vote: "REJECT"}), Size: 9, TimestampUnixMs: 1_700_000_000_000},
		"timestamp_unix_ms": {Present: true, Payload: macp.PayloadOf(&decisionv1.VotePayload{ProposalId: "p1", Vote: "APPROVE"}), Size: 9, TimestampUnixMs: 1_700_000_000_001},
	} {
		in := cloneInput(base)
		in.MACP = m
		if key(&in) == key(&base) || doc(&in) == doc(&base) {
			t.Errorf("macp: changing input.macp.%s leaves the memo key unchanged", name)
		}
		var one, other []byte
		one, other = in.appendKey(one, []string{"macp", name}), base.appendKey(other, []string{"macp", name})
		if string(one) == string(other) {
			t.Errorf("macp: a policy reading input.macp.%s alone keys it the same", name)
		}
	}
	for _, tc := range []struct {
		by      time.Duration
		changes bool
	}{{30 * time.Second, false}, {45 * time.Second, true}, {time.Hour, true}} {
		in := cloneInput(base)
		in.Now = in.Now.Add(tc.by)
		if k, d := key(&in) != key(&base), doc(&in) != doc(&base); k != tc.changes || d != tc.changes {
			t.Errorf("time %s later: the memo key changes %v, the input %v; want %v", tc.by, k, d, tc.changes)
		}
	}
	// input.mcp: each member, arguments included, is keyed.
	base = bases["mcp"]
	for name, m := range map[string]MCP{
		"tool":      {Tool: "echo2", Arguments: map[string]any{"a": "b"}},
		"prompt":    {Tool: "echo", Prompt: "p", Arguments: map[string]any{"a": "b"}},
		"uri":       {Tool: "echo", URI: "file:///x", Arguments: map[string]any{"a": "b"}},
		"arguments": {Tool: "echo", Arguments: map[string]any{"a": "c"}},
	} {
		in := cloneInput(base)
		in.MCP = &m
		if key(&in) == key(&base) || doc(&in) == doc(&base) {
			t.Errorf("mcp: changing input.mcp.%s leaves the memo key unchanged", name)
		}
	}
	// input.a2a: each member, metadata included, is keyed, read whole or
	// alone.
	base = bases["a2a"]
	for name, a := range map[string]A2A{
		"skill":    {Skill: "news", Parts: []string{"text"}, Metadata: map[string]any{"skill": "weather"}},
		"parts":    {Skill: "weather", Parts: []string{"data"}, Metadata: map[string]any{"skill": "weather"}},
		"metadata": {Skill: "weather", Parts: []string{"text"}, Metadata: map[string]any{"skill": "weather", "x": 1}},
	} {
		in := cloneInput(base)
		in.A2A = &a
		if key(&in) == key(&base) || doc(&in) == doc(&base) {
			t.Errorf("a2a: changing input.a2a.%s leaves the memo key unchanged", name)
		}
		var one, other []byte
		one, other = in.appendKey(one, []string{"a2a", name}), base.appendKey(other, []string{"a2a", name})
		if string(one) == string(other) {
			t.Errorf("a2a: a policy reading input.a2a.%s alone keys it the same", name)
		}
	}
}

func cloneInput(in Input) Input {
	out := in
	out.Roles = append([]string(nil), in.Roles...)
	return out
}

// mutate changes the leaf at path (".Message.Type") of v.
func mutate(t *testing.T, v reflect.Value, path string) {
	for _, name := range splitPath(path) {
		v = v.FieldByName(name)
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(v.Int() + 1)
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.ValueOf("x")))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range v.MapKeys() {
			m.SetMapIndex(k, v.MapIndex(k))
		}
		m.SetMapIndex(reflect.ValueOf("added"), reflect.ValueOf(any(1)))
		v.Set(m)
	case reflect.Pointer:
		v.Set(reflect.Zero(v.Type()))
	default:
		t.Fatalf("no mutation for %s (%s)", path, v.Kind())
	}
}

func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// TestMemoKeyValues: values of the policy's document that the policy sees
// differently never share a memo key, read whole (input.principal.scopes,
// input.facts) or one member (input.facts.<name>); values it sees alike
// (the same map built in another order) share one. The invalid UTF-8 rows
// fail on a key written with encoding/json, which writes every invalid
// sequence as U+FFFD: a scope or fact the policy tells apart got the
// decision memoized for the other.
func TestMemoKeyValues(t *testing.T) {
	ordered := map[string]any{}
	for _, k := range []string{"c", "a", "b"} {
		ordered[k] = k
	}
	cases := []struct {
		name string
		a, b any
		same bool
	}{
		{"invalid UTF-8", "\xff", "\xfe", false},
		{"invalid UTF-8 in a list", []any{"ops\xff"}, []any{"ops\xfe"}, false},
		{"invalid UTF-8 map key", map[string]any{"\xff": true}, map[string]any{"\xfe": true}, false},
		{"a string and a number", "1", json.Number("1"), false},
		{"a string and a bool", "true", true, false},
		{"true and false", true, false, false},
		{"null and an empty map", map[string]any(nil), map[string]any{}, false},
		{"null and an empty list", []any(nil), []any{}, false},
		{"an empty string and null", "", nil, false},
		{"list boundaries", []any{"a", "b"}, []any{"ab"}, false},
		{"list boundaries of strings", []string{"a,b"}, []string{"a", "b"}, false},
		{"map boundaries", map[string]any{"a": "b"}, map[string]any{"ab": ""}, false},
		{"a member more", map[string]any{"a": 1}, map[string]any{"a": 1, "b": 1}, false},
		{"nested", map[string]any{"m": map[string]any{"x": []any{1.5}}}, map[string]any{"m": map[string]any{"x": []any{2.5}}}, false},
		{"numbers", json.Number("10"), json.Number("1"), false},
		{"floats", 0.1, 0.10000000000000002, false},
		{"ints", 7, 8, false},
		{"another type, by encoding/json", []int{1}, []int{2}, false},
		{"the same map in another order", ordered, map[string]any{"a": "a", "b": "b", "c": "c"}, true},
		{"the same list", []any{"x", json.Number("2")}, []any{"x", json.Number("2")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range [][]string{{"principal", "scopes"}, {"facts"}, {"facts", "f"}} {
				key := func(v any) string {
					in := Input{Protocol: "macp", Principal: Principal{ID: "alice"}, Facts: map[string]any{"f": v}}
					if m, ok := v.(map[string]any); ok {
						in.Principal.Scopes = m
					} else {
						in.Principal.Scopes = map[string]any{"s": v}
					}
					return string(in.appendKey(nil, path))
				}
				if got := key(c.a) == key(c.b); got != c.same {
					t.Errorf("%v: %#v and %#v share a key: %v, want %v", path, c.a, c.b, got, c.same)
				}
			}
		})
	}
}
