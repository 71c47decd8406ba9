package relay

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestCopyEventsTooBig(t *testing.T) {
	long := strings.Repeat("y", 100<<10)
	tests := []struct {
		name   string
		in     string
		max    int
		answer bool   // TooBig answers with "ERR"; else it drops the event
		prefix string // what TooBig got
		out    string
	}{
		{name: "answered, fields kept", in: "id: 7\nevent: message\ndata: 0123456789abcdef\n\n", max: 24, answer: true,
			prefix: "0123456789abcdef", out: "id: 7\nevent: message\ndata: ERR\n\n"},
		{name: "dropped: nothing", in: "id: 7\ndata: 0123456789abcdef\n\ndata: a\n\n", max: 16, prefix: "0123456789abcdef",
			out: "data: a\n\n"},
		{name: "prefix bounded on a long line", in: "data: " + long + "\n\n", max: 100, answer: true, prefix: long[:100], out: "data: ERR\n\n"},
		{name: "data after the bound is not held", in: "data: 0123456789\ndata: abcdefghij\nid: 9\n\n", max: 20, answer: true,
			prefix: "0123456789\nabcdefghij"[:20], out: "id: 9\ndata: ERR\n\n"},
		{name: "over by its blank line", in: "data: 0123456789\n\n", max: 17, answer: true, prefix: "0123456789", out: "data: ERR\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			var got []string
			tooBig := func(p []byte) []byte {
				got = append(got, string(p))
				if tc.answer {
					return []byte("ERR")
				}
				return nil
			}
			keep := func(b []byte) ([]byte, bool) { return b, true }
			if err := CopyEvents(&rec, rec.flush, strings.NewReader(tc.in), Events{Max: tc.max, Data: keep, TooBig: tooBig}); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.prefix {
				t.Errorf("TooBig got %q, want [%q]", got, shorten(tc.prefix))
			}
			if rec.String() != tc.out {
				t.Errorf("output %q, want %q", rec.String(), tc.out)
			}
		})
	}
}

func TestCopyEventsID(t *testing.T) {
	in := "id: 1\ndata: a\n\nid\ndata: b\n\nid: 3\ndata: drop\n\n: c\n\n"
	tests := []struct {
		name string
		id   func([]byte) ([]byte, bool)
		out  string
	}{
		{name: "rewritten", id: func(v []byte) ([]byte, bool) { return append([]byte("s-"), v...), true },
			out: "id: s-1\ndata: a\n\nid: s-\ndata: b\n\n: c\n\n"},
		{name: "left out", id: func([]byte) ([]byte, bool) { return nil, false }, out: "data: a\n\ndata: b\n\n: c\n\n"},
		{name: "as they are", out: "id: 1\ndata: a\n\nid\ndata: b\n\n: c\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			var d dropper
			if err := CopyEvents(&rec, rec.flush, strings.NewReader(in), Events{Data: d.fn, ID: tc.id}); err != nil {
				t.Fatal(err)
			}
			if rec.String() != tc.out {
				t.Errorf("output %q, want %q", rec.String(), tc.out)
			}
		})
	}
}

// refEvents is a reference reading of a stream that holds no bare CR, as an
// SSE client reads it: lines end at "\n" or "\r\n", a leading BOM is no
// part of the first line, blank lines end events, an unterminated last
// event is no event. ok is false when the stream ends inside an event.
func refEvents(in []byte) (evs []Event, ok bool) {
	s := strings.TrimPrefix(string(in), string(bom))
	var cur *Event
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return evs, false
		}
		l := strings.TrimSuffix(s[:i], "\r")
		s = s[i+1:]
		switch {
		case l == "" && cur != nil:
			evs, cur = append(evs, *cur), nil
		case l == "":
		default:
			if cur == nil {
				cur = &Event{}
			}
			if v, isData := dataValue([]byte(l)); isData {
				if cur.HasData {
					cur.Data = append(cur.Data, '\n')
				}
				cur.Data, cur.HasData = append(cur.Data, v...), true
			} else {
				cur.Fields = append(cur.Fields, []byte(l))
			}
		}
	}
	return evs, cur == nil
}

func sameEvent(a, b Event) bool {
	if a.HasData != b.HasData || !bytes.Equal(a.Data, b.Data) || a.Over != b.Over || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		if !bytes.Equal(a.Fields[i], b.Fields[i]) {
			return false
		}
	}
	return true
}

