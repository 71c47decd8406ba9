package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/a2a"
	"github.com/agentwarden/warden/rules/jsonrpc"
)

// The decoding path push configs and the extended card took before they
// were read as jsonrpc.Objects, kept as the reference the reading path is
// compared with on valid answers (TestAnswerReadEquivalent,
// FuzzAnswerReadEquivalent).

// decodedResult is the old fromUpstream on a push-config or extended-card
// result: decoded into a map, rewritten, encoded. ok is false for a result
// about another's task; refused for one Warden would not pass at all.
func decodedResult(x *exchange, raw []byte) (out []byte, ok, refused bool) {
	var r map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&r) != nil {
		return nil, false, true
	}
	switch x.call.Method {
	case a2a.MethodCreatePush, a2a.MethodGetPush:
		ok = decodedPushConfig(x, r)
	case a2a.MethodListPush:
		ok = true
		if cs, isList := r["configs"].([]any); isList {
			kept := cs[:0]
			for _, c := range cs {
				if c, isObj := c.(map[string]any); isObj && decodedPushConfig(x, c) {
					kept = append(kept, c)
				}
			}
			r["configs"] = kept
		}
	case a2a.MethodExtendedCard:
		ok = true
		decodedCard(r, x.s.public)
	}
	out, err := jsonrpc.Encode(r)
	return out, ok, err != nil
}

func decodedPushConfig(x *exchange, c map[string]any) bool {
	if t, ok := c["taskId"]; ok && t != x.taskID {
		return false
	}
	if !decodedRestore(x, c, 0) {
		return false
	}
	if v, ok := c["taskId"].(string); ok && v != "" {
		c["taskId"] = x.seal(a2a.KindTask, v)
	}
	delete(c, "token")
	if a, ok := c["authentication"].(map[string]any); ok {
		delete(a, "credentials")
	}
	if p, ok := c["pushNotificationConfig"].(map[string]any); ok {
		delete(p, "token")
		if a, ok := p["authentication"].(map[string]any); ok {
			delete(a, "credentials")
		}
	}
	return true
}

// decodedRestore is the old Restore (walkURLs with its depth bound), each
// URL restored as the relay restores it.
func decodedRestore(x *exchange, v any, depth int) bool {
	if depth > 32 {
		return false
	}
	switch m := v.(type) {
	case map[string]any:
		for k, e := range m {
			if s, ok := e.(string); ok && k == "url" {
				o, _ := jsonrpc.ReadObject(append(jsonrpc.AppendString([]byte(`{"url":`), s), '}'))
				if mine, err := x.s.relay.Restore(o, x.principal); !mine || err != nil {
					return false
				}
				var r struct{ URL string }
				_ = json.Unmarshal(o.AppendTo(nil), &r)
				m[k] = r.URL
				continue
			}
			if !decodedRestore(x, e, depth+1) {
				return false
			}
		}
	case []any:
		for _, e := range m {
			if !decodedRestore(x, e, depth+1) {
				return false
			}
		}
	}
	return true
}

func decodedCard(c map[string]any, public string) {
	for _, k := range []string{"supportedInterfaces", "additionalInterfaces"} {
		list, ok := c[k].([]any)
		if !ok {
			delete(c, k)
			continue
		}
		kept := list[:0]
		seen := map[string]bool{}
		for _, it := range list {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			binding, _ := m["protocolBinding"].(string)
			if binding == "" {
				binding, _ = m["transport"].(string)
			}
			version, _ := m["protocolVersion"].(string)
			if !strings.EqualFold(binding, "JSONRPC") || m["tenant"] != nil && m["tenant"] != "" || seen[version] {
				continue
			}
			seen[version] = true
			m["url"] = public
			kept = append(kept, m)
		}
		c[k] = kept
	}
	if _, ok := c["url"]; ok {
		c["url"] = public
	}
	if _, ok := c["preferredTransport"]; ok {
		c["preferredTransport"] = "JSONRPC"
	}
}

