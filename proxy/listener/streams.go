package listener

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// StreamLimits bounds the requests an HTTP sidecar (MCP, A2A) holds open
// upstream: every forwarded request (a POST and its answer or SSE stream,
// the standalone GET SSE stream, a DELETE) holds one upstream connection
// until its answer ends. Zero fields take their defaults.
type StreamLimits struct {
	// Max is the forwarded requests open at once, every caller together;
	// it also caps the connections to the upstream (with a small reserve
	// for the requests Warden makes itself while deciding). Default: the
	// listener's connection cap (Limits.MaxConnections), which leaves the
	// upstream connections their quarter of the file limit.
	Max int `yaml:"max" json:"max"`
	// PerPrincipal is the forwarded requests one principal may hold open at
	// once (default 64), the reads Warden makes to decide its requests (a
	// task's state or status, a tool list) included while they run: one
	// caller opening SSE streams by the thousand over a few HTTP/2
	// connections fills its own share, not the process's file descriptors.
	PerPrincipal int `yaml:"per_principal" json:"per_principal"`
	// AnswerBytes is the bytes of answers Warden reads whole to check them
	// (JSON answers, and the answers to its own requests: a task's state, a
	// tool list, the list pages it reads to fill a caller's page) that the
	// requests in flight may hold together (default 64 MiB, the default
	// max_response_bytes). One answer alone always
	// fits, up to max_response_bytes; a second that would pass the budget
	// becomes a 503 with Retry-After and a JSON-RPC error. Decoding costs
	// a multiple of the bytes held, so this bounds memory to that multiple.
	AnswerBytes int64 `yaml:"answer_bytes" json:"answer_bytes"`
	// Watches is how many of Max the standing streams (MCP's GET stream,
	// A2A's SubscribeToTask) may hold, all callers together (default
	// Max/3): the rest stays for the requests Warden decides, so idle
	// streams cannot fill the cap. WatchesPerPrincipal is how many of its
	// PerPrincipal one principal's standing streams may hold (default
	// PerPrincipal/2), so they never take all of its own share either.
	Watches             int `yaml:"watches" json:"watches"`
	WatchesPerPrincipal int `yaml:"watches_per_principal" json:"watches_per_principal"`
	// WatchIdle ends a standing stream that has passed its client no event
	// for this long (default 10m; clients reconnect), so forgotten streams
	// give their place back.
	WatchIdle time.Duration `yaml:"watch_idle" json:"watch_idle"`
}

// Defaults of StreamLimits.
const (
	DefaultStreamsPerPrincipal = 64
	DefaultAnswerBytes         = 64 << 20
	DefaultWatchIdle           = 10 * time.Minute
	// upstreamReserve is the connections to the upstream beyond
	// StreamLimits.Max, for the requests Warden makes while deciding (a
	// task's status, a tool list).
	upstreamReserve = 64
	// busyRetryAfter is the Retry-After of a request refused for capacity.
	busyRetryAfter = time.Second
)

// WithDefaults fills the zero fields; maxConns is the listener's connection
// cap (Limits.WithDefaults().MaxConnections).
func (l StreamLimits) WithDefaults(maxConns int) StreamLimits {
	if l.Max == 0 {
		l.Max = maxConns
	}
	if l.PerPrincipal == 0 {
		l.PerPrincipal = DefaultStreamsPerPrincipal
	}
	if l.AnswerBytes == 0 {
		l.AnswerBytes = DefaultAnswerBytes
	}
	if l.Watches == 0 {
		l.Watches = max(1, l.Max/3)
	}
	if l.WatchesPerPrincipal == 0 {
		l.WatchesPerPrincipal = max(1, l.PerPrincipal/2)
	}
	if l.WatchIdle == 0 {
		l.WatchIdle = DefaultWatchIdle
	}
	return l
}

// Validate checks the limits.
func (l StreamLimits) Validate() error {
	if l.Max < 0 || l.PerPrincipal < 0 || l.AnswerBytes < 0 || l.Watches < 0 || l.WatchesPerPrincipal < 0 || l.WatchIdle < 0 {
		return errors.New("negative")
	}
	if l.Max > 0 && l.Watches > l.Max {
		return fmt.Errorf("watches: %d is above max (%d)", l.Watches, l.Max)
	}
	if l.PerPrincipal > 0 && l.WatchesPerPrincipal > l.PerPrincipal {
		return fmt.Errorf("watches_per_principal: %d is above per_principal (%d)", l.WatchesPerPrincipal, l.PerPrincipal)
	}
	return nil
}

// UpstreamConns is the cap on connections to the upstream for these limits.
func (l StreamLimits) UpstreamConns() int { return l.Max + upstreamReserve }

