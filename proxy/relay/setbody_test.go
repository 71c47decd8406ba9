package relay

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
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
