package frames

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// slowReader is a streaming Handler, admitted after a delay, that reads the
// request body only once go is closed, then streams back how much it read.
type slowReader struct {
	delay time.Duration
	start chan struct{}
	read  atomic.Int64
}

func (h *slowReader) Route([]hpack.HeaderField, net.Addr, *tls.ConnectionState) Route {
	return Route{Handler: h, Stream: true}
}

func (h *slowReader) Admit(context.Context, []hpack.HeaderField, *tls.ConnectionState) (any, *Response) {
	time.Sleep(h.delay)
	return nil, nil
}

func (h *slowReader) Handle(ctx context.Context, req *Request) Response {
	select {
	case <-h.start:
	case <-ctx.Done():
		return Response{}
	}
	for {
		b, err := req.Read(ctx)
		h.read.Add(int64(len(b)))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Response{}
		}
	}
	if err := req.SendHeader([]hpack.HeaderField{{Name: ":status", Value: "200"}}); err != nil {
		return Response{}
	}
	n := []byte(strconv.FormatInt(h.read.Load(), 10))
	for i := range n { // a write a byte: each waits for the last
		if err := req.Write(ctx, n[i:i+1]); err != nil {
			return Response{}
		}
	}
	return Response{Trailer: []hpack.HeaderField{{Name: "done", Value: "yes"}}}
}

// TestStreamedBody: a Route.Stream Handler reads the request body as it
// comes; the client gets window back only as the Handler reads, so a client
// faster than it is held back by HTTP/2 flow control (what it sent before
// the Handler read a byte stays within its first stream window, the body
// arriving during the admission included: no window is returned at the
// admission), and over the whole body the relay returns no more window
// than the body. The answer streamed with SendHeader and Write arrives
// whole, then its trailers.
func TestStreamedBody(t *testing.T) {
	const body = 1 << 20
	h := &slowReader{delay: 100 * time.Millisecond, start: make(chan struct{})}
	_, _, up := startEcho(t)
	_, addr := startRelay(t, Config{Upstream: up, Router: h})
	nc, fr := dialH2(t, addr)
	defer nc.Close()
	rd := http2.NewFramer(nil, nc) // the reader's; fr, the writer's, under wmu
	rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var wmu sync.Mutex
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(request...), EndHeaders: true})
	// the reader counts the window the relay returns; the writer sends
	// what it allows
	var credit atomic.Int64 // stream window returned
	win := make(chan int64, 64)
	answer := make(chan string, 1)
	go func() {
		var got []byte
		trailers := false
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				answer <- "error " + err.Error()
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					wmu.Unlock()
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 1 {
					credit.Add(int64(f.Increment))
					win <- int64(f.Increment)
				}
			case *http2.DataFrame:
				got = append(got, f.Data()...)
			case *http2.MetaHeadersFrame:
				if len(f.PseudoFields()) == 0 {
					trailers = true
				}
				if f.StreamEnded() {
					answer <- string(got) + " trailers=" + strconv.FormatBool(trailers)
					return
				}
			case *http2.RSTStreamFrame:
				answer <- "reset " + f.ErrCode.String()
				return
			}
		}
	}()
	sent, window := 0, int64(65535)
	chunk := make([]byte, 16384)
	send := func(until time.Time) {
		for sent < body && time.Now().Before(until) {
			if window <= 0 {
				select {
				case n := <-win:
					window += n
				case <-time.After(time.Until(until)):
					return
				}
				continue
			}
			n := int(min(int64(len(chunk)), window, int64(body-sent)))
			wmu.Lock()
			_ = fr.WriteData(1, sent+n == body, chunk[:n])
			wmu.Unlock()
			sent += n
			window -= int64(n)
		}
	}
	send(time.Now().Add(500 * time.Millisecond)) // the Handler reads nothing yet
	if sent > 65535 || h.read.Load() != 0 {
		t.Fatalf("the client sent %d bytes before the Handler read any (%d read), want at most its first window", sent, h.read.Load())
	}
	close(h.start)
	send(time.Now().Add(5 * time.Second))
	if sent != body {
		t.Fatalf("sent %d of %d bytes", sent, body)
	}
	select {
	case got := <-answer:
		if want := strconv.Itoa(body) + " trailers=true"; got != want {
			t.Errorf("answer %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	if c := credit.Load(); c > body {
		t.Errorf("the relay returned %d bytes of window for a body of %d", c, body)
	}
}