// chunked returns its bytes n at a time, as a network read may.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// FuzzReader reads malformed streams (CR/LF variants, long lines, a missing
// final newline, huge events) and checks the Reader against refEvents:
// without a bare CR and within the bound, the same events; a bare CR, an
// unterminated event or an event over the bound are errors, never an event
// the client would read otherwise. Nothing read is over the bound unless
// marked Over, and an Over event holds at most the bound.
func FuzzReader(f *testing.F) {
	huge := strings.Repeat("z", 33<<10) // longer than the read buffer
	for _, s := range []string{
		"data: {\"a\":1}\n\n",
		"id: 1\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\n",
		"data: a\rdata: b\n\n",
		"data: a\r\n\r\r\n",
		"\r\n\n\r\n: ping\r\n\r\n",
		"data: a\n\ndata: b",
		"data: a\n\ndata: b\n",
		"data: a\r",
		"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n",
		"\xEF\xBB\xBF",
		"data\ndata:\ndata: \n\n",
		"data: " + huge + "\n\n",
		"id: 1\ndata: " + huge + "\nid: 2\n\ndata: after\n\n",
		"data: " + huge,
		": " + huge + "\r\n\r\n",
	} {
		f.Add([]byte(s), uint32(1<<20), true, uint8(0))
		f.Add([]byte(s), uint32(40), false, uint8(3))
		f.Add([]byte(s), uint32(64<<10), true, uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, bound uint32, skip bool, chunk uint8) {
		max := int(bound % (1 << 21))
		var src io.Reader = bytes.NewReader(in)
		if chunk > 0 {
			src = &chunked{b: in, n: int(chunk)}
		}
		rd := NewReader(src, max, skip)
		var got []Event
		var err error
		for {
			var e Event
			if e, err = rd.Next(); err != nil {
				break
			}
			got = append(got, e)
			if len(got) > len(in) {
				t.Fatalf("more events than bytes")
			}
		}
		for _, e := range got {
			for _, l := range e.Fields {
				if bytes.ContainsAny(l, "\r\n") || len(l) == 0 {
					t.Fatalf("field %q holds a line end or is empty", l)
				}
				if _, isData := dataValue(l); isData {
					t.Fatalf("data line %q read as a field", l)
				}
			}
			if bytes.IndexByte(e.Data, '\r') >= 0 {
				t.Fatalf("data %q holds a carriage return", e.Data)
			}
			if max > 0 && e.Over && len(e.Data) > max {
				t.Fatalf("over event holds %d bytes of data, bound %d", len(e.Data), max)
			}
			if e.Over && !skip {
				t.Fatal("an over event read without skip")
			}
		}
		want, complete := refEvents(in)
		bare := bytes.IndexByte(bytes.ReplaceAll(in, []byte("\r\n"), nil), '\r') >= 0
		switch {
		case err == io.EOF:
			if bare || !complete {
				t.Fatalf("clean end of a stream with a bare CR (%v) or an unterminated event (%v)", bare, !complete)
			}
		case errors.Is(err, ErrBareCR):
			if !bare {
				t.Fatal("ErrBareCR without a bare CR")
			}
			return
		case errors.Is(err, io.ErrUnexpectedEOF):
			if complete && !bare {
				t.Fatal("unexpected EOF on a complete stream")
			}
		case errors.Is(err, ErrEventTooLarge):
			if skip || max <= 0 {
				t.Fatalf("ErrEventTooLarge with skip %v, bound %d", skip, max)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
		if bare {
			return // the reference reads no bare CR
		}
		// Every event read is the reference's, but those over the bound.
		for i, e := range got {
			if i >= len(want) {
				t.Fatalf("event %d read, the reference has %d", i, len(want))
			}
			if !e.Over && !sameEvent(e, want[i]) {
				t.Fatalf("event %d: %+v, want %+v", i, e, want[i])
			}
		}
		if err == io.EOF && len(got) != len(want) {
			t.Fatalf("%d events, the reference has %d", len(got), len(want))
		}
		// Written and read again, what was read is a fixed point.
		var buf bytes.Buffer
		wr := NewWriter(&buf, func() {})
		for _, e := range got {
			if !e.Over {
				if err := wr.Write(e); err != nil {
					t.Fatal(err)
				}
			}
		}
		again := NewReader(&buf, 0, false)
		for _, e := range got {
			if e.Over {
				continue
			}
			e.Fields = slices.DeleteFunc(e.Fields, func(l []byte) bool { return bytes.HasPrefix(l, bom) })
			if len(e.Fields) == 0 && !e.HasData {
				continue // not written
			}
			a, err := again.Next()
			if err != nil || !sameEvent(a, e) {
				t.Fatalf("read again: %+v %v, want %+v", a, err, e)
			}
		}
	})
}
