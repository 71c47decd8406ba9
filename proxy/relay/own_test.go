package relay

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestOwnRead: the answer to a request of Warden's own is read only when
// uncompressed, of a type Warden reads, 2xx and within the bound; otherwise
// an Unusable error names the cause.
func TestOwnRead(t *testing.T) {
	own := Own{Server: "MCP server", Request: "tools/list", Types: []string{"application/json", "text/event-stream"}, Limit: "mcp.max_response_bytes", Max: 8}
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string
		cause  string // "": read
	}{
		{"json", 200, http.Header{"Content-Type": {"application/json; charset=utf-8"}}, "{}", ""},
		{"identity", 200, http.Header{"Content-Type": {"Application/JSON"}, "Content-Encoding": {"identity"}}, "{}", ""},
		{"gzip", 200, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, "{}", "the MCP server's answer to Warden's tools/list is compressed (Content-Encoding gzip) though Warden asked for it uncompressed (Accept-Encoding: identity)"},
		{"identity then br", 200, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"identity, br"}}, "{}", "(Content-Encoding identity, br)"},
		{"html", 200, http.Header{"Content-Type": {"text/html"}}, "<p>", "is not application/json or text/event-stream (Content-Type text/html)"},
		{"no type", 200, http.Header{}, "{}", "(Content-Type none)"},
		{"500", 500, http.Header{"Content-Type": {"application/json"}}, "{}", "is HTTP status 500, not 2xx"},
		{"over", 200, http.Header{"Content-Type": {"application/json"}}, "{\"a\":123456}", "exceeds Warden's limit mcp.max_response_bytes (8 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: tc.header, Body: io.NopCloser(strings.NewReader(tc.body))}
			b, err := own.Read(resp)
			var u *Unusable
			switch {
			case tc.cause == "" && (err != nil || string(b) != tc.body):
				t.Errorf("Read = %q, %v; want %q", b, err, tc.body)
			case tc.cause != "" && (!errors.As(err, &u) || !strings.Contains(u.ClientCause(), tc.cause)):
				t.Errorf("Read error %v, want an Unusable naming %q", err, tc.cause)
			}
		})
	}
}
