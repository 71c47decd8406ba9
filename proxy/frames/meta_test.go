package frames

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// readAll reads every frame of in, as the relay's reader does (mine) or
// with x/net/http2's own header block reader, and describes what each read
// returned, up to the first error.
func readAll(in []byte, limit uint32, mine bool) []string {
	fr := http2.NewFramer(nil, bytes.NewReader(in))
	fr.SetMaxReadFrameSize(16384)
	var hr *headerReader
	if mine {
		hr = newHeaderReader(limit)
	} else {
		fr.MaxHeaderListSize = limit
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	}
	var got []string
	for {
		f, err := fr.ReadFrame()
		if hf, ok := f.(*http2.HeadersFrame); ok && err == nil && mine {
			f, err = hr.read(fr, hf)
		}
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			got = append(got, fmt.Sprintf("stream error %d %v", se.StreamID, se.Code))
			continue // a stream error leaves the connection readable
		case errors.As(err, &ce):
			return append(got, fmt.Sprintf("connection error %v", http2.ErrCode(ce)))
		case err != nil:
			return append(got, "error "+err.Error())
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			got = append(got, fmt.Sprintf("headers %d end=%v truncated=%v %v", mh.StreamID, mh.StreamEnded(), mh.Truncated, mh.Fields))
		} else {
			got = append(got, fmt.Sprintf("%T", f))
		}
	}
}

// headerCases are header blocks of every kind the reader tells apart: well
// formed (one frame, CONTINUATION frames, after a stream error), too big
// (truncated, or by far), with a refused name, value or pseudo-header list,
// and not HPACK.
func headerCases() map[string][]byte {
	big := strings.Repeat("v", 300)
	hb := func(fr *http2.Framer, id uint32, end bool, block []byte, split int) {
		if split <= 0 || split >= len(block) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: end, EndHeaders: true})
			return
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:split], EndStream: end})
		for rest := block[split:]; len(rest) > 0; {
			n := min(split, len(rest))
			_ = fr.WriteContinuation(id, n == len(rest), rest[:n])
			rest = rest[n:]
		}
	}
	one := func(kv ...string) []byte {
		return frames(func(fr *http2.Framer, b func(...string) []byte) { hb(fr, 1, true, b(kv...), 0) })
	}
	return map[string][]byte{
		"request": one(request...),
		"request twice, indexed": frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb(fr, 1, true, b(request...), 0)
			hb(fr, 3, true, b(request...), 0)
		}),
		"continuations": frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb(fr, 1, false, b(append(slices.Clone(request), "x-a", big, "x-b", big)...), 90)
			_ = fr.WriteData(1, true, nil)
		}),
		"response and trailers": frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb(fr, 1, false, b(":status", "200", "content-type", "application/grpc"), 0)
			hb(fr, 1, true, b("grpc-status", "0", "trailer", "a, b,c"), 0)
		}),
		"truncated":           one(append(slices.Clone(request), "x-a", big, "x-b", big, "x-c", big)...),
		"trailer over budget": one("trailer", strings.Repeat("a,", 200)),
		"far too big": frames(func(fr *http2.Framer, b func(...string) []byte) {
			var kv []string
			for i := range 10 {
				kv = append(kv, fmt.Sprintf("x-%d", i), strings.Repeat("v", 500))
			}
			hb(fr, 1, true, b(kv...), 0)
		}),
		"too big, continued": frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb(fr, 1, true, b("x-a", big, "x-b", big, "x-c", big, "x-d", big), 200)
		}),
		"upper case name":      one(":method", "GET", "X-Upper", "v"),
		"empty name":           one(":method", "GET", "", "v"),
		"bad value":            one(":method", "GET", "x-a", "a\x00b"),
		"pseudo after regular": one("x-a", "v", ":method", "GET"),
		"unknown pseudo":       one(":method", "GET", ":bogus", "v"),
		"duplicate pseudo":     one(":method", "GET", ":method", "POST"),
		"request and response": one(":method", "GET", ":status", "200"),
		"invalid, continued": frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb(fr, 1, true, b("X-Upper", "v", "x-a", big), 20)
		}),
		"invalid, then more": frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb(fr, 1, true, b(":method", "GET", "X-Upper", "v"), 0)
			hb(fr, 3, true, b(request...), 0)
		}),
		"not hpack": frames(func(fr *http2.Framer, _ func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}, EndHeaders: true})
		}),
		"block cut short": frames(func(fr *http2.Framer, b func(...string) []byte) {
			block := b(request...)
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:len(block)-3], EndHeaders: true})
		}),
		"continuation of another stream": frames(func(fr *http2.Framer, b func(...string) []byte) {
			block := b(request...)
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:5]})
			_ = fr.WriteContinuation(3, true, block[5:])
		}),
		"data between continuations": frames(func(fr *http2.Framer, b func(...string) []byte) {
			block := b(request...)
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:5]})
			_ = fr.WriteData(1, false, []byte("x"))
		}),
		"connection ends in a block": frames(func(fr *http2.Framer, b func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b(request...)[:5]})
		}),
	}
}