// Busy is a request refused for capacity: HTTP 429 when the caller holds
// its own share (it can free one), 503 when the sidecar is full; both with
// Retry-After.
type Busy struct {
	Status int
	Msg    string
	// Err is what the refusal is (ErrAnswerBudget for BudgetBusy), for
	// errors.Is; nil for the stream caps.
	Err error
}

func (b *Busy) Error() string { return b.Msg }

// Unwrap returns Err.
func (b *Busy) Unwrap() error { return b.Err }

// ClientCause is what a client may be told of the refusal (gate.Cause):
// its message, which names the setting, never an address.
func (b *Busy) ClientCause() string { return b.Msg }

// HTTPStatus is the status the refusal is answered with.
func (b *Busy) HTTPStatus() int { return b.Status }

// Header sets Retry-After on h.
func (b *Busy) Header(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(int(busyRetryAfter/time.Second)))
}

// Streams counts the forwarded requests open, in total and by principal.
type Streams struct {
	name string // the configuration section, for messages
	lim  StreamLimits

	slots Slots

	mu      sync.Mutex
	held    int64  // answer bytes held by the requests in flight
	refused uint64 // answers refused for the budget (BudgetBusy), ever
}

// NewStreams returns the counter for lim (defaults applied by the caller)
// of the sidecar whose section is name.
func NewStreams(name string, lim StreamLimits) *Streams {
	return &Streams{name: name, lim: lim}
}

// Take counts one more request of who, or refuses it; done gives it back
// (once, whatever the number of calls).
func (s *Streams) Take(who string) (done func(), err *Busy) { return s.take(who, false) }

// TakeWatch is Take for a standing stream, within the watches' share too.
func (s *Streams) TakeWatch(who string) (done func(), err *Busy) { return s.take(who, true) }

func (s *Streams) take(who string, watch bool) (done func(), err *Busy) {
	done, full := s.slots.Take(who, SlotBounds{PerHolder: s.lim.PerPrincipal, Total: s.lim.Max, WatchesPerHolder: s.lim.WatchesPerPrincipal, Watches: s.lim.Watches}, watch)
	switch {
	case full&FullPerHolder != 0:
		return nil, &Busy{Status: http.StatusTooManyRequests,
			Msg: fmt.Sprintf("too many open requests and streams for this principal (%s.streams.per_principal %d); close one and retry", s.name, s.lim.PerPrincipal)}
	case full&FullWatchesPerHolder != 0:
		return nil, &Busy{Status: http.StatusTooManyRequests,
			Msg: fmt.Sprintf("too many open standing streams for this principal (%s.streams.watches_per_principal %d); close one and retry", s.name, s.lim.WatchesPerPrincipal)}
	case full&FullTotal != 0:
		return nil, &Busy{Status: http.StatusServiceUnavailable,
			Msg: fmt.Sprintf("Warden holds as many open requests and streams as it may (%s.streams.max %d); retry later", s.name, s.lim.Max)}
	case full&FullWatches != 0:
		return nil, &Busy{Status: http.StatusServiceUnavailable,
			Msg: fmt.Sprintf("Warden holds as many standing streams as it may (%s.streams.watches %d); retry later", s.name, s.lim.Watches)}
	}
	return done, nil
}

// Idle ends a standing stream (cancel) that passed its client no event for
// the watch idle bound: Each wraps its event handler so that every event
// kept starts the count again; stop releases the timer.
func (s *Streams) Idle(cancel func()) *Idle {
	return &Idle{t: time.AfterFunc(s.lim.WatchIdle, cancel), d: s.lim.WatchIdle}
}

// Idle is a standing stream's idle bound.
type Idle struct {
	t *time.Timer
	d time.Duration
}

// Each wraps an event handler: an event it keeps restarts the idle count.
func (i *Idle) Each(data func([]byte) ([]byte, bool)) func([]byte) ([]byte, bool) {
	return func(b []byte) ([]byte, bool) {
		out, keep := data(b)
		if keep {
			i.t.Reset(i.d)
		}
		return out, keep
	}
}

// Stop releases the timer.
func (i *Idle) Stop() { i.t.Stop() }

// String describes the limits as `warden check` prints them.
func (l StreamLimits) String() string {
	return fmt.Sprintf("%d open requests and streams in all, %d per principal, %d MiB of answers in flight; standing streams %d in all, %d per principal, ended idle after %v",
		l.Max, l.PerPrincipal, l.AnswerBytes>>20, l.Watches, l.WatchesPerPrincipal, l.WatchIdle)
}

// ErrAnswerBudget ends the reading of an answer that would take the answer
// bytes in flight past StreamLimits.AnswerBytes.
var ErrAnswerBudget = errors.New("answer bytes in flight over the budget")

// Hold is one request's share of the answer bytes in flight.
type Hold struct {
	s  *Streams
	of *Hold      // the share a Part is a part of; nil for a request's own
	n  int64      // its parts' bytes included
	rd heldReader // the first Reader's, in the Hold's allocation
	// done gives back the place an Own share took among its principal's
	// requests; nil for the others.
	done func()
}

