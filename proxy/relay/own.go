package relay

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Own is how Warden reads the answer to a request of its own (Behalf): a
// task's status, a tool list, a page of tasks. Every such answer is checked
// here, in one place, before a byte of it is read: one Warden cannot read
// (compressed though Identity asked for none, of a media type not in
// Types, an HTTP status other than 2xx, a body over Max) is refused with
// an Unusable error that names why, so that the caller's refusal and the
// operator's log line say it.
type Own struct {
	Server  string   // who answers: "MCP server", "A2A server"
	Request string   // Warden's request: "tools/list", "GetTask"
	Types   []string // the media types Warden reads, the first the usual
	Limit   string   // the setting that bounds the body: "mcp.max_response_bytes"
	Max     int64    // its value (-1: no bound)
	// Held, when set, is the share of the answer budget
	// (streams.answer_bytes) the body's bytes are charged to as they are
	// read (listener.Hold: a read past the budget fails with its refusal):
	// Warden's own reads hold answer bytes in flight as the caller's
	// answers do (security.md X1).
	Held interface{ Reader(io.Reader) io.Reader }
}

// Unusable is an answer to a request of Warden's own that Warden cannot
// read (Own.Check, Own.Read), with the reason: its Error is a sentence a
// client may read (ClientCause), naming nothing but what the upstream
// answered and Warden's settings.
type Unusable struct {
	Server, Request string
	Cause           string // "is compressed (Content-Encoding gzip) ..."
}

func (u *Unusable) Error() string {
	return "the " + u.Server + "'s answer to Warden's " + u.Request + " " + u.Cause
}

// ClientCause is the error as the caller is told it: it names the cause
// only, never a connection's address.
func (u *Unusable) ClientCause() string { return u.Error() }

// Check refuses resp, the answer to the request o describes, when Warden
// cannot read it; nil means its body may be read (Read).
func (o Own) Check(resp *http.Response) error {
	if c := Encoding(resp.Header); c != "" {
		return o.unusable(compressed(c))
	}
	if resp.StatusCode/100 != 2 {
		return o.unusable("is HTTP status " + strconv.Itoa(resp.StatusCode) + ", not 2xx")
	}
	ct := resp.Header.Get("Content-Type")
	mt := MediaType(ct)
	for _, t := range o.Types {
		if strings.EqualFold(mt, t) {
			return nil
		}
	}
	if ct == "" {
		ct = "none"
	}
	return o.unusable("is not " + strings.Join(o.Types, " or ") + " (Content-Type " + ct + ")")
}

// Over returns err, an error reading the body, as an Unusable naming the
// bound when the body or an event of it is over Max.
func (o Own) Over(err error) error {
	if errors.Is(err, ErrBodyTooLarge) || errors.Is(err, ErrEventTooLarge) {
		return o.unusable(fmt.Sprintf("exceeds Warden's limit %s (%d bytes)", o.Limit, o.Max))
	}
	return err
}

// Body is resp's body as Warden reads it: through Held when set.
func (o Own) Body(resp *http.Response) io.Reader {
	if o.Held == nil {
		return resp.Body
	}
	return o.Held.Reader(resp.Body)
}

// Read checks resp (Check) and reads its body (Body) whole within Max.
func (o Own) Read(resp *http.Response) ([]byte, error) {
	if err := o.Check(resp); err != nil {
		return nil, err
	}
	b, err := ReadBody(o.Body(resp), o.Max)
	return b, o.Over(err)
}

func (o Own) unusable(cause string) error {
	return &Unusable{Server: o.Server, Request: o.Request, Cause: cause}
}

// Encoding returns the Content-Encoding of an answer, as the upstream gave
// it, when it names a coding other than identity; "" when the answer is
// uncompressed.
func Encoding(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return h.Get("Content-Encoding")
			}
		}
	}
	return ""
}

// compressed says why an answer in coding c is refused.
func compressed(c string) string {
	return "is compressed (Content-Encoding " + c + ") though Warden asked for it uncompressed (Accept-Encoding: identity)"
}
