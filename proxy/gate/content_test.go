package gate

import (
	"net/http"
	"strings"
	"testing"
)

// TestCheckContent: only one Content-Type, application/json with at most
// charset=utf-8, no coding but identity and no transfer coding but chunked
// are decided on; every other header that could change what the upstream
// decodes is refused.
func TestCheckContent(t *testing.T) {
	for _, tc := range []struct {
		h  http.Header
		ok bool
	}{
		{http.Header{"Content-Type": {"application/json"}}, true},
		{http.Header{"Content-Type": {"Application/JSON"}}, true},
		{http.Header{"Content-Type": {"application/json; charset=utf-8"}}, true},
		{http.Header{"Content-Type": {"application/json;charset=UTF-8"}}, true},
		{http.Header{"Content-Type": {`application/json; charset="utf-8"`}}, true},
		{http.Header{"Content-Type": {"application/json \t; \tcharset=utf-8 "}}, true},
		{http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"identity"}}, true},
		{http.Header{"Content-Type": {"application/json"}, "Transfer-Encoding": {"chunked"}}, true},
		{http.Header{}, false},
		{http.Header{"Content-Type": {""}}, false},
		{http.Header{"Content-Type": {"application/json; charset=utf-7"}}, false},
		{http.Header{"Content-Type": {"application/json; charset=utf-16"}}, false},
		{http.Header{"Content-Type": {"application/json; charset=utf8"}}, false},
		{http.Header{"Content-Type": {"application/json; charset=utf-8;"}}, false},
		{http.Header{"Content-Type": {"application/json; charset=utf-8; charset=utf-7"}}, false},
		{http.Header{"Content-Type": {"application/json; charset*=utf-8''utf-7"}}, false},
		{http.Header{"Content-Type": {`application/json; charset="utf-8\"`}}, false},
		{http.Header{"Content-Type": {"application/json; v=1"}}, false},
		{http.Header{"Content-Type": {"application/jsonx"}}, false},
		{http.Header{"Content-Type": {"application/*+json"}}, false},
		{http.Header{"Content-Type": {"text/plain; x=application/json"}}, false},
		{http.Header{"Content-Type": {"application/json", "application/json"}}, false},
		{http.Header{"Content-Type": {"application/json,application/json"}}, false},
		{http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, false},
		{http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"identity", "br"}}, false},
		{http.Header{"Content-Type": {"application/json"}, "Transfer-Encoding": {"gzip, chunked"}}, false},
	} {
		if why := checkContent(tc.h); (why == "") != tc.ok {
			t.Errorf("%v: %q, want ok %v", tc.h, why, tc.ok)
		}
	}
}

// TestCheckText: a byte order mark or a byte that is not UTF-8 is refused.
func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"a":"é"}`, true},
		{"\xef\xbb\xbf{}", false},
		{"\xff\xfe{\x00}\x00", false},
		{"\xfe\xff\x00{\x00}", false},
		{`{"a":"` + "\xc3" + `"}`, false},
		{`{"a":"` + "\xed\xa0\x80" + `"}`, false}, // a surrogate
	} {
		if why := checkText([]byte(tc.body)); (why == "") != tc.ok {
			t.Errorf("%q: %q, want ok %v", tc.body, why, tc.ok)
		}
	}
}

// TestHeadID: the id of a message cut short, when the part read shows one.
func TestHeadID(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":42,"method":"x","params":{"pad":"aaaa`, "42"},
		{`{"id":"a","params":{"pad":"aaaa`, `"a"`},
		{`{"params":{"pad":"aaaa`, ""},
		{`{"id":1.5,"params":{`, ""},
		{`{"id":null,"params":{`, ""},
		{`[{"id":1}`, ""},
		{`{"params":{"id":3},"id":4,"x":"` + strings.Repeat("a", 10), "4"},
	} {
		if got := string(headID([]byte(tc.body))); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
	}
}
