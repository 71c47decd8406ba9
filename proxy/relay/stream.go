package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentwarden/warden/rules/jsonrpc"
)

// Stream answers with an event stream: the status, flushed at once, then
// the events of r as CopyEvents copies them, each flushed.
func Stream(w http.ResponseWriter, status int, r io.Reader, ev Events) error {
	w.WriteHeader(status)
	flush := func() {}
	if f, ok := w.(http.Flusher); ok {
		flush = f.Flush
		flush()
	}
	return CopyEvents(w, flush, r, ev)
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
// expires (expiry, zero for never) or when guard's context ends (a reload,
// a key leaving the JWKS; nil for none). stop releases what Bound holds.
func Bound(ctx context.Context, cancel func(), expiry time.Time, guard func(context.Context) (context.Context, func())) (stop func()) {
	stops := []func() bool{}
	if !expiry.IsZero() {
		t := time.AfterFunc(time.Until(expiry), cancel)
		stops = append(stops, t.Stop)
	}
	var release func()
	if guard != nil {
		gctx, s := guard(ctx)
		release = s
		stops = append(stops, context.AfterFunc(gctx, cancel))
	}
	return func() {
		for _, s := range stops {
			s()
		}
		if release != nil {
			release()
		}
	}
}