// TestHeaderReaderMatchesFramer reads every kind of header block with the
// relay's header reader and with x/net/http2's ReadMetaHeaders, which it
// replaces: both must return the same fields, truncation and errors.
func TestHeaderReaderMatchesFramer(t *testing.T) {
	const limit = 1024
	for name, in := range headerCases() {
		t.Run(name, func(t *testing.T) {
			want, got := readAll(in, limit, false), readAll(in, limit, true)
			if !slices.Equal(got, want) {
				t.Errorf("header reader:\n%s\nx/net/http2:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// FuzzHeaderReader: whatever a peer sends, the relay's header reader
// answers as x/net/http2's does.
func FuzzHeaderReader(f *testing.F) {
	for _, in := range headerCases() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if continuations(in) > maxContinuations(1024) {
			t.Skip("more CONTINUATION frames in a row than the relay reads (TestHeaderReaderContinuations)")
		}
		want, got := readAll(in, 1024, false), readAll(in, 1024, true)
		if !slices.Equal(got, want) {
			t.Errorf("header reader:\n%s\nx/net/http2:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// continuations is the most CONTINUATION frames in a row in in.
func continuations(in []byte) int {
	most, run := 0, 0
	for r := bytes.NewReader(in); ; {
		fh, err := http2.ReadFrameHeader(r)
		if err != nil || int64(fh.Length) > int64(r.Len()) {
			return most
		}
		_, _ = r.Seek(int64(fh.Length), 1)
		if fh.Type == http2.FrameContinuation {
			run++
			most = max(most, run)
		} else {
			run = 0
		}
	}
}

// TestHeaderReaderContinuations: a header block may take as many
// CONTINUATION frames as a peer filling 16 KiB frames needs for twice the
// list limit, and eight more; one more, even empty, ends the connection
// with ENHANCE_YOUR_CALM (x/net/http2 reads them without end: an
// authenticated client kept a relay connection busy at 0.75 of a core
// with 9.6 million empty ones, twelfth attack pass).
func TestHeaderReaderContinuations(t *testing.T) {
	block := func(limit uint32, n int, empty bool) []byte {
		return frames(func(fr *http2.Framer, b func(...string) []byte) {
			hb := b(request...)
			first, rest := hb[:1], hb[1:]
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true})
			for i := range n {
				frag := []byte(nil)
				switch {
				case !empty && i < len(rest) && i < n-1:
					frag = rest[i : i+1]
				case i == n-1 && !empty:
					frag = rest[min(i, len(rest)):]
				case i == n-1:
					frag = rest
				}
				_ = fr.WriteContinuation(1, i == n-1, frag)
			}
		})
	}
	for _, limit := range []uint32{1024, 1 << 16} {
		most := maxContinuations(limit)
		for _, c := range []struct {
			n     int
			empty bool
			want  string
		}{
			{most, true, "headers"},
			{most, false, "headers"},
			{most + 1, true, "connection error ENHANCE_YOUR_CALM"},
			{most + 1, false, "connection error ENHANCE_YOUR_CALM"},
			{100 * most, true, "connection error ENHANCE_YOUR_CALM"},
		} {
			got := readAll(block(limit, c.n, c.empty), limit, true)
			if len(got) == 0 || !strings.HasPrefix(got[0], c.want) {
				t.Errorf("limit %d, %d CONTINUATION frames (empty but the last: %v): %v, want %s", limit, c.n, c.empty, got, c.want)
			}
		}
	}
}

// TestHeaderReaderAllocs: a gRPC request's header block, its fields in
// HPACK's dynamic table as a client's second call has them, costs the
// frame and one object holding the decoded list (x/net/http2's
// ReadMetaHeaders took 11 allocations for it: its closure and what it
// captures, and the list grown one append at a time).
func TestHeaderReaderAllocs(t *testing.T) {
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	block := func() []byte {
		hbuf.Reset()
		for i := 0; i+1 < len(request); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: request[i], Value: request[i+1]})
		}
		_ = enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer agent://worker"})
		_ = enc.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: "5S"})
		return bytes.Clone(hbuf.Bytes())
	}
	first, again := block(), block()
	var in bytes.Buffer
	wfr := http2.NewFramer(&in, nil)
	_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: true, EndStream: true})
	primer := bytes.Clone(in.Bytes())
	in.Reset()
	_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: again, EndHeaders: true, EndStream: true})
	second := bytes.Clone(in.Bytes())

	rd := bytes.NewReader(primer)
	fr := http2.NewFramer(nil, rd)
	hr := newHeaderReader(1 << 16)
	read := func() *http2.MetaHeadersFrame {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		mf, err := hr.read(fr, f.(*http2.HeadersFrame))
		if err != nil {
			t.Fatal(err)
		}
		return mf.(*http2.MetaHeadersFrame)
	}
	if got := len(read().Fields); got != 8 {
		t.Fatalf("%d fields, want 8", got)
	}
	allocs := testing.AllocsPerRun(100, func() {
		rd.Reset(second)
		if mh := read(); len(mh.Fields) != 8 || mh.PseudoValue("path") != "/macp.v1.MACPRuntimeService/Send" {
			t.Fatalf("fields %v", mh.Fields)
		}
	})
	if allocs > 2 {
		t.Errorf("%.0f allocations per header block, want at most 2 (the frame, the decoded list)", allocs)
	}
}

