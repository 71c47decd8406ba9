package decisionlog

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
)

// counts is a ShipObserver that remembers.
type counts struct {
	mu       sync.Mutex
	dropped  map[string]int
	uploads  map[string]int
	uploaded map[string]int // records, by outcome
}

func newCounts() *counts {
	return &counts{dropped: map[string]int{}, uploads: map[string]int{}, uploaded: map[string]int{}}
}

func (c *counts) Dropped(reason string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropped[reason] += n
}

func (c *counts) Uploaded(outcome string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uploads[outcome]++
	c.uploaded[outcome] += n
}

func (c *counts) get(m map[string]int, k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[k]
}

// drops is how many records were dropped, for every reason.
func (c *counts) drops() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.dropped {
		n += v
	}
	return n
}

func (c *counts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("uploads %v (records %v), dropped %v", c.uploads, c.uploaded, c.dropped)
}

// waitCount waits until m[k] reaches n (the observer is told after the
// service answered).
func (c *counts) waitCount(m map[string]int, k string, n int) {
	for deadline := time.Now().Add(5 * time.Second); c.get(m, k) < n && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
}

// receiver is an OPA decision log service: it gunzips and decodes each
// batch; fail answers an upload instead of taking it (0: take it).
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	ids  []string    // every decision id received, in order
	raw  []int       // each batch's uncompressed size
	at   []time.Time // each upload's time, failed ones included
	hdr  []http.Header
	fail func(n int) int // the status for the n-th upload (from 0)
}

func newReceiver(t *testing.T, fail func(n int) int) *receiver {
	r := &receiver{t: t, fail: fail}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	n := len(r.at)
	r.at = append(r.at, time.Now())
	r.hdr = append(r.hdr, req.Header.Clone())
	r.mu.Unlock()
	if req.Method != http.MethodPost || req.URL.Path != "/v1/logs" || req.Header.Get("Content-Encoding") != "gzip" || req.Header.Get("Content-Type") != "application/json" {
		r.t.Errorf("upload %s %s %v", req.Method, req.URL.Path, req.Header)
	}
	if r.fail != nil {
		if code := r.fail(n); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	zr, err := gzip.NewReader(req.Body)
	if err != nil {
		r.t.Errorf("not gzip: %v", err)
		return
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		r.t.Errorf("gunzip: %v", err)
	}
	var recs []Record
	if err := json.Unmarshal(b, &recs); err != nil {
		r.t.Errorf("not a JSON array of records: %v: %s", err, b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, len(b))
	for _, rec := range recs {
		r.ids = append(r.ids, rec.DecisionID)
	}
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// waitFor waits until the receiver holds n records.
func (r *receiver) waitFor(t *testing.T, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ids := r.got(); len(ids) >= n {
			return ids
		}
	}
	t.Fatalf("received %d records, want %d", len(r.got()), n)
	return nil
}

// record is an encoded record of about size bytes with id.
func record(id string, size int) []byte {
	b, _ := json.Marshal(Record{DecisionID: id, Result: Result{Message: strings.Repeat("x", max(0, size-150))}})
	return b
}

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func run(t *testing.T, s *Shipper) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(stop)
	return stop
}

func newTestShipper(t *testing.T, cfg ServiceConfig, obs ShipObserver) *Shipper {
	t.Helper()
	s, err := NewShipper(cfg, obs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShipBatches: records go in order, each exactly once, in batches
// whose JSON array stays within batch_bytes, with the configured headers
// and the bearer token read from its file.
func TestShipBatches(t *testing.T) {
	rcv := newReceiver(t, nil)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCounts()
	s := newTestShipper(t, ServiceConfig{URL: rcv.srv.URL + "/v1/", Resource: "/logs", BatchBytes: 2048, MaxDelay: 20 * time.Millisecond,
		BearerTokenFile: tok, Headers: map[string]string{"X-Tenant": "blue"}}, c)
	run(t, s)
	want := ids("b", 0, 60)
	for _, id := range want {
		s.Add(record(id, 200))
	}
	got := rcv.waitFor(t, len(want))
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("received %v, want %v", got, want)
	}
	for deadline := time.Now().Add(5 * time.Second); c.get(c.uploaded, UploadSuccess) < 60 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.raw) < 6 {
		t.Fatalf("%d batches for 60 records of 200 bytes in batches of 2048 bytes", len(rcv.raw))
	}
	for i, n := range rcv.raw {
		if n > 2048 {
			t.Errorf("batch %d holds %d bytes, over batch_bytes", i, n)
		}
	}
	for _, h := range rcv.hdr {
		if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "blue" {
			t.Fatalf("upload headers %v", h)
		}
	}
	if c.get(c.uploaded, UploadSuccess) != 60 || c.get(c.uploads, UploadSuccess) != len(rcv.raw) {
		t.Fatalf("counted %v", c)
	}
}

// TestShipMaxDelay: a record alone waits max_delay, not longer, not much
// less.
func TestShipMaxDelay(t *testing.T) {
	rcv := newReceiver(t, nil)
	s := newTestShipper(t, ServiceConfig{URL: rcv.srv.URL + "/v1", BatchBytes: 4096, MaxDelay: 300 * time.Millisecond}, nil)
	run(t, s)
	start := time.Now()
	s.Add(record("d-0", 100))
	rcv.waitFor(t, 1)
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("the record went after %v, max_delay is 300ms", took)
	}
}

