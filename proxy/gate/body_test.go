package gate

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy/listener"
)

// TestReadBody: a sidecar's request body is read whole within the limit,
// refused over it (announced or not), an error when it ends short; a body
// read to its end leaves the connection open (answerFirst saw it end: a
// body over the limit by a few bytes is read whole too), one that ends short
// closes it.
func TestReadBody(t *testing.T) {
	limit := make(chan int64, 1)
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := readBody(w, r, <-limit)
		got <- result{string(b), err}
		w.WriteHeader(http.StatusNoContent)
	})
	large := strings.Repeat("x", 3*maxSized)
	srv := httptest.NewUnstartedServer(h)
	srv.Config = listener.NewHTTPServer(h, listener.Limits{}.WithDefaults())
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		name, raw string
		body      string
		err       error
		closed    bool
	}{
		{"announced", "Content-Length: 5\r\n\r\nhello", "hello", nil, false},
		{"announced at the limit", "Content-Length: 10\r\n\r\n0123456789", "0123456789", nil, false},
		{"announced over the limit", "Content-Length: 11\r\n\r\n0123456789a", "", ErrTooBig, false},
		{"chunked", "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello", nil, false},
		{"chunked over the limit", "Transfer-Encoding: chunked\r\n\r\nb\r\n0123456789a\r\n0\r\n\r\n", "", ErrTooBig, false},
		{"short", "Content-Length: 8\r\n\r\nhello", "", io.ErrUnexpectedEOF, true},
		{"announced large", fmt.Sprintf("Content-Length: %d\r\n\r\n%s", 3*maxSized, large), large, nil, false},
		{"announced large, short", fmt.Sprintf("Content-Length: %d\r\n\r\n%s", 3*maxSized+1, large), "", io.ErrUnexpectedEOF, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := int64(10)
			if strings.HasPrefix(tc.name, "announced large") {
				l = 1 << 20
			}
			limit <- l
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n"+tc.raw)
			if tc.err == io.ErrUnexpectedEOF {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			var r result
			select {
			case r = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("no body read")
			}
			if tc.err == nil && (r.err != nil || r.body != tc.body) || tc.err != nil && !errors.Is(r.err, tc.err) {
				t.Fatalf("read %q, %v; want %q, %v", r.body, r.err, tc.body, tc.err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b := make([]byte, 4096)
			n, _ := c.Read(b)
			if closed := strings.Contains(strings.ToLower(string(b[:n])), "connection: close"); closed != tc.closed {
				t.Fatalf("connection closed %v, want %v: %q", closed, tc.closed, b[:n])
			}
		})
	}
}
