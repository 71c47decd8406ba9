package mcp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"

	"github.com/agentwarden/warden/rules/mcp"
)

// A server may deliver the answer to a request on another stream than the
// POST's: a client whose POST stream dropped (or a server that closed it to
// have the client poll, SSE polling) resumes with GET and Last-Event-ID, and
// the server replays the stream's events after that id, its answer among
// them, and sends the rest of them there. That GET has no request of its
// own, so the answer would be one to no request. Each event id Warden hands
// out therefore seals, besides the upstream event id, where the stream
// resumes to: the request the stream answers (its id, method and the task it
// named), as far as the answer filter needs it. The handle is bound to the
// principal and the upstream session (kindEvent), so only the request's
// owner, in its session, resumes it; on the resumed stream answers are
// filtered as on the POST's, and anything else that looks like an answer is
// still dropped (a server must not send answers on the standalone GET stream
// but when resuming).

// resumeV1 starts the plaintext of an event handle that carries a resume
// point. SSE clients ignore an id holding NUL, and Warden never seals one
// (eventID), so a handle from before resume points (the bare upstream id)
// does not start with it.
const resumeV1 = 0x00

// maxResume bounds what an event handle carries of the request (its id,
// method and task, a client's choice): more would make every event id of its
// stream as long, and such a stream resumes without the request.
const maxResume = 1 << 10

// resumePoint is what an event handle seals.
type resumePoint struct {
	event  string          // the upstream event id
	id     json.RawMessage // the request the stream answers; nil for none
	method string
	taskID string // the upstream task the request named
}

// resumePad is the multiple a resume point's plaintext is padded to: the
// length of a handle must not follow the upstream id's (a counter's digits
// would tell how many events went by, the caller's or not).
const resumePad = 64

// encode returns the plaintext of the point's event handle.
func (p resumePoint) encode() string {
	b := []byte{resumeV1}
	for _, f := range []string{p.event, string(p.id), p.method, p.taskID} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return string(append(b, make([]byte, -len(b)&(resumePad-1))...))
}

// decodeResume reads an event handle's plaintext; a handle sealed before
// resume points holds the upstream event id alone.
func decodeResume(plain string) resumePoint {
	b := []byte(plain)
	if len(b) == 0 || b[0] != resumeV1 {
		return resumePoint{event: plain}
	}
	b = b[1:]
	var f [4]string
	for i := range f {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return resumePoint{event: plain} // not one Warden sealed
		}
		f[i], b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	p := resumePoint{event: f[0], method: f[2], taskID: f[3]}
	if f[1] != "" {
		p.id = json.RawMessage(f[1])
	}
	return p
}

// eventID seals an SSE event id toward the caller: bound to the principal
// and the upstream session, so only they can resume from it, with the
// request the stream answers. An id holding NUL is one SSE clients ignore:
// left out, as they would.
func (x *exchange) eventID(id []byte) ([]byte, bool) {
	if bytes.IndexByte(id, 0) >= 0 {
		return nil, false
	}
	if len(id) == 0 || x.dry {
		return id, true
	}
	p := resumePoint{event: string(id)}
	if c := x.call; c.Kind == mcp.KindRequest && len(c.ID)+len(c.Method)+len(x.taskID) <= maxResume {
		p.id, p.method, p.taskID = x.call.ID, x.call.Method, x.taskID
	}
	return []byte(x.seal(kindEvent, p.encode())), true
}

// resume sets what a request's Last-Event-ID handle holds (opened for the
// caller's session): the upstream event id to resume from and, for a GET
// (which has no request of its own), the request whose stream it resumes, so
// that its answer reaches the caller.
func (x *exchange) resume(plain, method string) {
	p := decodeResume(plain)
	x.lastEventID = p.event
	if method != http.MethodGet || p.id == nil {
		return
	}
	x.call = mcp.Call{Kind: mcp.KindRequest, ID: p.id, Method: p.method}
	x.taskID, x.resumed = p.taskID, true
	// Its answer is learned as the request's: a task it created is the
	// caller's.
	x.decision = x.s.tasks.Resumed(x.principal, p.method)
}
