package listener

import (
	"io"
	"net/http"
	"sync/atomic"
)

// maxHeaderBytes bounds an HTTP request's headers.
const maxHeaderBytes = 64 << 10

// NewHTTPServer returns an http.Server for h bounded by l (WithDefaults
// applied by the caller): ReadHeaderTimeout is l.HeaderTimeout (it also bounds
// the TLS handshake), ReadTimeout is l.BodyTimeout, IdleTimeout l.IdleTimeout,
// and no WriteTimeout, since SSE responses are long-lived. Go clears the read
// deadline once a body has been read, so ReadTimeout never cuts a response
// short.
//
// h is wrapped so that a handler that answers before reading the request
// body (a refused credential, say) is answered at once and the connection
// closed after the reply: Go's HTTP/1 server otherwise reads the unread body
// before it writes the reply, and a body that never arrives would hold the
// answer until the body timeout.
func NewHTTPServer(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           answerFirst(h),
		ReadHeaderTimeout: l.HeaderTimeout,
		ReadTimeout:       l.BodyTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// answerFirst marks an HTTP/1 response "Connection: close" when its header is
// written before the request body was read to its end: the server then skips
// reading the rest of the body before replying, and drops the connection
// after the reply (reading what is left only until the body timeout).
func answerFirst(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		// The body is swapped in place, as http.MaxBytesReader's callers
		// swap it, not on a copy of the request (the gate makes the one
		// copy a request gets, for its context), and put back when the
		// handler returns: the server reads its own body after the handler,
		// to drain or close it. While the handler runs, the server sees a
		// body of another type than its own when the header is written:
		// one read to its end it drains (nothing is left), one that is not
		// it leaves, as the "Connection: close" set here closes the
		// connection after the reply.
		a := &answerWriter{ResponseWriter: w, body: trackedBody{ReadCloser: r.Body}}
		r.Body = &a.body
		defer func() { r.Body = a.body.ReadCloser }()
		h.ServeHTTP(a, r)
	})
}

// trackedBody records that a request body was read to its end.
type trackedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// answerWriter adds "Connection: close" to a response whose header goes out
// before the request body was read to its end (body, the handler's view of
// it: both in one allocation). It keeps Flush and, through Unwrap,
// http.ResponseController working.
type answerWriter struct {
	http.ResponseWriter
	body  trackedBody
	wrote bool
}

func (w *answerWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if !w.body.eof.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *answerWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