// TestShipBackoff: a batch the service answers 503 (and a transport error)
// is sent again after delays that double from min_retry_delay, with
// jitter, up to max_retry_delay; it arrives once; failures are counted.
// A 400 is not retried: the batch is dropped and counted.
func TestShipBackoff(t *testing.T) {
	t.Run("503 then ok", func(t *testing.T) {
		rcv := newReceiver(t, func(n int) int {
			if n < 4 {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		c := newCounts()
		s := newTestShipper(t, ServiceConfig{URL: rcv.srv.URL + "/v1", MaxDelay: time.Millisecond, MinRetryDelay: 40 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond}, c)
		run(t, s)
		s.Add(record("r-0", 100))
		if got := rcv.waitFor(t, 1); len(got) != 1 || got[0] != "r-0" {
			t.Fatalf("received %v", got)
		}
		rcv.mu.Lock()
		at := rcv.at
		rcv.mu.Unlock()
		// Attempt i+1 follows attempt i after [d/2, d), d = 40ms doubling, at most 200ms.
		for i, d := range []time.Duration{40, 80, 160, 200} {
			d *= time.Millisecond
			if gap := at[i+1].Sub(at[i]); gap < d/2 || gap > d+400*time.Millisecond {
				t.Errorf("retry %d after %v, want within [%v, %v)", i+1, gap, d/2, d)
			}
		}
		c.waitCount(c.uploads, UploadSuccess, 1)
		if c.get(c.uploads, UploadFailure) != 4 || c.get(c.uploads, UploadSuccess) != 1 || c.drops() != 0 {
			t.Fatalf("counted %v", c)
		}
	})
	t.Run("400 dropped", func(t *testing.T) {
		rcv := newReceiver(t, func(int) int { return http.StatusBadRequest })
		c := newCounts()
		s := newTestShipper(t, ServiceConfig{URL: rcv.srv.URL + "/v1", MaxDelay: time.Millisecond, MinRetryDelay: 10 * time.Millisecond}, c)
		run(t, s)
		s.Add(record("x-0", 100))
		for deadline := time.Now().Add(5 * time.Second); c.get(c.dropped, DropRejected) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		}
		time.Sleep(100 * time.Millisecond)
		rcv.mu.Lock()
		n := len(rcv.at)
		rcv.mu.Unlock()
		if n != 1 || c.get(c.dropped, DropRejected) != 1 || c.get(c.uploads, UploadRejected) != 1 {
			t.Fatalf("%d uploads, counted %v", n, c)
		}
	})
	t.Run("transport error", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // closes every connection it accepts
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				_ = conn.Close()
			}
		}()
		url := "http://" + ln.Addr().String()
		c := newCounts()
		s := newTestShipper(t, ServiceConfig{URL: url + "/v1", MaxDelay: time.Millisecond, MinRetryDelay: 10 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond}, c)
		run(t, s)
		s.Add(record("e-0", 100))
		for deadline := time.Now().Add(5 * time.Second); c.get(c.uploads, UploadFailure) < 3 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		}
		if c.get(c.uploads, UploadFailure) < 3 || c.drops() != 0 {
			t.Fatalf("counted %v", c)
		}
	})
}