// BenchmarkHeaderReader reads a gRPC request's header block, its fields
// in HPACK's dynamic table, with x/net/http2's ReadMetaHeaders (framer)
// and with the relay's header reader (relay).
func BenchmarkHeaderReader(b *testing.B) {
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	var in bytes.Buffer
	wfr := http2.NewFramer(&in, nil)
	first := 0
	for id := uint32(1); id <= 3; id += 2 {
		first = in.Len()
		hbuf.Reset()
		for i := 0; i+1 < len(request); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: request[i], Value: request[i+1]})
		}
		_ = enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer agent://worker"})
		_ = enc.WriteField(hpack.HeaderField{Name: "grpc-timeout", Value: "5S"})
		_ = wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true, EndStream: true})
	}
	both := bytes.Clone(in.Bytes())
	second := both[first:]
	for _, mine := range []bool{false, true} {
		b.Run(map[bool]string{false: "framer", true: "relay"}[mine], func(b *testing.B) {
			rd := bytes.NewReader(both)
			fr := http2.NewFramer(nil, rd)
			hr := newHeaderReader(1 << 16)
			if !mine {
				fr.MaxHeaderListSize = 1 << 16
				fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			}
			read := func() {
				f, err := fr.ReadFrame()
				if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
					f, err = hr.read(fr, hf)
				}
				if mh, ok := f.(*http2.MetaHeadersFrame); !ok || err != nil || len(mh.Fields) != 8 {
					b.Fatal(f, err)
				}
			}
			read() // the first block fills the dynamic table
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(second)
				read()
			}
		})
	}
}
