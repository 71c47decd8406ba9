package relay

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// recorder is the writer side of CopyEvents: what was written, call by call,
// and how many flushes followed.
type recorder struct {
	writes  []string
	flushes int
	// flushedAt[i] is the number of writes when flush i happened.
	flushedAt []int
	fail      error
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) flush() {
	r.flushes++
	r.flushedAt = append(r.flushedAt, len(r.writes))
}

func (r *recorder) String() string { return strings.Join(r.writes, "") }

// dropper keeps events whose data does not contain "drop" and upper-cases
// "rewrite" to "REWRITTEN\nLINE"; it records the data it saw.
type dropper struct{ seen []string }

func (d *dropper) fn(data []byte) ([]byte, bool) {
	d.seen = append(d.seen, string(data))
	if bytes.Contains(data, []byte("drop")) {
		return nil, false
	}
	if bytes.Equal(data, []byte("rewrite")) {
		return []byte("REWRITTEN\nLINE"), true
	}
	return data, true
}

func TestCopyEvents(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // longer than the reader's buffer
	tests := []struct {
		name    string
		in      string
		max     int // 0: 1 MiB
		out     string
		seen    []string
		flushes int
		err     error
	}{
		{name: "empty stream", in: "", out: ""},
		{name: "one event", in: "data: {\"a\":1}\n\n", out: "data: {\"a\":1}\n\n", seen: []string{`{"a":1}`}, flushes: 1},
		{name: "multi-line data", in: "data: a\ndata: b\ndata: c\n\n", out: "data: a\ndata: b\ndata: c\n\n", seen: []string{"a\nb\nc"}, flushes: 1},
		{name: "CRLF", in: "id: 1\r\ndata: a\r\ndata: b\r\n\r\n", out: "id: 1\ndata: a\ndata: b\n\n", seen: []string{"a\nb"}, flushes: 1},
		{name: "bare CR inside a line", in: "id: 1\rdata: {\"raw\":1}\r\r\n", out: "", err: ErrBareCR},
		{name: "bare CR ends an event line", in: "data: a\r\r\n\n", out: "", err: ErrBareCR},
		{name: "no space after colon", in: "data:x\n\n", out: "data: x\n\n", seen: []string{"x"}, flushes: 1},
		{name: "only one space removed", in: "data:  x\n\n", out: "data:  x\n\n", seen: []string{" x"}, flushes: 1},
		{name: "empty data", in: "data:\n\n", out: "data: \n\n", seen: []string{""}, flushes: 1},
		{name: "comment only", in: ": keep-alive\n\n", out: ": keep-alive\n\n", flushes: 1},
		{name: "fields kept", in: "id: 7\nevent: message\nretry: 100\n: note\ndata: x\n\n", out: "id: 7\nevent: message\nretry: 100\n: note\ndata: x\n\n", seen: []string{"x"}, flushes: 1},
		{name: "fields first", in: "data: x\nid: 7\n\n", out: "id: 7\ndata: x\n\n", seen: []string{"x"}, flushes: 1},
		{name: "id without data", in: "id: 9\n\n", out: "id: 9\n\n", flushes: 1},
		// A dropped event leaves no trace (issue 24 item 10): no blank
		// event, no id line; its retry comes with the next event sent.
		{name: "dropped event leaves nothing", in: "id: 7\nevent: message\n: c\nretry: 5\ndata: drop me\n\n", out: "", seen: []string{"drop me"}},
		{name: "dropped event without id", in: "event: message\ndata: drop\n\n", out: "", seen: []string{"drop"}},
		{name: "dropped between kept", in: "id: 1\ndata: a\n\nid: 2\ndata: drop\n\nid: 3\ndata: c\n\n", out: "id: 1\ndata: a\n\nid: 3\ndata: c\n\n", seen: []string{"a", "drop", "c"}, flushes: 2},
		{name: "a dropped event's retry comes with the next", in: "retry: 5\ndata: drop\n\nretry: 7\ndata: drop\n\nid: 3\ndata: c\n\n", out: "retry: 7\nid: 3\ndata: c\n\n", seen: []string{"drop", "drop", "c"}, flushes: 1},
		{name: "a dropped event's retry already in force", in: "retry: 5\ndata: a\n\nretry: 5\ndata: drop\n\ndata: c\n\n", out: "retry: 5\ndata: a\n\ndata: c\n\n", seen: []string{"a", "drop", "c"}, flushes: 2},
		{name: "a dropped event's retry before the next's own", in: "retry: 5\ndata: drop\n\nretry: 9\ndata: c\n\n", out: "retry: 9\ndata: c\n\n", seen: []string{"drop", "c"}, flushes: 1},
		{name: "dropped events then a comment", in: "data: drop\n\n: ping\n\n", out: ": ping\n\n", seen: []string{"drop"}, flushes: 1},
		{name: "rewritten data on several lines", in: "data: rewrite\n\n", out: "data: REWRITTEN\ndata: LINE\n\n", seen: []string{"rewrite"}, flushes: 1},
		{name: "blank lines between events", in: "\n\ndata: a\n\n\n\ndata: b\n\n\n", out: "data: a\n\ndata: b\n\n", seen: []string{"a", "b"}, flushes: 2},
		{name: "a leading BOM", in: "\xEF\xBB\xBFdata: drop the first\n\ndata: a\n\n", out: "data: a\n\n", seen: []string{"drop the first", "a"}, flushes: 1},
		{name: "a leading BOM before an id", in: "\xEF\xBB\xBFid: 1\ndata: a\n\n", out: "id: 1\ndata: a\n\n", seen: []string{"a"}, flushes: 1},
		// A field named with a BOM is no field to a client, but the first
		// line of Warden's output would be read as data: never sent.
		{name: "a BOM later is part of its field's name", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", out: "data: a\n\n", seen: []string{"a"}, flushes: 1},
		{name: "two leading BOMs", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: drop\n\n", out: ""},
		{name: "a BOM field first after a dropped event", in: "data: drop\n\n\xEF\xBB\xBFdata: drop\n\nid: 1\n\n", out: "id: 1\n\n", seen: []string{"drop"}, flushes: 1},
		{name: "a bare data field", in: "data\ndata: drop\n\n", out: "", seen: []string{"\ndrop"}},
		{name: "a bare data field alone", in: "data\n\n", out: "data: \n\n", seen: []string{""}, flushes: 1},
		{name: "a bare id field goes with its dropped event", in: "id\ndata: drop\n\n", out: "", seen: []string{"drop"}},
		{name: "long line within the bound", in: "data: " + long + "\n\n", out: "data: " + long + "\n\n", seen: []string{long}, flushes: 1},
		{name: "long line CRLF", in: "data: " + long + "\r\n\r\n", out: "data: " + long + "\n\n", seen: []string{long}, flushes: 1},

		{name: "unterminated data line", in: "data: a\n\ndata: b", out: "data: a\n\n", seen: []string{"a"}, flushes: 1, err: io.ErrUnexpectedEOF},
		{name: "unterminated event", in: "data: a\n", out: "", err: io.ErrUnexpectedEOF},
		{name: "unterminated comment", in: ": x\n", out: "", err: io.ErrUnexpectedEOF},

		{name: "event over the bound", in: "data: 0123456789abcdef\n\n", max: 16, err: ErrEventTooLarge},
		{name: "at the bound", in: "data: 0123456789\n\n", max: 18, out: "data: 0123456789\n\n", seen: []string{"0123456789"}, flushes: 1},
		{name: "over the bound after a good event", in: "data: a\n\ndata: 0123456789abcdef\n\n", max: 16, out: "data: a\n\n", seen: []string{"a"}, flushes: 1, err: ErrEventTooLarge},
		{name: "the bound counts every line of an event", in: "data: 0123\ndata: 4567\ndata: 89ab\n\n", max: 24, err: ErrEventTooLarge},
		{name: "the bound counts field lines", in: "id: 0123456789\nevent: 0123456789\ndata: x\n\n", max: 24, err: ErrEventTooLarge},
		{name: "the bound is per event", in: strings.Repeat("data: 0123456789\n\n", 10), max: 20, out: strings.Repeat("data: 0123456789\n\n", 10), flushes: 10,
			seen: strings.Split(strings.Repeat("0123456789,", 10), ",")[:10]},
		{name: "long line over the bound", in: "data: a\n\ndata: " + long + "\n\n", max: 40 << 10, out: "data: a\n\n", seen: []string{"a"}, flushes: 1, err: ErrEventTooLarge},
		{name: "long unterminated line over the bound", in: "data: " + long, max: 40 << 10, err: ErrEventTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			var rec recorder
			var d dropper
			err := CopyEvents(&rec, rec.flush, strings.NewReader(tc.in), Events{Max: max, Data: d.fn})
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if got := rec.String(); got != tc.out {
				t.Errorf("output\n%q\nwant\n%q", shorten(got), shorten(tc.out))
			}
			if len(d.seen) != len(tc.seen) {
				t.Fatalf("fn saw %d events, want %d", len(d.seen), len(tc.seen))
			}
			for i := range d.seen {
				if d.seen[i] != tc.seen[i] {
					t.Errorf("fn saw %q, want %q", shorten(d.seen[i]), shorten(tc.seen[i]))
				}
			}
			// One flush per event, after its last write (a long data line
			// is written as it is, apart from its event's other lines).
			if rec.flushes != tc.flushes || len(rec.writes) < tc.flushes {
				t.Errorf("%d writes and %d flushes, want %d", len(rec.writes), rec.flushes, tc.flushes)
			}
			if n := len(rec.flushedAt); n > 0 && rec.flushedAt[n-1] != len(rec.writes) {
				t.Errorf("last flush after %d of %d writes", rec.flushedAt[n-1], len(rec.writes))
			}
		})
	}
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:40] + "..." + s[len(s)-20:]
	}
	return s
}