// TestShipDrops: Add never blocks; past buffer_events or buffer_bytes the
// oldest waiting records are dropped and counted, the newest shipped; a
// record over batch_bytes is dropped alone.
func TestShipDrops(t *testing.T) {
	tests := []struct {
		name        string
		cfg         ServiceConfig
		add, size   int
		kept        int
		reason      string
		dropped     int
		firstKeptID int
	}{
		{"events", ServiceConfig{BufferEvents: 5}, 20, 200, 5, DropBufferFull, 15, 15},
		{"bytes", ServiceConfig{BatchBytes: 2048, BufferBytes: 5*len(record("k-10", 400)) + 4}, 20, 400, 5, DropBufferFull, 15, 15},
		{"too large", ServiceConfig{BatchBytes: 1024}, 3, 2000, 0, DropTooLarge, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, nil)
			c := newCounts()
			tc.cfg.URL, tc.cfg.MaxDelay = rcv.srv.URL+"/v1", 10*time.Millisecond
			s := newTestShipper(t, tc.cfg, c)
			start := time.Now()
			for i := range tc.add { // no Run yet: the service is "down"
				s.Add(record(fmt.Sprintf("k-%d", i), tc.size))
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("Add blocked for %v", took)
			}
			if got := c.get(c.dropped, tc.reason); got != tc.dropped {
				t.Fatalf("counted %v, want %d dropped %s", c, tc.dropped, tc.reason)
			}
			run(t, s)
			if tc.kept == 0 {
				time.Sleep(50 * time.Millisecond)
				if got := rcv.got(); len(got) != 0 {
					t.Fatalf("received %v", got)
				}
				return
			}
			got := rcv.waitFor(t, tc.kept)
			if want := ids("k", tc.firstKeptID, tc.add); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("received %v, want the newest %v", got, want)
			}
		})
	}
}

// TestShipClose: Close sends what waits at once (max_delay ignored); with
// the service down it gives up after shutdown_timeout and counts the rest.
func TestShipClose(t *testing.T) {
	rcv := newReceiver(t, nil)
	c := newCounts()
	s := newTestShipper(t, ServiceConfig{URL: rcv.srv.URL + "/v1", BatchBytes: 1024, MaxDelay: time.Hour}, c)
	stop := run(t, s)
	for _, id := range ids("c", 0, 12) {
		s.Add(record(id, 200))
	}
	// Run returned (a sleep for it let Close send beside Run's last
	// upload, out of order)
	stop()
	s.Add(record("c-12", 200)) // decided while listeners drain
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := rcv.got(), ids("c", 0, 13); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("received %v, want %v", got, want)
	}

	down := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	c = newCounts()
	s = newTestShipper(t, ServiceConfig{URL: down.srv.URL + "/v1", MaxDelay: time.Hour, MinRetryDelay: 20 * time.Millisecond, ShutdownTimeout: 300 * time.Millisecond}, c)
	for _, id := range ids("z", 0, 4) {
		s.Add(record(id, 200))
	}
	start := time.Now()
	if err := s.Close(); err == nil {
		t.Fatal("Close reported nothing lost")
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Close took %v, shutdown_timeout is 300ms", took)
	}
	if c.get(c.dropped, DropShutdown) != 4 || c.get(c.uploads, UploadFailure) < 2 {
		t.Fatalf("counted %v", c)
	}
}

