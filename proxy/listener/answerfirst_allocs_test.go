//go:build !race

// The race detector allocates where the compiler would not: the counts
// hold only without it.

package listener

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAnswerFirstAllocs: answerFirst makes one allocation a request with a
// body (its writer and the tracked body together); it made two while it
// copied the request.
func TestAnswerFirstAllocs(t *testing.T) {
	h := answerFirst(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	body := strings.NewReader("hello")
	r.ContentLength = 5
	rc := io.NopCloser(body)
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() {
		body.Reset("hello")
		r.Body = rc
		h.ServeHTTP(w, r)
	}); n > 1 {
		t.Errorf("%v allocations, want at most 1", n)
	}
}
