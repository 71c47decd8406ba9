package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// HeaderWait is how long Stream holds an event stream's status and headers
// for its first event to go with them: the headers reach the caller with
// the first event, or HeaderWait after the upstream's when no event came
// by then (a standing stream may have none for minutes).
const HeaderWait = 10 * time.Millisecond

// Stream answers with an event stream: the status, then the events of r as
// CopyEvents copies them, each flushed. The status and headers go out with
// the first event, or alone after HeaderWait without one: an answer's
// first event most often comes with the upstream's headers, and flushing
// the headers alone first would cost a write to the caller's socket of its
// own, one more per answer than a plain reverse proxy makes.
func Stream(w http.ResponseWriter, status int, r io.Reader, ev Events) error {
	w.WriteHeader(status)
	f, ok := w.(http.Flusher)
	if !ok {
		return CopyEvents(w, func() {}, r, ev)
	}
	h := &held{w: w, f: f}
	wait := ev.HeaderWait
	if wait <= 0 {
		wait = HeaderWait
	}
	h.t = time.AfterFunc(wait, h.flushHeaders)
	defer h.release()
	return CopyEvents(h, h.flush, r, ev)
}

// held is a stream's writer while its headers may still be flushed by the
// HeaderWait timer: writes and flushes are serialized with the timer's
// until the first event is flushed (or the stream ends), then pass without
// the lock.
type held struct {
	w  io.Writer
	f  http.Flusher
	t  *time.Timer
	mu sync.Mutex
	// out: the headers were flushed (by the timer, the first event or the
	// stream's end); from then on the timer does nothing.
	out  bool
	free bool // the timer is stopped or done: no lock needed
}

func (h *held) flushHeaders() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.out {
		h.f.Flush()
		h.out = true
	}
}

func (h *held) Write(p []byte) (int, error) {
	if h.free {
		return h.w.Write(p)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.w.Write(p)
}

func (h *held) flush() {
	if h.free {
		h.f.Flush()
		return
	}
	h.release()
	h.f.Flush()
}

// release ends the timer's part: after it, the timer never touches the
// writer, so that the stream's writes (and the caller's after Stream
// returns) need no lock.
func (h *held) release() {
	if h.free {
		return
	}
	h.t.Stop()
	h.mu.Lock()
	h.out, h.free = true, true
	h.mu.Unlock()
}

// EndWithError writes a last event holding a JSON-RPC error with id, for a
// stream Warden ends itself.
func EndWithError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	_, _ = fmt.Fprintf(w, "data: %s\n\n", jsonrpc.ErrorBody(id, code, msg))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// Bound ends a stream (cancel) when the credential it was opened with
// expires (expiry, zero for never) or when watch calls it (a reload, a key
// leaving the JWKS: proxy.Enforcer.Watch; nil for none). watch is handed the
// stream's context and cancel itself: no context is derived to be watched.
// stop releases what Bound holds.
func Bound(ctx context.Context, cancel func(), expiry time.Time, watch func(ctx context.Context, end func()) (stop func())) (stop func()) {
	var t *time.Timer
	if !expiry.IsZero() {
		t = time.AfterFunc(time.Until(expiry), cancel)
	}
	var release func()
	if watch != nil {
		release = watch(ctx, cancel)
	}
	return func() {
		if t != nil {
			t.Stop()
		}
		if release != nil {
			release()
		}
	}
}
