package frames

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestBatchWrite: what a batch queued on an idle connection is written by
// the goroutine that flushes it, the connection's writer not running; what
// the socket does not take without waiting (a peer that does not read) is
// left to the writer, flush returns at once, and the writer sends the rest
// before what was queued after, every byte in order.
func TestBatchWrite(t *testing.T) {
	r, err := New(Config{Upstream: "127.0.0.1:1", MaxWriteBuffer: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("idle writer", func(t *testing.T) {
		a, peer := tcpPair(t)
		c := newConn(r, a, true) // no writeLoop: only the batch writes
		l := &leg{c: c, id: 1, sendWin: 1 << 16}
		c.streams[1] = l
		var b batch
		c.sendHeaders(l, []hpack.HeaderField{{Name: ":status", Value: "200"}}, false, &b)
		c.sendData(l, []byte("hello"), true, &b)
		b.flush()
		_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
		fr := http2.NewFramer(nil, peer)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		if f, err := fr.ReadFrame(); err != nil {
			t.Fatalf("HEADERS: %v", err)
		} else if h, ok := f.(*http2.MetaHeadersFrame); !ok || h.PseudoValue("status") != "200" {
			t.Fatalf("got %v, want HEADERS :status 200", f)
		}
		if f, err := fr.ReadFrame(); err != nil {
			t.Fatalf("DATA: %v", err)
		} else if d, ok := f.(*http2.DataFrame); !ok || string(d.Data()) != "hello" || !d.StreamEnded() {
			t.Fatalf("got %v, want DATA hello END_STREAM", f)
		}
	})
	t.Run("socket full", func(t *testing.T) {
		a, peer := tcpPair(t)
		c := newConn(r, a, true)
		first := bytes.Repeat([]byte("0123456789abcdef"), 1<<21) // 32 MiB: more than the socket buffers take
		second := []byte("after")
		queue := func(p []byte) {
			var b batch
			c.mu.Lock()
			c.out = append(c.out, p...)
			b.add(c)
			c.kick()
			c.mu.Unlock()
			done := make(chan struct{})
			go func() { b.flush(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("flush waited for the peer")
			}
		}
		queue(first)
		queue(second)
		go c.writeLoop()
		defer func() { close(c.quit); <-c.writerDone }()
		_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(io.LimitReader(peer, int64(len(first)+len(second))))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(first, second...)) {
			t.Fatalf("the peer read %d bytes out of order", len(got))
		}
	})
}

// TestFrameBuffered: the reader writes its batch before reading a frame it
// has not read in whole, or a header block that goes on in CONTINUATION
// frames (the framer waits for them within the same read), and only then.
func TestFrameBuffered(t *testing.T) {
	frame := func(write func(fr *http2.Framer)) []byte {
		var buf bytes.Buffer
		write(http2.NewFramer(&buf, nil))
		return buf.Bytes()
	}
	data := frame(func(fr *http2.Framer) { _ = fr.WriteData(1, false, []byte("hello")) })
	headers := func(end bool) []byte {
		return frame(func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}, EndHeaders: end})
		})
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"nothing", nil, false},
		{"part of a frame header", data[:5], false},
		{"part of a payload", data[:len(data)-1], false},
		{"a whole DATA frame", data, true},
		{"a whole header block", headers(true), true},
		{"HEADERS without END_HEADERS", headers(false), false},
		{"CONTINUATION without END_HEADERS", frame(func(fr *http2.Framer) { _ = fr.WriteContinuation(1, false, []byte{0x82}) }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{br: bufio.NewReaderSize(io.MultiReader(bytes.NewReader(tc.in), blockingReader{}), 64)}
			if len(tc.in) > 0 {
				_, _ = c.br.Peek(len(tc.in)) // buffered as a read would have
			}
			if got := c.frameBuffered(); got != tc.want {
				t.Errorf("frameBuffered = %v, want %v", got, tc.want)
			}
		})
	}
}

// blockingReader fails the test's reads past what it buffered.
type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { return 0, io.ErrNoProgress }

// TestFirstWrites: a connection's first frames go out with what follows
// them in one write each way: a client that sends its preface, SETTINGS
// and a request at once is answered with the relay's SETTINGS, connection
// window and SETTINGS acknowledgement in one write, and the upstream
// connection dialed for the request gets its preface, SETTINGS and the
// request in one write, whether the request is passed through (the client
// reader's batch) or forwarded by a Handler (Forward's), and neither
// connection's writer is woken for them. Before, each preface woke its
// connection's writer, which wrote it on its own unless the batch had
// written it already: two writes each way when it won the race.
func TestFirstWrites(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"passed through", "/macp.v1.MACPRuntimeService/GetSession"},
		{"forwarded by a Handler", "/macp.v1.MACPRuntimeService/Send"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer up.Close()
			r, addr := startRelay(t, Config{Upstream: up.Addr().String(), Router: fuzzRouter{}})

			var msg bytes.Buffer
			msg.WriteString(http2.ClientPreface)
			fr := http2.NewFramer(&msg, nil)
			_ = fr.WriteSettings()
			fields := slices.Clone(request)
			fields[slices.Index(fields, ":path")+1] = tc.path
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(fields...), EndHeaders: true})
			_ = fr.WriteData(1, true, []byte{0, 0, 0, 0, 1, 'x'})
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(msg.Bytes()); err != nil { // one write: one read on the relay
				t.Fatal(err)
			}
			cfr := http2.NewFramer(nil, nc)
			for _, want := range []string{"SETTINGS", "WINDOW_UPDATE", "SETTINGS ACK"} {
				f, err := cfr.ReadFrame()
				if err != nil {
					t.Fatalf("client, want %s: %v", want, err)
				}
				got := f.Header().Type.String()
				if f.Header().Flags.Has(http2.FlagSettingsAck) && f.Header().Type == http2.FrameSettings {
					got += " ACK"
				}
				if got != want {
					t.Fatalf("client got %s, want %s", got, want)
				}
			}

			unc, err := up.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer unc.Close()
			_ = unc.SetDeadline(time.Now().Add(10 * time.Second))
			pre := make([]byte, len(http2.ClientPreface))
			if _, err := io.ReadFull(unc, pre); err != nil || string(pre) != http2.ClientPreface {
				t.Fatalf("upstream preface %q: %v", pre, err)
			}
			ufr := http2.NewFramer(nil, unc)
			for _, want := range []http2.FrameType{http2.FrameSettings, http2.FrameWindowUpdate, http2.FrameHeaders, http2.FrameData} {
				f, err := ufr.ReadFrame()
				if err != nil {
					t.Fatalf("upstream, want %v: %v", want, err)
				}
				if f.Header().Type != want {
					t.Fatalf("upstream got %v, want %v", f.Header().Type, want)
				}
			}
			if c, u := r.clientWrites.Load(), r.upstreamWrites.Load(); c != 1 || u != 1 {
				t.Fatalf("%d writes to the client and %d to the upstream, want one each", c, u)
			}
			if w := r.writerWakes.Load(); w != 0 {
				t.Fatalf("the connections' writers were woken %d times, want none", w)
			}
		})
	}
}