// Hold returns an empty share; Release gives back what it took.
func (s *Streams) Hold() *Hold { return s.HoldIn(new(Hold)) }

// Own returns the share of a read of Warden's own made to decide a request
// of who (a task's state or status, a tool list; security.md X3): it takes
// a place among who's requests as Take does, so that the reads made before
// a request is forwarded count in streams.per_principal (and streams.max)
// as forwarded requests do, or is refused as Take refuses; Release gives
// back the place with the bytes. A decision's read ends before its
// request takes its own place (Take), so a request never needs two.
func (s *Streams) Own(who string) (*Hold, *Busy) {
	done, busy := s.Take(who)
	if busy != nil {
		return nil, busy
	}
	h := s.Hold()
	h.done = done
	return h, nil
}

// HoldIn is Hold in h, kept in an allocation of the caller's (the
// request's exchange, which outlives the answer it reads): h must hold no
// share, one it took given back.
func (s *Streams) HoldIn(h *Hold) *Hold {
	*h = Hold{s: s}
	return h
}

// Part returns a part of h's share, for an answer Warden reads itself
// while h's answer is made (a page of a list it reads to fill the caller's
// page or to look ahead, security.md X1): what the part reads is charged to
// the budget as h's own bytes (the request with its parts alone always
// fits), Keep moves bytes of it to h (what the caller's answer keeps of
// it), and Release gives back the rest once the answer it read is dropped.
// A part is released before h. nil (charging nothing) when h is nil or
// holds for no Streams (an exchange whose answer is not being read).
func (h *Hold) Part() *Hold {
	if h == nil || h.s == nil {
		return nil
	}
	return &Hold{s: h.s, of: h}
}

// Keep moves n of the part's bytes (at most what it holds) to the share it
// is a part of, which holds them until its own Release.
func (h *Hold) Keep(n int64) {
	if h == nil || h.of == nil {
		return
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.n -= min(max(n, 0), h.n)
}

// charge takes n more bytes: granted within the budget, or when this share
// (with its parts, or the share this part is a part of) is the only one
// holding any (an answer alone always fits).
func (h *Hold) charge(n int64) bool {
	s, own := h.s, h
	if h.of != nil {
		own = h.of
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held+n > s.lim.AnswerBytes && s.held != own.n {
		s.refused++
		return false
	}
	s.held += n
	h.n += n
	if h.of != nil {
		h.of.n += n
	}
	return true
}

// AnswerStats is the answer budget's state, for the metrics: the answer
// bytes the requests in flight hold now, and the answers refused for the
// budget since the start (one per answer: a refused read ends it).
type AnswerStats struct {
	Held    int64
	Refused uint64
}

// Answers reads the answer budget's state; the metrics read it when
// scraped, so that a request pays nothing for them.
func (s *Streams) Answers() AnswerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return AnswerStats{Held: s.held, Refused: s.refused}
}

// Release gives back every byte the share took (a part: but those it
// kept), and an Own share's place.
func (h *Hold) Release() {
	if h == nil || h.s == nil {
		return
	}
	if h.done != nil {
		defer h.done() // once, whatever the number of calls
	}
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held -= h.n
	if h.of != nil {
		h.of.n -= h.n
	}
	h.n = 0
}

// Reader charges every byte read from r to the share; a read past the
// budget fails with BudgetBusy's refusal (which is ErrAnswerBudget), so
// that the caller can answer with it as it is. A nil share charges
// nothing: r itself.
func (h *Hold) Reader(r io.Reader) io.Reader {
	if h == nil {
		return r
	}
	if h.rd.h != nil {
		return &heldReader{r: r, h: h}
	}
	h.rd = heldReader{r: r, h: h}
	return &h.rd
}

type heldReader struct {
	r io.Reader
	h *Hold
}

func (r *heldReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 && !r.h.charge(int64(n)) {
		return 0, r.h.s.BudgetBusy()
	}
	return n, err
}

// Each wraps the handler of an event stream's events so that the share is
// given back once each event is handled: a stream holds at most about one
// event's bytes of the budget at a time, however long it lasts.
func (h *Hold) Each(data func([]byte) ([]byte, bool)) func([]byte) ([]byte, bool) {
	return func(b []byte) ([]byte, bool) {
		defer h.Release()
		return data(b)
	}
}

// BudgetBusy is the refusal of an answer read past the budget.
func (s *Streams) BudgetBusy() *Busy {
	return &Busy{Status: http.StatusServiceUnavailable, Err: ErrAnswerBudget,
		Msg: fmt.Sprintf("Warden holds as many answer bytes as it may (%s.streams.answer_bytes %d); retry later", s.name, s.lim.AnswerBytes)}
}
