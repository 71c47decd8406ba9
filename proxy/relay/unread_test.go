package relay

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type refusal struct{}

func (refusal) Error() string        { return "over the budget; retry later" }
func (refusal) HTTPStatus() int      { return http.StatusServiceUnavailable }
func (refusal) Header(h http.Header) { h.Set("Retry-After", "1") }
func (r refusal) wrapped() error     { return fmt.Errorf("read answer: %w", r) }

// TestUnread: the one answer the MCP and A2A sidecars give in place of an
// upstream answer they could not read whole; no upstream header passes.
func TestUnread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		msg    string
		retry  string
	}{
		{"refused for capacity", refusal{}.wrapped(), http.StatusServiceUnavailable, "over the budget; retry later", "1"},
		{"over the size limit", fmt.Errorf("read: %w", ErrBodyTooLarge), http.StatusOK, "over the limit", ""},
		{"cut short", io.ErrUnexpectedEOF, http.StatusBadGateway, "the MCP server's answer could not be read whole", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			w.Header().Set("Mcp-Session-Id", "upstream's")
			Unread(w, json.RawMessage(`7`), tc.err, "MCP server", "over the limit")
			if w.Code != tc.status || w.Header().Get("Mcp-Session-Id") != "" || w.Header().Get("Retry-After") != tc.retry {
				t.Fatalf("status %d, headers %v; want %d, Retry-After %q and no upstream header", w.Code, w.Header(), tc.status, tc.retry)
			}
			var body struct {
				ID    int `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.ID != 7 || body.Error.Code != -32603 || !strings.Contains(body.Error.Message, tc.msg) {
				t.Fatalf("body %s (%v); want id 7, -32603 %q", w.Body, err, tc.msg)
			}
		})
	}
}
