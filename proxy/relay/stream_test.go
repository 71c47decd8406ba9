package relay

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// opsWriter records what a handler does to its ResponseWriter, in order:
// "header", "write:<bytes>", "flush". Safe for Stream's header timer.
type opsWriter struct {
	mu  sync.Mutex
	h   http.Header
	ops []string
}

func (w *opsWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *opsWriter) WriteHeader(int) { w.add("header") }

func (w *opsWriter) Write(p []byte) (int, error) { w.add("write:" + string(p)); return len(p), nil }

func (w *opsWriter) Flush() { w.add("flush") }

func (w *opsWriter) add(op string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op)
}

func (w *opsWriter) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ops...)
}

// TestStreamHeaders: an event stream's status and headers go out with its
// first event when the event is at hand (one write to the caller's socket,
// not a flush of the headers alone and another of the event: the old Stream
// flushed the headers first, so the first flush came before any write), and
// alone after HeaderWait when no event comes (a standing stream the caller
// must see open).
func TestStreamHeaders(t *testing.T) {
	// A wait no test run reaches where the headers must go with an event.
	keep := Events{Data: func(b []byte) ([]byte, bool) { return b, true }, HeaderWait: time.Hour}
	t.Run("with the first event", func(t *testing.T) {
		w := &opsWriter{}
		if err := Stream(w, http.StatusOK, strings.NewReader("data: {\"a\":1}\n\ndata: {\"b\":2}\n\n"), keep); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(w.log(), " | ")
		want := "header | write:data: {\"a\":1}\n\n | flush | write:data: {\"b\":2}\n\n | flush"
		if got != want {
			t.Fatalf("ops\n got %q\nwant %q", got, want)
		}
	})
	t.Run("no event yet", func(t *testing.T) {
		pr, pw := io.Pipe()
		w := &opsWriter{}
		done := make(chan error, 1)
		soon := keep
		soon.HeaderWait = 0 // the package's
		go func() { done <- Stream(w, http.StatusOK, pr, soon) }()
		deadline := time.Now().Add(5 * time.Second)
		for strings.Join(w.log(), " | ") != "header | flush" {
			if time.Now().After(deadline) {
				t.Fatalf("headers not flushed without an event: %q", w.log())
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := pw.Write([]byte("data: {}\n\n")); err != nil {
			t.Fatal(err)
		}
		_ = pw.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(w.log(), " | "), "header | flush | write:data: {}\n\n | flush"; got != want {
			t.Fatalf("ops\n got %q\nwant %q", got, want)
		}
	})
	t.Run("first event dropped", func(t *testing.T) {
		// The dropped event writes nothing; the headers go with the next.
		drop := Events{Data: func(b []byte) ([]byte, bool) { return b, string(b) != "x" }, HeaderWait: time.Hour}
		w := &opsWriter{}
		if err := Stream(w, http.StatusOK, strings.NewReader("data: x\n\ndata: y\n\n"), drop); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(w.log(), " | "), "header | write:data: y\n\n | flush"; got != want {
			t.Fatalf("ops\n got %q\nwant %q", got, want)
		}
	})
}

// TestCopyEventsReaders: streams copied with a Readers pool share their
// read buffers: a stream allocates far less than the 32 KiB buffer each
// one allocated and cleared before (the race detector's sync.Pool drops a
// quarter of what is put, hence half the buffer as the bound).
func TestCopyEventsReaders(t *testing.T) {
	var rs Readers
	ev := Events{Data: func(b []byte) ([]byte, bool) { return b, true }, Readers: &rs}
	var out strings.Builder
	copyOnce := func() {
		if err := CopyEvents(io.Discard, func() {}, strings.NewReader("data: {\"a\":1}\n\nid: 7\ndata: x\n\n"), ev); err != nil {
			t.Fatal(err)
		}
	}
	copyOnce()
	if err := CopyEvents(&out, func() {}, strings.NewReader("data: {\"a\":1}\n\nid: 7\ndata: x\n\n"), ev); err != nil || out.String() != "data: {\"a\":1}\n\nid: 7\ndata: x\n\n" {
		t.Fatalf("through a pooled reader: %q, %v", out.String(), err)
	}
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		copyOnce()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per >= readerSize/2 {
		t.Fatalf("%d bytes allocated per stream with a Readers pool, want < %d", per, readerSize/2)
	}
}