// TestShipWithFile: the Logger writes each record to its file and ships
// the same record.
func TestShipWithFile(t *testing.T) {
	rcv := newReceiver(t, nil)
	path := filepath.Join(t.TempDir(), "d.log")
	l, err := New(Config{Path: path, Service: ServiceConfig{URL: rcv.srv.URL + "/v1", MaxDelay: time.Hour}}, nil, map[string]string{"app": "warden"})
	if err != nil {
		t.Fatal(err)
	}
	l.Decided(proxy.Decision{ID: "f-1", Protocol: "mcp", Reason: rules.ReasonNotAuthorized}, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(path)
	if got := rcv.got(); len(got) != 1 || got[0] != "f-1" || !strings.Contains(string(file), `"decision_id":"f-1"`) {
		t.Fatalf("shipped %v, file %s", got, file)
	}
	// Run flushes the file and ships, side by side, until ctx ends.
	l, err = New(Config{Path: path, FlushInterval: 5 * time.Millisecond, Service: ServiceConfig{URL: rcv.srv.URL + "/v1", MaxDelay: 5 * time.Millisecond}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	l.Decided(proxy.Decision{ID: "f-2", Protocol: "mcp", Reason: rules.ReasonNotAuthorized}, 0)
	rcv.waitFor(t, 2)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if file, _ := os.ReadFile(path); strings.Contains(string(file), `"decision_id":"f-2"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not flushed to the file while Run ships")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err := New(Config{Service: ServiceConfig{URL: rcv.srv.URL}}, nil, nil); err != nil || l == nil || l.w != nil {
		t.Fatalf("shipping alone: %v %v", l, err)
	}
}

func TestServiceValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  ServiceConfig
		want string // "" when valid
	}{
		{"off", ServiceConfig{}, ""},
		{"https", ServiceConfig{URL: "https://logs.example:8443/opa"}, ""},
		{"keys without url", ServiceConfig{Headers: map[string]string{"X-A": "b"}}, "url: needed"},
		{"scheme", ServiceConfig{URL: "ftp://x/"}, "not an http(s) URL"},
		{"no host", ServiceConfig{URL: "http:///logs"}, "not an http(s) URL"},
		{"resource", ServiceConfig{URL: "http://x", Resource: "logs"}, "does not start with /"},
		{"small batch", ServiceConfig{URL: "http://x", BatchBytes: 100}, "batch_bytes: 100 is under"},
		{"buffer under batch", ServiceConfig{URL: "http://x", BatchBytes: 8192, BufferBytes: 4096}, "buffer_bytes: 4096 is under"},
		{"negative", ServiceConfig{URL: "http://x", MaxDelay: -1}, "max_delay: negative"},
		{"retry delays", ServiceConfig{URL: "http://x", MinRetryDelay: time.Minute, MaxRetryDelay: time.Second}, "min_retry_delay"},
		{"header injection", ServiceConfig{URL: "http://x", Headers: map[string]string{"X-A": "b\r\nX-B: c"}}, "not a valid header"},
		{"header overriding the body's", ServiceConfig{URL: "http://x", Headers: map[string]string{"Content-Encoding": "identity"}}, "not a valid header"},
		{"two authorizations", ServiceConfig{URL: "http://x", BearerTokenFile: "t", Headers: map[string]string{"authorization": "Basic x"}}, "Authorization with bearer_token_file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := NewShipper(ServiceConfig{URL: "http://x", BearerTokenFile: filepath.Join(t.TempDir(), "missing")}, nil, nil); err == nil {
		t.Fatal("a missing bearer_token_file must be refused")
	}
}

// TestShipTLS: an https service is verified with ca_file (and refused
// without it: its certificate is not under the system roots); a password
// in the URL is not shown.
func TestShipTLS(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	u := strings.Replace(srv.URL, "https://", "https://user:hunter2@", 1)
	for _, tc := range []struct {
		name   string
		caFile string
		ok     bool
	}{{"ca_file", ca, true}, {"system roots", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounts()
			s := newTestShipper(t, ServiceConfig{URL: u, CAFile: tc.caFile, MaxDelay: time.Millisecond, MinRetryDelay: 10 * time.Millisecond, MaxRetryDelay: 10 * time.Millisecond}, c)
			if strings.Contains(s.String(), "hunter2") {
				t.Fatalf("the password is shown: %s", s)
			}
			run(t, s)
			s.Add(record("tls-0", 100))
			outcome := UploadSuccess
			if !tc.ok {
				outcome = UploadFailure
			}
			for deadline := time.Now().Add(5 * time.Second); c.get(c.uploads, outcome) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			}
			if c.get(c.uploads, outcome) == 0 || (!tc.ok && c.get(c.uploads, UploadSuccess) != 0) {
				t.Fatalf("counted %v, want %s", c, outcome)
			}
		})
	}
	if got.Load() != 1 {
		t.Fatalf("the service took %d uploads, want 1", got.Load())
	}
}