// meaning is what a reader reads of a result: decoded, every handle of
// bob's replaced by what it opens.
func meaning(t testing.TB, s *Server, b []byte) any {
	t.Helper()
	for _, h := range handlesIn(string(b)) {
		if id, ok := s.handles.Open(byte(a2a.KindTask), "bob", h); ok {
			b = bytes.ReplaceAll(b, []byte(h), []byte("sealed:"+id))
		}
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// compareRead runs a push-config or extended-card result through
// fromUpstream and through the decoding path: on a result the reading path
// passes, both must pass the same meaning, or both say it is another's.
// The reading path refuses only what is ambiguous (a name twice, or two
// folding alike, in an object it reads; one it reads in another case).
func compareRead(t testing.TB, s *Server, method string, result []byte) {
	t.Helper()
	body := append(append([]byte(`{"jsonrpc":"2.0","id":7,"result":`), result...), '}')
	if !json.Valid(body) {
		return
	}
	out, keep := answerExchange(s, method).fromUpstream(body)
	want, ok, refused := decodedResult(answerExchange(s, method), result)
	if refused {
		return
	}
	if !keep {
		if !twoWay(result) && !folds(result) {
			t.Fatalf("%s: refused %s, which the decoding path passed as %s", method, result, want)
		}
		return
	}
	env, err := jsonrpc.ReadObject(out)
	if err != nil {
		t.Fatalf("%s: passed %s as %s", method, result, out)
	}
	if e, isErr := env.Raw("error"); isErr {
		if ok {
			t.Fatalf("%s: answered %s with %s, the decoding path passed %s", method, result, e, want)
		}
		return
	}
	if !ok {
		t.Fatalf("%s: passed %s as %s, the decoding path refused it", method, result, out)
	}
	got, _ := env.Raw("result")
	if g, w := meaning(t, s, got), meaning(t, s, want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: %s\nread as    %s\ndecoded as %s", method, result, got, want)
	}
}

// twoWay reports whether some object in raw, at any depth, gives a name
// twice or two that fold alike.
func twoWay(raw []byte) bool {
	o, err := jsonrpc.ReadObject(raw)
	if o == nil {
		return err != nil
	}
	found := false
	o.Walk(func(w *jsonrpc.Object) { found = found || w.Check(nil) != nil })
	return found
}

// folds reports whether some name in raw is spelled, in another case, like
// one the reading path reads.
func folds(raw []byte) bool { return foldsAny(raw, readNames) }

// readNames are the names the reading path reads somewhere, stateNames
// those stateOf reads.
var (
	readNames = slices.Concat(answerNames, resultNames, taskNames, updateNames, statusNames, messageNames, listNames,
		pushNames, cardNames, interfaceNames, []string{"configs", "schemes"})
	stateNames = slices.Concat(answerNames, taskNames, statusNames)
)

// readEquivalentSeeds are valid results of each method, in the shapes
// a2a-go and the Python SDK answer with, and hostile ones.
func readEquivalentSeeds(t testing.TB) map[string][]string {
	card, err := os.ReadFile(filepath.Join("testdata", "card.json"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]string{
		a2a.MethodGetPush: {
			`{"id":"p","taskId":"task-2","url":"https://hooks.example/a","token":"t","authentication":{"schemes":["Bearer"],"credentials":"c"}}`,
			`{"taskId":"task-2","pushNotificationConfig":{"id":"p","url":"https://h/","token":"t","authentication":{"schemes":["Bearer"],"credentials":"c"}}}`,
			`{"id":"p","taskId":"task-1","url":"https://hooks.example/a"}`,
			`{"id":"p","taskId":7,"url":"https://hooks.example/a"}`,
			`{"id":"p","url":"https://hooks.example/a","tenant":"x","metadata":{"n":1.50,"s":"\u00e9\ud83d\ude00<&>"}}`,
			`{"id":"p","taskId":"task-2","url":"https://hooks.example/a","authentication":"none","token":null}`,
		},
		a2a.MethodCreatePush: {
			`{"id":"p","taskId":"task-2","url":"https://hooks.example/a","token":"t"}`,
			`{"taskId":"","url":"u"}`,
		},
		a2a.MethodListPush: {
			`{"configs":[{"id":"p1","taskId":"task-2","url":"https://a/","token":"t"},{"id":"p2","taskId":"task-1","url":"https://b/"},7,null,{"taskId":"task-2","pushNotificationConfig":{"url":"https://c/","authentication":{"credentials":"c"}}}],"nextPageToken":"n"}`,
			`{"configs":[]}`,
			`{"configs":"x","other":[1,2]}`,
		},
		a2a.MethodExtendedCard: {
			string(card),
			`{"name":"a","url":"http://up/","preferredTransport":"GRPC","additionalInterfaces":[{"url":"http://up/","transport":"JSONRPC"},{"url":"http://up/g","transport":"GRPC"}]}`,
			`{"name":"a","supportedInterfaces":[{"url":"http://x/","protocolBinding":"jsonrpc","protocolVersion":"1.0","tenant":null},{"url":"http://y/","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"http://z/","protocolBinding":"JSONRPC","tenant":""},{"url":"t","protocolBinding":"JSONRPC","protocolVersion":"0.3","tenant":"t"},"x"],"additionalInterfaces":null}`,
		},
	}
}

// TestAnswerReadEquivalent: on valid push-config and extended-card answers
// the reading path passes what the decoding path passed (same meaning,
// handles opening to the same tasks) and refuses what it refused.
func TestAnswerReadEquivalent(t *testing.T) {
	s := answerServer(t, "http://127.0.0.1:1/jsonrpc")
	for method, results := range readEquivalentSeeds(t) {
		for _, r := range results {
			compareRead(t, s, method, []byte(r))
		}
	}
}

// FuzzAnswerReadEquivalent: compareRead on arbitrary results.
func FuzzAnswerReadEquivalent(f *testing.F) {
	methods := []string{a2a.MethodGetPush, a2a.MethodCreatePush, a2a.MethodListPush, a2a.MethodExtendedCard}
	for m, method := range methods {
		for _, r := range readEquivalentSeeds(f)[method] {
			f.Add(uint8(m), []byte(r))
		}
	}
	s := answerServer(f, "http://127.0.0.1:1/jsonrpc")
	f.Fuzz(func(t *testing.T, m uint8, result []byte) {
		if nesting(result) > 30 {
			return // the decoding path's walk of URLs stopped at 32 (refused); Walk has no bound but the message's
		}
		compareRead(t, s, methods[int(m)%len(methods)], result)
	})
}

// nesting is the deepest nesting of brackets in raw (strings' included:
// an over-estimate).
func nesting(raw []byte) int {
	n, deepest := 0, 0
	for _, c := range raw {
		switch c {
		case '{', '[':
			n++
			deepest = max(deepest, n)
		case '}', ']':
			n--
		}
	}
	return deepest
}

// BenchmarkAnswerRead: a ListTaskPushNotificationConfigs page of three
// configs and the extended card (testdata/card.json) through fromUpstream,
// against the decoding path it replaced.
func BenchmarkAnswerRead(b *testing.B) {
	s := answerServer(b, "http://127.0.0.1:1/jsonrpc")
	card, err := os.ReadFile(filepath.Join("testdata", "card.json"))
	if err != nil {
		b.Fatal(err)
	}
	const c = `{"id":"p","taskId":"task-2","url":"https://hooks.example/a","token":"t","authentication":{"schemes":["Bearer"],"credentials":"c"}}`
	for _, bc := range []struct{ name, method, result string }{
		{"ListPush", a2a.MethodListPush, `{"configs":[` + c + `,` + c + `,` + c + `]}`},
		{"ExtendedCard", a2a.MethodExtendedCard, string(card)},
	} {
		body := []byte(`{"jsonrpc":"2.0","id":7,"result":` + bc.result + `}`)
		b.Run(bc.name+"/read", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, keep := answerExchange(s, bc.method).fromUpstream(body); !keep {
					b.Fatal("refused")
				}
			}
		})
		b.Run(bc.name+"/decoded", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				env, _ := jsonrpc.ReadObject(body)
				raw, _ := env.Raw("result")
				out, _, _ := decodedResult(answerExchange(s, bc.method), raw)
				env.SetRaw("result", out)
				_ = env.AppendTo(nil)
			}
		})
	}
}

