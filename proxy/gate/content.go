package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// checkContent returns why the headers that say how a message's body is
// decoded are refused ("" when they are not): Warden reads the body as
// UTF-8 JSON, so the upstream must read it so too. Peers honour more than
// that: Node's body-parser (express.json(), the MCP TypeScript SDK's
// createMcpExpressApp, @a2a-js/sdk) and the SDK's own raw-body path decode
// any charset iconv-lite knows (utf-7 and utf-16 included) and inflate
// gzip, deflate and br; other parsers read media-type parameters their own
// way. So a request is decided only when
//   - it has exactly one Content-Type field, application/json with at most
//     the parameter charset=utf-8 (any case, quoted or not), nothing else;
//   - every Content-Encoding coding is identity;
//   - every Transfer-Encoding coding is chunked (the framing every hop
//     removes; the sidecar's server never shows it).
func checkContent(h http.Header) string {
	ct := h.Values("Content-Type")
	n := len(ct)
	if n == 1 {
		n = strings.Count(ct[0], ",") + 1 // one line holding a list: Envoy's CheckRequest joins two lines so
	}
	switch {
	case n != 1:
		return fmt.Sprintf("unsupported media type: the request needs one Content-Type: application/json header (%d given)", n)
	case !plainJSON(ct[0]):
		return "unsupported media type " + quote(ct[0]) + ": the request body must be application/json in UTF-8 (no parameter but charset=utf-8)"
	}
	if err := CheckBodyEncoding(h.Values("Content-Encoding")...); err != nil {
		return err.Error()
	}
	for _, v := range h.Values("Transfer-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if !strings.EqualFold(strings.TrimSpace(c), "chunked") {
				return "a request with Transfer-Encoding " + quote(v) + " is not decided on"
			}
		}
	}
	return ""
}

// plainJSON reports whether a Content-Type value is application/json,
// optionally with charset=utf-8 (RFC 9110 §8.3: OWS around ";", a quoted
// value), and nothing else.
func plainJSON(v string) bool {
	typ, param, has := strings.Cut(v, ";")
	if !strings.EqualFold(strings.Trim(typ, " \t"), "application/json") {
		return false
	}
	if !has {
		return true
	}
	name, value, ok := strings.Cut(strings.Trim(param, " \t"), "=")
	if !ok || !strings.EqualFold(name, "charset") {
		return false
	}
	return strings.EqualFold(value, "utf-8") || strings.EqualFold(value, `"utf-8"`)
}

// quote is a header value as a Go string literal, for a message.
func quote(v string) string { return fmt.Sprintf("%q", v) }

// CheckBodyEncoding returns an error when a request body sent with the
// Content-Encoding header values given (every field line, or Envoy's
// comma-joined value) is not decided on: a coding other than identity means
// the server may inflate other bytes than the ones Warden read (Node's
// body-parser inflates gzip, deflate and br).
func CheckBodyEncoding(values ...string) error {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return fmt.Errorf("a request body with Content-Encoding %s is not decided on (send it uncompressed)", strings.TrimSpace(strings.Join(values, ", ")))
			}
		}
	}
	return nil
}

// checkText returns why a body is not UTF-8 text without a byte order mark
// ("" when it is). JSON's text is UTF-8 (RFC 8259 §8.1); a decoder that
// meets a mark or a byte that is not UTF-8 strips, replaces or refuses it,
// each its own way, so Warden refuses it.
func checkText(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\xef\xbb\xbf")), bytes.HasPrefix(b, []byte("\xfe\xff")), bytes.HasPrefix(b, []byte("\xff\xfe")):
		return "parse error: the body starts with a byte order mark (send UTF-8 JSON without one)"
	case !utf8.Valid(b):
		return "parse error: the body is not UTF-8"
	}
	return ""
}

// headID is the id of a message cut short (the part of an oversized body
// Warden read), when its top-level members up to the cut show one that is
// a string or a number.
func headID(b []byte) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil
		}
		if t == "id" {
			if jsonrpc.ValidID(v) {
				return v
			}
			return nil
		}
	}
	return nil
}
