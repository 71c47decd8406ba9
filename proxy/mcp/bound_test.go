package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentwarden/warden/proxy/listener"
	"github.com/agentwarden/warden/proxy/relay"
)

// TestTooBigEvents: an SSE event over the bound is never forwarded, in part
// or whole; the answer to the exchange's request becomes an error naming
// the limit, with the event's id, and other messages are dropped leaving no
// trace (not even their id: issue 24 item 10); the stream goes on.
func TestTooBigEvents(t *testing.T) {
	big := strings.Repeat("x", 200<<10) // over the 64 KiB bound, longer than the read buffer
	tests := []struct {
		name    string
		request string
		event   string
		want    []string // substrings of the output, in order
		wantNot []string
	}{
		{"answer, id last (TypeScript SDK)", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big"}}`,
			"id: e1\nevent: message\ndata: {\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + big + "\"}]},\"jsonrpc\":\"2.0\",\"id\":7}\n\n",
			[]string{"id: e1\n", "event: message\n", `"id":7`, "mcp.max_response_bytes (65536 bytes)", "data: after"}, []string{"xxxx"}},
		{"answer, id first (Go SDK)", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"big"}}`,
			"data: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"text\":\"" + big + "\"}}\nid: e2\n\n",
			[]string{"id: e2\n", `"id":"a"`, "mcp.max_response_bytes", "data: after"}, []string{"xxxx"}},
		{"answer to another id", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`,
			"id: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"text\":\"" + big + "\"}}\n\n",
			[]string{"data: after"}, []string{"xxxx", "max_response_bytes", "data: {", "id: e3"}},
		{"notification", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`,
			"id: e4\ndata: {\"method\":\"notifications/message\",\"params\":{\"data\":\"" + big + "\"},\"jsonrpc\":\"2.0\"}\n\n",
			[]string{"data: after"}, []string{"xxxx", "max_response_bytes", "data: {", "id: e4"}},
		{"many short data lines", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`,
			"id: e5\n" + strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 100) + "\n",
			[]string{"id: e5\n", `"id":1`, "mcp.max_response_bytes", "data: after"}, []string{"yyyy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := unitServer(t)
			s.cfg.MaxResponseBytes = 64 << 10
			x := exchangeFor(t, s, alice, tc.request)
			var rec recorder
			in := tc.event + "data: after\n\n"
			err := relay.CopyEvents(&rec, rec.flush, strings.NewReader(in), relay.Events{
				Data: func(b []byte) ([]byte, bool) { return b, true }, Max: relay.EventMax(s.cfg.MaxResponseBytes), TooBig: x.tooBig})
			if err != nil {
				t.Fatal(err)
			}
			out := rec.String()
			rest := out
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%.400s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Fatalf("output holds %q:\n%.400s", w, out)
				}
			}
			if want := 1 + strings.Count(out, "mcp.max_response_bytes"); rec.flushes != want {
				t.Errorf("%d flushes, want %d (one per event sent)", rec.flushes, want)
			}
		})
	}
	t.Run("a later answer to the same id is dropped", func(t *testing.T) {
		s := unitServer(t)
		x := exchangeFor(t, s, alice, `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		if b := x.tooBig([]byte(`{"result":{"x":"`)); !bytes.Contains(b, []byte("max_response_bytes")) {
			t.Fatalf("tooBig = %s", b)
		}
		if _, keep := x.fromUpstream([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`)); keep {
			t.Fatal("a second answer to 7 passed")
		}
	})
	t.Run("no handler ends the stream", func(t *testing.T) {
		var rec recorder
		err := relay.CopyEvents(&rec, rec.flush, strings.NewReader("data: "+big+"\n\n"), relay.Events{Data: func(b []byte) ([]byte, bool) { return b, true }, Max: 1024})
		if err != relay.ErrEventTooLarge {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unbounded", func(t *testing.T) {
		var rec recorder
		err := relay.CopyEvents(&rec, rec.flush, strings.NewReader("data: "+big+"\n\n"), relay.Events{Data: func(b []byte) ([]byte, bool) { return b, true }})
		if err != nil || rec.String() != "data: "+big+"\n\n" {
			t.Fatalf("err %v, %d bytes", err, len(rec.String()))
		}
	})
}

// TestRequestBound: a request over mcp.max_body_bytes is answered 413 for
// its id, naming the limit, and never reaches the upstream.
func TestRequestBound(t *testing.T) {
	h := newHarness(t, Config{HTTPConfig: listener.HTTPConfig{MaxBodyBytes: 512}})
	before := len(h.up.received("tools/call"))
	body := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"fast","arguments":{"t":"` + strings.Repeat("z", 1024) + `"}}}`
	r := h.post(t, alice, body, nil)
	if r.status != 413 || r.last(t)["id"] != float64(42) || !strings.Contains(string(r.body), "mcp.max_body_bytes (512 bytes)") {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	if len(h.up.received("tools/call")) != before {
		t.Fatal("the upstream saw the request")
	}
}

func TestScanHead(t *testing.T) {
	for _, tc := range []struct {
		in, method, id string
		hasMethod      bool
	}{
		{`{"result":{"id":9,"method":"x"},"jsonrpc":"2.0","id":7}`, "", "7", false},
		{`{"jsonrpc":"2.0","id":"a","result":{"text":"xx`, "", `"a"`, false},
		{`{"method":"notifications/message","params":{"data":"xx`, "notifications/message", "", true},
		{`{"params":{"method":"m"},"id":1`, "", "", false}, // the id may go on: 12
		{`{"text":"\"method\":\"m\"","id":3,`, "", "3", false},
		{`{"meth\u006fd":"m"}`, "", "", false},
		{`[{"method":"m"}]`, "", "", false},
		{``, "", "", false},
	} {
		h := scanHead([]byte(tc.in))
		if h.method != tc.method || h.hasMethod != tc.hasMethod || string(h.id) != tc.id {
			t.Errorf("scanHead(%s) = %q %v %q, want %q %v %q", tc.in, h.method, h.hasMethod, h.id, tc.method, tc.hasMethod, tc.id)
		}
	}
}

// FuzzScanHead: on a whole message, scanHead agrees with a decoder about
// the top-level method and id; on any prefix it does not panic.
func FuzzScanHead(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"method":"a","params":{"id":2}}`, `{"id":"x\"y","method":"m"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		for i := 0; i <= len(b); i += 7 {
			scanHead(b[:i])
		}
		if !json.Valid(b) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil || bytes.Contains(b, []byte(`\`)) {
			return
		}
		h := scanHead(b)
		_, hasMethod := m["method"]
		if h.hasMethod != hasMethod {
			t.Fatalf("scanHead(%s): method %v, decoder %v", s, h.hasMethod, hasMethod)
		}
		if id, ok := m["id"]; ok && h.id != nil && !bytes.Equal(bytes.TrimSpace(id), h.id) {
			t.Fatalf("scanHead(%s): id %s, decoder %s", s, h.id, id)
		}
	})
}

// recorder is the writer side of relay.CopyEvents: what was written and how
// many flushes followed.
type recorder struct {
	strings.Builder
	flushes int
}

func (r *recorder) flush() { r.flushes++ }
