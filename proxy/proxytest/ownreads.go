package proxytest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// StallUpstream serves up, but holds the answer to every request whose
// body own reports (one of Warden's own reads, made to decide a caller's
// request) until release is called (or the test ends); from then on it
// serves them as up does. stalled counts the reads held now.
func StallUpstream(t testing.TB, up http.Handler, own func(body []byte) bool) (srv *httptest.Server, release func(), stalled func() int) {
	t.Helper()
	released := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if r.Method == http.MethodPost && own(b) {
			mu.Lock()
			n++
			mu.Unlock()
			select {
			case <-released:
			case <-r.Context().Done():
			}
			mu.Lock()
			n--
			mu.Unlock()
		}
		up.ServeHTTP(w, r)
	}))
	once := sync.OnceFunc(func() { close(released) })
	t.Cleanup(func() { once(); srv.Close() })
	return srv, once, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// OwnReads is the test of security.md X3 for one sidecar: the reads
// Warden makes to decide a request take a place under the caller's
// streams.per_principal, as the forwarded requests do.
type OwnReads struct {
	PerPrincipal int // the sidecar's streams.per_principal
	// Stalled and Release are StallUpstream's, the sidecar's upstream.
	Stalled func() int
	Release func()
	// Send sends principal's request, one whose decision needs a read of
	// Warden's own, and returns the HTTP status and the JSON-RPC error's
	// message ("" for none).
	Send func(principal string) (status int, msg string)
}

type sent struct {
	status int
	msg    string
}

// Run sends PerPrincipal+2 of bob's requests at once while their reads
// stall: PerPrincipal reads reach the upstream, the others are refused
// as the limit refuses (429 naming per_principal) before any read; carol
// is still served (her read reaches the upstream); once the reads are
// answered, bob's requests that held their read's place are forwarded
// (the read's place is given back before the request takes its own: at
// per_principal 1 no request needs two).
func (c OwnReads) Run(t *testing.T) {
	t.Helper()
	k := c.PerPrincipal + 2
	bobs := make(chan sent, k)
	for range k {
		go func() {
			s, m := c.Send("bob")
			bobs <- sent{s, m}
		}()
	}
	var answered []sent
	deadline := time.After(5 * time.Second)
wait:
	for c.Stalled()+len(answered) < k {
		select {
		case a := <-bobs:
			answered = append(answered, a)
		case <-deadline:
			break wait
		case <-time.After(5 * time.Millisecond):
		}
	}
	if got := c.Stalled(); got > c.PerPrincipal {
		t.Errorf("%d of bob's reads of Warden's own in flight at once, want at most streams.per_principal %d", got, c.PerPrincipal)
	}
	if len(answered) != k-c.PerPrincipal {
		t.Errorf("%d of bob's %d requests answered while %d reads stall, want %d refused", len(answered), k, c.Stalled(), k-c.PerPrincipal)
	}
	for _, a := range answered {
		if a.status != http.StatusTooManyRequests || !strings.Contains(a.msg, "per_principal") {
			t.Errorf("bob's request past his share: HTTP %d %q, want 429 naming per_principal", a.status, a.msg)
		}
	}
	before := c.Stalled()
	carol := make(chan sent, 1)
	go func() {
		s, m := c.Send("carol")
		carol <- sent{s, m}
	}()
	for until := time.Now().Add(5 * time.Second); c.Stalled() == before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(until) {
			t.Error("carol's read never reached the upstream beside bob's")
			break
		}
	}
	c.Release()
	if a := <-carol; a.status != http.StatusOK || a.msg != "" {
		t.Errorf("carol's request: HTTP %d %q, want served", a.status, a.msg)
	}
	for range k - len(answered) {
		if a := <-bobs; a.status != http.StatusOK || a.msg != "" {
			t.Errorf("bob's request whose read held his place: HTTP %d %q, want forwarded", a.status, a.msg)
		}
	}
}

// RunOwnReads runs OwnReads against a sidecar at streams.per_principal 1
// and 2. start starts the sidecar at per_principal per before the upstream
// stall returns (StallUpstream over the sidecar's fake upstream; own names
// Warden's reads), with what its requests need made, and returns
// OwnReads.Send.
func RunOwnReads(t *testing.T, own func(body []byte) bool, start func(t *testing.T, per int, stall func(up http.Handler) *httptest.Server) func(principal string) (int, string)) {
	for _, per := range []int{1, 2} {
		t.Run("per_principal "+strconv.Itoa(per), func(t *testing.T) {
			c := OwnReads{PerPrincipal: per}
			c.Send = start(t, per, func(up http.Handler) *httptest.Server {
				var srv *httptest.Server
				srv, c.Release, c.Stalled = StallUpstream(t, up, own)
				return srv
			})
			c.Run(t)
		})
	}
}
