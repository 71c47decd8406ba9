package relay

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// gzipWhenAsked is an upstream that compresses its answer when the request
// accepts gzip, as express's compression middleware does (or always, with
// always: one that ignores Accept-Encoding: identity).
func gzipWhenAsked(t *testing.T, answer string, always bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !always && !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, answer)
		_ = zw.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestIdentityUpstream: a client that accepts gzip (undici's fetch, the MCP
// TypeScript SDK's client) gets, through the request Warden builds
// (Outbound, and Behalf for its own), an answer a gzip-on-request upstream
// sends uncompressed, the bytes Warden reads. Before, Outbound forwarded
// the client's Accept-Encoding and the answer came gzip.
func TestIdentityUpstream(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":1,"result":{}}`
	srv := gzipWhenAsked(t, answer, false)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}} // as listener.UpstreamClient
	target, err := NewTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		build func(out, in *http.Request)
	}{
		{"Outbound", func(out, in *http.Request) { Outbound(out, in, true, "Authorization") }},
		{"Behalf", func(out, in *http.Request) { Behalf(out, in.Header, true, []string{"Accept-Encoding"}) }},
	} {
		for _, ae := range []string{"gzip, deflate", "gzip", "br, gzip;q=0.5", "identity", ""} {
			t.Run(tc.name+"/"+ae, func(t *testing.T) {
				in := httptest.NewRequest(http.MethodPost, "http://warden.test/rpc", nil)
				if ae != "" {
					in.Header.Set("Accept-Encoding", ae)
				}
				out, err := target.Request(context.Background(), http.MethodPost, nil)
				if err != nil {
					t.Fatal(err)
				}
				tc.build(out, in)
				resp, err := client.Do(out)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := ReadBody(resp.Body, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if ce := resp.Header.Get("Content-Encoding"); ce != "" || string(b) != answer {
					t.Errorf("answer %q with Content-Encoding %q, want %s uncompressed", b, ce, answer)
				}
			})
		}
	}
}

// TestCompressed: an answer compressed though Warden asked for identity is
// replaced by a 502 naming why, none of its bytes or headers passed; one
// that is not compressed is left to the caller.
func TestCompressed(t *testing.T) {
	for _, tc := range []struct {
		encodings []string
		refused   bool
	}{
		{nil, false},
		{[]string{"identity"}, false},
		{[]string{"Identity"}, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"identity, gzip"}, true},
		{[]string{"identity", "br"}, true},
		{[]string{"x-gzip"}, true},
		{[]string{"deflate"}, true},
	} {
		t.Run(strings.Join(tc.encodings, "|"), func(t *testing.T) {
			resp := &http.Response{Header: http.Header{}}
			for _, e := range tc.encodings {
				resp.Header.Add("Content-Encoding", e)
			}
			w := httptest.NewRecorder()
			if got := Compressed(w, resp, json.RawMessage(`7`), "MCP server"); got != tc.refused {
				t.Fatalf("Compressed = %v, want %v", got, tc.refused)
			}
			if !tc.refused {
				if w.Body.Len() != 0 || len(w.Header()) != 0 {
					t.Errorf("wrote %q %v for an answer it leaves to the caller", w.Body, w.Header())
				}
				return
			}
			var m struct {
				ID    int
				Error struct {
					Code    int
					Message string
				}
			}
			if w.Code != http.StatusBadGateway || w.Header().Get("Content-Encoding") != "" || json.Unmarshal(w.Body.Bytes(), &m) != nil ||
				m.ID != 7 || m.Error.Code != jsonrpc.ErrInternal || !strings.Contains(m.Error.Message, "compressed") {
				t.Errorf("answered %d %v %s", w.Code, w.Header(), w.Body)
			}
		})
	}
}

// TestCompressedAnyway: an upstream that compresses though asked for
// identity gets its answer to Warden as it sent it, and Compressed refuses it.
func TestCompressedAnyway(t *testing.T) {
	srv := gzipWhenAsked(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, true)
	target, err := NewTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	out, err := target.Request(context.Background(), http.MethodPost, nil)
	if err != nil {
		t.Fatal(err)
	}
	Outbound(out, httptest.NewRequest(http.MethodPost, "http://warden.test/rpc", nil), false)
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(out)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	w := httptest.NewRecorder()
	if !Compressed(w, resp, json.RawMessage(`1`), "A2A server") || w.Code != http.StatusBadGateway {
		t.Errorf("a gzip answer passed: %d %s", w.Code, w.Body)
	}
}
