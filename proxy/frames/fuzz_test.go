package frames

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frames encodes a client's frames after its preface, for the seeds.
func frames(write func(fr *http2.Framer, hb func(...string) []byte)) []byte {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	hb := func(kv ...string) []byte {
		hbuf.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(hbuf.Bytes())
	}
	write(fr, hb)
	return b.Bytes()
}

var request = []string{":method", "POST", ":scheme", "http", ":path", "/macp.v1.MACPRuntimeService/Send", ":authority", "x", "content-type", "application/grpc", "te", "trailers"}

// headerBlock encodes the header fields kv (name, value, ...) with a fresh
// HPACK state, a connection's first header block.
func headerBlock(kv ...string) []byte {
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for i := 0; i+1 < len(kv); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return hbuf.Bytes()
}

// serveBytes serves one client connection that sends in, waits a moment for
// the answer and hangs up: the relay must end the connection, and what it
// sent must parse as HTTP/2 frames with a consistent HPACK state.
func serveBytes(t *testing.T, r *Relay, in []byte, wait time.Duration) {
	t.Helper()
	client, server := net.Pipe()
	served := make(chan struct{})
	go func() { r.ServeConn(server); close(served) }()
	read := make(chan error, 1)
	go func() {
		fr := http2.NewFramer(nil, client)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		for {
			if _, err := fr.ReadFrame(); err != nil {
				if isIOError(err) {
					err = nil
				}
				read <- err
				_, _ = io.Copy(io.Discard, client)
				return
			}
		}
	}()
	_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, _ = client.Write(in)
	time.Sleep(wait)
	client.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not end a connection its client closed")
	}
	if err := <-read; err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the relay sent something that is not HTTP/2: %v", err)
	}
}

// FuzzClientFrames feeds arbitrary bytes, after a valid preface and
// SETTINGS, into a relay connection whose upstream is a net/http h2c
// server. The relay must not crash, must end the connection once the
// client is gone, and everything it sends back must parse as HTTP/2 frames
// with a valid HPACK state.
func FuzzClientFrames(f *testing.F) {
	f.Add(frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb(request...), EndHeaders: true})
		_ = fr.WriteData(1, true, []byte("\x00\x00\x00\x00\x02hi"))
	}))
	f.Add(frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb(request[:6]...), EndHeaders: false})
		_ = fr.WriteContinuation(1, true, hb(request[6:]...))
		_ = fr.WriteWindowUpdate(1, 100)
		_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
		_ = fr.WriteData(1, false, []byte("late"))
	}))
	f.Add(frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb(request...), EndStream: true, EndHeaders: true})
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteWindowUpdate(0, 1<<31-1)
		_ = fr.WriteGoAway(3, http2.ErrCodeNo, nil)
	}))
	f.Add([]byte{0, 0, 4, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}) // WINDOW_UPDATE on an idle stream
	f.Add([]byte{0, 0, 0, 9, 4, 0, 0, 0, 1})             // CONTINUATION without HEADERS

	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		_, _ = io.WriteString(w, "answer")
	}), Protocols: new(http.Protocols), ReadHeaderTimeout: time.Second}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(up)
	f.Cleanup(func() { srv.Close() })
	// Send streams are buffered for a Handler (a small bound, so bodies
	// outgrow it too), the others passed through
	r, err := New(Config{Upstream: up.Addr().String(), HandshakeTimeout: time.Second, WriteTimeout: time.Second,
		Router: fuzzRouter{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.shutdown(); r.wg.Wait() })
	hello := append([]byte(http2.ClientPreface), frames(func(fr *http2.Framer, _ func(...string) []byte) { _ = fr.WriteSettings() })...)

	f.Fuzz(func(t *testing.T, in []byte) {
		serveBytes(t, r, append(hello[:len(hello):len(hello)], in...), time.Millisecond)
		r.mu.Lock()
		n := len(r.downs)
		r.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d client connections still tracked after they ended", n)
		}
	})
}

// FuzzUpstreamFrames feeds arbitrary bytes, after the upstream's SETTINGS,
// to the relay as an upstream's answer to one client request. The relay
// must not crash, must end the client's connection once the client is
// gone, and must send the client only parseable HTTP/2.
func FuzzUpstreamFrames(f *testing.F) {
	f.Add(frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb(":status", "200", "content-type", "application/grpc"), EndHeaders: true})
		_ = fr.WriteData(1, false, []byte("\x00\x00\x00\x00\x02ok"))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb("grpc-status", "0"), EndStream: true, EndHeaders: true})
	}))
	f.Add(frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
		_ = fr.WriteWindowUpdate(1, 10)
		_ = fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		_ = fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("bye"))
	}))
	f.Add(frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WritePing(false, [8]byte{9})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb(":status", "200"), EndStream: true, EndHeaders: true})
		_ = fr.WriteData(1, true, make([]byte, 70000%16384))
	}))

	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer up.Close()
	answers := make(chan []byte, 1)
	go func() {
		for {
			nc, err := up.Accept()
			if err != nil {
				return
			}
			var in []byte
			select {
			case in = <-answers:
			default:
			}
			go func() {
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
				settings := frames(func(fr *http2.Framer, _ func(...string) []byte) { _ = fr.WriteSettings() })
				if _, err := nc.Write(append(settings, in...)); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, nc)
			}()
		}
	}()
	hello := append([]byte(http2.ClientPreface), frames(func(fr *http2.Framer, hb func(...string) []byte) {
		_ = fr.WriteSettings()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb(request...), EndStream: true, EndHeaders: true})
	})...)

	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := New(Config{Upstream: up.Addr().String(), HandshakeTimeout: time.Second, WriteTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		answers <- in
		serveBytes(t, r, hello, 2*time.Millisecond) // the upstream answers meanwhile
		r.shutdown()
		r.wg.Wait()
		select { // an answer no connection took
		case <-answers:
		default:
		}
	})
}

// fuzzRouter hands Send streams to forwarder and passes the others through.
type fuzzRouter struct{}

func (fuzzRouter) Route(header []hpack.HeaderField, _ net.Addr, _ *tls.ConnectionState) Route {
	for _, f := range header {
		if f.Name == ":path" && strings.HasSuffix(f.Value, "/Send") {
			return Route{Handler: forwarder{}, MaxBody: 64}
		}
	}
	return Route{}
}

// forwarder forwards what it can and answers the rest itself.
type forwarder struct{}

func (forwarder) Handle(ctx context.Context, req *Request) Response {
	if resp, err := req.Forward(ctx, 0, req.Header); err == nil {
		return resp
	}
	return Response{Header: []hpack.HeaderField{{Name: ":status", Value: "502"}}}
}
