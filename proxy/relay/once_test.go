package relay

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestOutboundSentOnce: a request built by Outbound, its body set by
// Body.Set (GetBody), is sent by net/http's Transport once, whatever the
// caller's Idempotency-Key or X-Idempotency-Key, when its kept-alive
// connection closes after the upstream read it and before any answer
// byte; the upstream still reads the header as sent. Before, the transport
// sent it again on a new connection (twice in every row but "neither").
func TestOutboundSentOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"Idempotency-Key", http.Header{"Idempotency-Key": {"k"}}},
		{"X-Idempotency-Key", http.Header{"X-Idempotency-Key": {"k"}}},
		{"both, empty", http.Header{"Idempotency-Key": {""}, "X-Idempotency-Key": {""}}},
		{"twice", http.Header{"Idempotency-Key": {"a", "b"}}},
		{"neither", http.Header{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newLosingUpstream(t)
			client := &http.Client{Transport: &http.Transport{}}
			t.Cleanup(client.CloseIdleConnections)
			target, err := NewTarget(up.url)
			if err != nil {
				t.Fatal(err)
			}
			send := func(body string) (*http.Response, error) {
				out, err := target.Request(context.Background(), http.MethodPost, nil)
				if err != nil {
					t.Fatal(err)
				}
				SetBody(out, []byte(body))
				in := &http.Request{Header: tc.header.Clone()}
				in.Header.Set("Content-Type", "application/json")
				Outbound(out, in, false)
				return client.Do(out)
			}
			resp, err := send("warm")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp, err := send("lost"); err == nil {
				resp.Body.Close()
				t.Errorf("answered HTTP %d: the request was sent again", resp.StatusCode)
			}
			lost, header := up.received()
			if lost != 1 {
				t.Errorf("the upstream received it %d times, want once", lost)
			}
			for k, v := range tc.header {
				if h := header.Values(k); strings.Join(h, ",") != strings.Join(v, ",") {
					t.Errorf("the upstream read %s as %q, want %q", k, h, v)
				}
			}
		})
	}
}

// losingUpstream answers the body "warm" and closes the connection without
// an answer after reading any other.
type losingUpstream struct {
	url    string
	mu     sync.Mutex
	lost   int
	header http.Header
}

func newLosingUpstream(t *testing.T) *losingUpstream {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &losingUpstream{url: "http://" + l.Addr().String() + "/rpc"}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					if string(b) != "warm" {
						u.mu.Lock()
						u.lost++
						u.header = req.Header
						u.mu.Unlock()
						return
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
				}
			})
		}
	})
	return u
}

// received is how many requests it lost, and the last one's headers.
func (u *losingUpstream) received() (int, http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lost, u.header
}

// TestUndialed: a request no connection could be made for never left; one
// whose connection closed after the upstream read it may have been taken.
func TestUndialed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/rpc"
	l.Close()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	up := newLosingUpstream(t)
	for _, tc := range []struct {
		name, url string
		want      bool
	}{
		{"nothing listens", closed, true},
		{"closed after reading", up.url, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader("lost"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.Do(out)
			if err == nil {
				t.Fatal("answered")
			}
			if got := Undialed(err); got != tc.want {
				t.Errorf("Undialed(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
