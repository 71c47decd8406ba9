package mcp

import (
	"bytes"
	"slices"
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// scanStringsOld is scanStrings as it was before it was read on
// jsonrpc.Scan's pass (2026-11-29), Valid and CountFold its own passes:
// it finds, in one pass and without decoding, every member named
// one of keys whose value is a string. b must be valid JSON (json.Valid). ok
// is false when the message cannot be read this way (not an object, an
// escape in a key or in a wanted value, a key that folds like a wanted one
// or is not ASCII); callers then take the reading path. It never reads a
// string's content as structure, so a "taskId" inside a text is not a member.
// The spans are appended to dst (a caller's buffer on its stack).
func scanStringsOld(dst []span, b []byte, keys ...string) (spans []span, ok bool) {
	i := jsonrpc.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	stack := make([]int, 0, 16) // object numbers; -1 for an array
	spans = dst[:0]
	objects := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '{':
			objects++
			stack = append(stack, objects)
			i++
		case '[':
			stack = append(stack, -1)
			i++
		case '}', ']':
			if len(stack) == 0 {
				return nil, false
			}
			stack = stack[:len(stack)-1]
			i++
			if len(stack) == 0 {
				if jsonrpc.SkipSpace(b, i) != len(b) {
					return nil, false
				}
				return spans, true
			}
		case '"':
			end, escaped := jsonrpc.StringEnd(b, i)
			if end < 0 {
				return nil, false
			}
			key := b[i+1 : end-1]
			i = jsonrpc.SkipSpace(b, end)
			if i >= len(b) || b[i] != ':' || len(stack) == 0 || stack[len(stack)-1] < 0 {
				continue // a value, not a key
			}
			if escaped && bytes.IndexByte(key, '\\') >= 0 {
				return nil, false // "task\u0049d" is taskId to a decoder
			}
			if misspells(key, len(stack) == 1, keys) {
				return nil, false // "TaskId" is taskId to a reader matching names without case
			}
			i = jsonrpc.SkipSpace(b, i+1)
			if len(stack) == 1 {
				// The message's own members: where they are, for the id
				// and the kind of message.
				for _, m := range ownMembers {
					if string(key) == m {
						spans = append(spans, span{key: m, obj: stack[0], depth: 1, start: i, end: scalarEnd(b, i)})
					}
				}
			}
			for _, k := range keys {
				if string(key) != k || i >= len(b) || b[i] != '"' {
					continue
				}
				vEnd, vEsc := jsonrpc.StringEnd(b, i)
				if vEnd < 0 || vEsc {
					return nil, false
				}
				spans = append(spans, span{key: k, obj: stack[len(stack)-1], depth: len(stack), start: i + 1, end: vEnd - 1})
			}
		default:
			i++
		}
	}
	return nil, false
}

// FuzzScanStrings holds scanStrings to the three passes over an answer it
// replaced: jsonrpc.Valid, jsonrpc.CountFold of "taskIds" and
// scanStringsOld, on any bytes: the same validity (but for a message
// nested over 64 deep, which scanStrings leaves to the reading path), the
// same count, the same readability and the same spans.
func FuzzScanStrings(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"taskId":"t-a","status":"working"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t-b","status":"completed"}}`,
		`{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-a"}}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"taskIds":["a"],"TaskId":"b","x":"task_ids \u0074"}}`,
		`{"id":[1,{"taskId":"a"}],"result":{"taskId":5,"status":"x\"y"}} `,
		`[{"taskId":"a"}]`, `{"a":1,}`, `{"task\u0049d":"a"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var buf [8]span
		spans, folds, valid, readable := scanStrings(buf[:0], b, "taskIds", "taskId", "status")
		wantValid := jsonrpc.Valid(b)
		if valid != wantValid {
			if _, scanned := jsonrpc.Scan(b, "", nil); scanned || !wantValid {
				t.Fatalf("scanStrings(%q): valid %v, Valid %v", b, valid, wantValid)
			}
			return // over 64 deep
		}
		if !valid {
			if readable {
				t.Fatalf("scanStrings(%q): readable but not valid", b)
			}
			return
		}
		if want := jsonrpc.CountFold(b, "taskIds"); folds != want {
			t.Fatalf("scanStrings(%q): %d folds, CountFold %d", b, folds, want)
		}
		wantSpans, wantReadable := scanStringsOld(nil, b, "taskId", "status")
		if readable != wantReadable || readable && !slices.Equal(spans, wantSpans) {
			t.Fatalf("scanStrings(%q) = %+v %v, before %+v %v", b, spans, readable, wantSpans, wantReadable)
		}
	})
}

// BenchmarkScanAnswer reads the upstream's answer to tasks/get as the fast
// path does before it splices (scan: scanStrings' one pass) and as it did
// before (passes: Valid, CountFold, scanStringsOld).
func BenchmarkScanAnswer(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":7,"result":{"taskId":"t-1","status":"working","statusMessage":"the task is running","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:01Z","ttl":60000,"pollInterval":1000}}`)
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			var buf [8]span
			if _, folds, valid, readable := scanStrings(buf[:0], data, "taskIds", "taskId", "status"); !valid || folds > 0 || !readable {
				b.Fatal("not read")
			}
		}
	})
	b.Run("passes", func(b *testing.B) {
		for b.Loop() {
			var buf [8]span
			if !jsonrpc.Valid(data) || jsonrpc.CountFold(data, "taskIds") > 0 {
				b.Fatal("not read")
			}
			if _, readable := scanStringsOld(buf[:0], data, "taskId", "status"); !readable {
				b.Fatal("not read")
			}
		}
	})
}
