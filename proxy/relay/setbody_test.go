package relay

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestSetBody: a request given a body in memory is sent as http.NewRequest
// sends one read from a *bytes.Reader: its length declared, the body whole,
// and read again whole by GetBody (as the transport does to send it again
// on a new connection); an empty body is http.NoBody.
func TestSetBody(t *testing.T) {
	var got []byte
	var length int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		length = r.ContentLength
	}))
	t.Cleanup(srv.Close)
	target, err := NewTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{[]byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`), {}} {
		out, err := target.Request(t.Context(), http.MethodPost, nil)
		if err != nil {
			t.Fatal(err)
		}
		SetBody(out, body)
		if len(body) == 0 && out.Body != http.NoBody {
			t.Errorf("an empty body is %T, want http.NoBody", out.Body)
		}
		resp, err := srv.Client().Do(out)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !bytes.Equal(got, body) || length != int64(len(body)) {
			t.Errorf("the upstream read %q (length %d), want %q", got, length, body)
		}
		again, err := out.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(again); !bytes.Equal(b, body) || again.Close() != nil {
			t.Errorf("GetBody reads %q, want %q", b, body)
		}
	}
}

// writeCounter is a connection that counts its writes.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestSetBodyOneWrite: a request with a body in memory goes to the upstream
// in one write system call, headers and body together, as one from
// http.NewRequest with a *bytes.Reader does. net/http flushes the headers
// on their own before a body of a type it does not know is in memory: a
// reader of Warden's own type cost a write more per request (two).
func TestSetBodyOneWrite(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(srv.Close)
	var writes atomic.Int64
	dialer := &net.Dialer{}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		return writeCounter{c, &writes}, err
	}}}
	t.Cleanup(client.CloseIdleConnections)
	target, err := NewTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`)
	for name, set := range map[string]func(*http.Request){
		"SetBody":  func(out *http.Request) { SetBody(out, body) },
		"Body.Set": func(out *http.Request) { new(Body).Set(out, body) },
	} {
		t.Run(name, func(t *testing.T) {
			out, err := target.Request(t.Context(), http.MethodPost, nil)
			if err != nil {
				t.Fatal(err)
			}
			set(out)
			before := writes.Load()
			resp, err := client.Do(out)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n := writes.Load() - before; n != 1 {
				t.Errorf("the request took %d writes, want 1", n)
			}
		})
	}
}
