package relay

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// TestTargetRequest: a request made on a Target is the one
// http.NewRequestWithContext makes from the URL string, whatever the URL
// holds (an empty port, escapes, a query, a fragment, credentials).
func TestTargetRequest(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:8080/jsonrpc",
		"http://host:/mcp",
		"https://[::1]:443/a%2Fb/c",
		"http://host/x?q=1&r=%20#frag",
		"http://user:pa%20ss@host:9/",
		"http://host",
	} {
		want, err := http.NewRequestWithContext(context.Background(), http.MethodPost, raw, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		tg, err := NewTarget(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tg.Request(context.Background(), http.MethodPost, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.URL, want.URL) || got.Host != want.Host || got.URL.RequestURI() != want.URL.RequestURI() {
			t.Errorf("%s: got %#v host %q, want %#v host %q", raw, got.URL, got.Host, want.URL, want.Host)
		}
		// Each request has its own URL: changing one changes no other.
		got.URL.Path = "/other"
		if again, _ := tg.Request(context.Background(), http.MethodPost, nil); again.URL.Path == "/other" {
			t.Errorf("%s: requests share their URL", raw)
		}
	}
	if _, err := NewTarget("http://host/%zz"); err == nil {
		t.Error("a URL http.NewRequest refuses was read")
	}
}

// TestMediaType: MediaType is mime.ParseMediaType's media type, for the
// types it reads without parsing too.
func TestMediaType(t *testing.T) {
	for _, ct := range []string{
		"application/json", "Application/JSON", " application/json ; charset=utf-8", "application/json;;",
		"application/json; charset", "text/event-stream", "TEXT/EVENT-STREAM;x=1", "text/event-stream;a=\"",
		"application/jſon", "application/\u212aeys", "text/html", "", ";", "application/json\x00", "application/problem+json",
	} {
		want, _, _ := mime.ParseMediaType(ct)
		if got := MediaType(ct); got != want {
			t.Errorf("%q: %q, want %q", ct, got, want)
		}
	}
}

// TestReadBodyTo: ReadBodyTo reads what ReadBody reads, with the same
// errors and no more than max+1 bytes of the reader, into the buffer it is
// given whatever that buffer holds room for.
func TestReadBodyTo(t *testing.T) {
	body := strings.Repeat("0123456789", 100) // 1000 bytes
	fail := errors.New("cut")
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(body) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		"error":    func() io.Reader { return io.MultiReader(strings.NewReader(body[:300]), iotest.ErrReader(fail)) },
	}
	for name, r := range readers {
		for _, max := range []int64{-1, 0, 1, 299, 300, 999, 1000, 1001, 5000} {
			for _, c := range []int{0, 1, 64, 4096} {
				want, werr := readAllBounded(r(), max)
				counted := &countingReader{r: r()}
				got, err := ReadBodyTo(make([]byte, 0, c), counted, max)
				if string(got) != string(want) || !errors.Is(err, werr) && err != werr {
					t.Errorf("%s, max %d, cap %d: %d bytes %v, want %d bytes %v", name, max, c, len(got), err, len(want), werr)
				}
				if max >= 0 && counted.n > max+1 {
					t.Errorf("%s, max %d, cap %d: read %d bytes", name, max, c, counted.n)
				}
			}
		}
	}
}

// readAllBounded is ReadBody as it was before it read into a buffer of its
// own (io.ReadAll): the reference ReadBodyTo is held to.
func readAllBounded(r io.Reader, max int64) ([]byte, error) {
	if max < 0 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, ErrBodyTooLarge
	}
	return b, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