// TestCopyEventsBlankLines: blank lines outside an event are no event, and
// must not count toward the next event's size (servers and proxies may send
// bare newlines as keep-alives).
func TestCopyEventsBlankLines(t *testing.T) {
	in := strings.Repeat("\n", 64) + "data: a\n\n"
	var rec recorder
	err := CopyEvents(&rec, rec.flush, strings.NewReader(in), Events{Max: 16, Data: func(b []byte) ([]byte, bool) { return b, true }})
	if err != nil {
		t.Errorf("BUG: CopyEvents(64 blank lines + an 8-byte event, max 16) = %v; the blank lines are counted in the event's size (size is reset only by emit)", err)
	}
	if rec.String() != "data: a\n\n" {
		t.Errorf("output %q", rec.String())
	}
}

func TestCopyEventsWriteError(t *testing.T) {
	boom := errors.New("client gone")
	rec := recorder{fail: boom}
	err := CopyEvents(&rec, rec.flush, strings.NewReader("data: a\n\ndata: b\n\n"), Events{Max: 1 << 10, Data: func(b []byte) ([]byte, bool) { return b, true }})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if rec.flushes != 0 {
		t.Fatal("flushed after a failed write")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestCopyEventsReadError(t *testing.T) {
	boom := errors.New("upstream reset")
	var rec recorder
	err := CopyEvents(&rec, rec.flush, io.MultiReader(strings.NewReader("data: a\n\n"), errReader{boom}), Events{Max: 1 << 10, Data: func(b []byte) ([]byte, bool) { return b, true }})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if rec.String() != "data: a\n\n" {
		t.Fatalf("output %q", rec.String())
	}
}

func FuzzCopyEvents(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\n",
		"id: 1\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\n",
		": ping\n\nretry: 10\ndata: drop\n\n",
		"data:x\ndata:\n\n\n\ndata: rewrite\n\n",
		"data: a\n\ndata: b",
		"id: 7\nid: 8\ndata: drop\n\nid:9\n\n",
		"\r\n\r\ndata: \r\r\n\n",
		"\xEF\xBB\xBFdata: drop\n\n",
		"data\ndata: x\nid\n\n",
	} {
		f.Add([]byte(s), uint16(64))
		f.Add([]byte(s), uint16(4))
	}
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		bound := int(max%512) + 1
		var rec recorder
		var d dropper
		err := CopyEvents(&rec, rec.flush, bytes.NewReader(in), Events{Max: bound, Data: d.fn})
		if err != nil && !errors.Is(err, ErrEventTooLarge) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrBareCR) {
			t.Fatalf("unexpected error %v", err)
		}
		// Only whole events are written, one write each, each flushed.
		if rec.flushes != len(rec.writes) {
			t.Fatalf("%d writes, %d flushes", len(rec.writes), rec.flushes)
		}
		for _, w := range rec.writes {
			if strings.Contains(w, "\r") {
				t.Fatalf("write %q holds a carriage return a client would read as a line end", w)
			}
			if w != "\n" && !strings.HasSuffix(w, "\n\n") {
				t.Fatalf("write %q is not a whole event", w)
			}
			if strings.Contains(strings.TrimSuffix(w, "\n\n"), "\n\n") {
				t.Fatalf("write %q holds more than one event", w)
			}
			if strings.Contains(w, "drop") && strings.Contains(w, "data:") {
				for _, l := range strings.Split(w, "\n") {
					if strings.HasPrefix(l, "data:") && strings.Contains(l, "drop") {
						t.Fatalf("dropped data forwarded: %q", w)
					}
				}
			}
		}
		if err != nil {
			return
		}
		// With fn the identity, copying is a fixed point after one pass.
		id := func(b []byte) ([]byte, bool) { return b, true }
		var once, twice recorder
		if err := CopyEvents(&once, once.flush, bytes.NewReader(in), Events{Max: 1 << 20, Data: id}); err != nil {
			t.Fatalf("identity pass: %v", err)
		}
		if err := CopyEvents(&twice, twice.flush, strings.NewReader(once.String()), Events{Max: 1 << 20, Data: id}); err != nil {
			t.Fatalf("second pass: %v", err)
		}
		if once.String() != twice.String() {
			t.Fatalf("not a fixed point:\n%q\n%q", once.String(), twice.String())
		}
	})
}