// decodedState is the old reading of Warden's own GetTask answer
// (readState): encoding/json into a struct.
func decodedState(b []byte, taskID string) (string, error) {
	var ans struct {
		Result *struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return "", err
	}
	if ans.Result == nil {
		return "", nil
	}
	if ans.Result.ID != taskID {
		return "", errors.New("another task")
	}
	return ans.Result.Status.State, nil
}

// compareState: where stateOf reads a state, the old reading read the
// same; where it refuses an answer the old reading took, the answer gives
// a name twice, two folding alike, or one stateOf reads in another case,
// or a result beside an error.
func compareState(t testing.TB, b []byte) {
	t.Helper()
	got, err := stateOf(b, "task-9")
	want, wantErr := decodedState(b, "task-9")
	switch {
	case err == nil && wantErr != nil && bytes.Contains(b, []byte(`"error"`)):
		// The old reading refused an error member of another shape, one
		// it did not use: stateOf reads none (and refuses one beside a
		// result).
	case err == nil && (wantErr != nil || got != want):
		t.Fatalf("%s: read %q, the old reading %q (%v)", b, got, want, wantErr)
	case err != nil && wantErr == nil && !twoWay(b) && !foldsAny(b, stateNames):
		// The old reading took an error of another shape ({"code":"x"}
		// fails it, not stateOf): only a result is compared.
		if r, has := answerResult(b); has && string(r) != "null" && !twoWay(r) && !bytes.Contains(b, []byte(`"error"`)) {
			t.Fatalf("%s: refused (%v), the old reading read %q", b, err, want)
		}
	}
}

// answerResult is the result member of an answer, as it came.
func answerResult(b []byte) ([]byte, bool) {
	o, _ := jsonrpc.ReadObject(b)
	if o == nil {
		return nil, false
	}
	return o.Raw("result")
}

// foldsAny reports whether a name in raw is spelled, in another case, like
// one of names.
func foldsAny(raw []byte, names []string) bool {
	low := bytes.ToLower(raw)
	for _, n := range names {
		if bytes.Count(low, []byte(`"`+strings.ToLower(n)+`"`)) != bytes.Count(raw, []byte(`"`+n+`"`)) {
			return true
		}
	}
	return false
}

var stateSeeds = []string{
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"t"},"history":[],"artifacts":[{"x":1}]}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":{"state":"completed"},"kind":"task"}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9"}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":null}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-1","status":{"state":"x"}}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":null}`,
	`{"jsonrpc":"2.0","id":"warden-state","error":{"code":-32001,"message":"Task not found"}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":{"state":7}}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":"x"}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":{"state":"x"}},"error":{"code":"x"}}`,
	`{"jsonrpc":"2.0","id":"warden-state","error":{"code":"x"}}`,
	`{"jsonrpc":"2.0","id":"warden-state","result":{"id":"task-9","status":{"state":"x"}},"error":{"code":1}}`,
}

// TestStateOfEquivalent: stateOf reads valid GetTask answers as the old
// reading did.
func TestStateOfEquivalent(t *testing.T) {
	for _, s := range stateSeeds {
		compareState(t, []byte(s))
	}
}

// FuzzStateOfEquivalent: compareState on arbitrary answers.
func FuzzStateOfEquivalent(f *testing.F) {
	for _, s := range stateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { compareState(t, b) })
}
