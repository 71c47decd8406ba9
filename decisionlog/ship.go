package decisionlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServiceConfig ships the records to an HTTP service as OPA's decision log
// plugin does: each batch is a POST to the service URL plus resource, of a
// gzip-compressed JSON array of records (Content-Encoding: gzip,
// Content-Type: application/json). Off when URL is empty. Shipping works
// alongside path (a file or standard output) or alone.
type ServiceConfig struct {
	// URL is the service's base URL, http:// or https:// (verified with the
	// system roots, or ca_file).
	URL string `yaml:"url" json:"url"`
	// Resource is the path appended to url; default /logs.
	Resource string `yaml:"resource" json:"resource"`
	// BatchBytes bounds one batch's JSON array before compression; a record
	// larger than it is dropped (reason too_large). Default 262144 (256 KiB).
	BatchBytes int `yaml:"batch_bytes" json:"batch_bytes"`
	// MaxDelay is the longest a record waits before its batch is sent (a
	// batch goes as soon as batch_bytes are waiting); default 2s.
	MaxDelay time.Duration `yaml:"max_delay" json:"max_delay"`
	// BufferBytes bounds the records waiting to be sent while the service is
	// slow or down (the batch being sent besides); when one more would pass
	// it, the oldest waiting records are dropped (reason buffer_full).
	// Default 33554432 (32 MiB); at least batch_bytes.
	BufferBytes int `yaml:"buffer_bytes" json:"buffer_bytes"`
	// BufferEvents bounds the number of waiting records likewise; default
	// 100000.
	BufferEvents int `yaml:"buffer_events" json:"buffer_events"`
	// Timeout bounds one upload, connection to answer; default 10s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// MinRetryDelay and MaxRetryDelay bound the exponential backoff (with
	// jitter) between attempts to send a batch the service did not take
	// (a transport error, 408, 429 or 5xx; a Retry-After is honoured up to
	// max_retry_delay); defaults 250ms and 30s.
	MinRetryDelay time.Duration `yaml:"min_retry_delay" json:"min_retry_delay"`
	MaxRetryDelay time.Duration `yaml:"max_retry_delay" json:"max_retry_delay"`
	// ShutdownTimeout bounds how long Warden, once its listeners drained,
	// keeps sending what is left; the rest is dropped (reason shutdown).
	// Default 5s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
	// BearerTokenFile holds a token sent as Authorization: Bearer; read at
	// each upload, so that a rotated token applies without a restart.
	BearerTokenFile string `yaml:"bearer_token_file" json:"bearer_token_file"`
	// Headers are sent with every upload (for example an API key).
	Headers map[string]string `yaml:"headers" json:"headers"`
	// CAFile is a CA bundle (PEM) that verifies an https service in place of
	// the system roots.
	CAFile string `yaml:"ca_file" json:"ca_file"`
}

// Shipping defaults.
const (
	DefaultResource        = "/logs"
	DefaultBatchBytes      = 256 << 10
	DefaultMaxDelay        = 2 * time.Second
	DefaultBufferBytes     = 32 << 20
	DefaultBufferEvents    = 100000
	DefaultShipTimeout     = 10 * time.Second
	DefaultMinRetryDelay   = 250 * time.Millisecond
	DefaultMaxRetryDelay   = 30 * time.Second
	DefaultShutdownTimeout = 5 * time.Second
	minBatchBytes          = 1 << 10
)

// Drop reasons and upload outcomes, the label values of the shipping
// metrics.
const (
	DropBufferFull = "buffer_full" // the buffer was full: the oldest waiting records made room
	DropTooLarge   = "too_large"   // one record over batch_bytes
	DropRejected   = "rejected"    // the service refused the batch with a status not worth retrying
	DropShutdown   = "shutdown"    // left when shutdown_timeout ran out

	UploadSuccess  = "success" // 2xx
	UploadFailure  = "failure" // transport error, 408, 429 or 5xx: retried
	UploadRejected = "rejected"
)

// DropReasons and UploadOutcomes are every label value, for metrics that
// show them at zero.
var (
	DropReasons    = []string{DropBufferFull, DropTooLarge, DropRejected, DropShutdown}
	UploadOutcomes = []string{UploadSuccess, UploadFailure, UploadRejected}
)

// ShipObserver counts what shipping does.
type ShipObserver interface {
	// Dropped: n records will never be shipped, for reason.
	Dropped(reason string, n int)
	// Uploaded: one upload of a batch of n records ended with outcome.
	Uploaded(outcome string, n int)
}

// withDefaults fills the keys left zero.
func (c ServiceConfig) withDefaults() ServiceConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Resource == "" {
		c.Resource = DefaultResource
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = max(DefaultBufferBytes, c.BatchBytes)
	}
	if c.BufferEvents == 0 {
		c.BufferEvents = DefaultBufferEvents
	}
	def(&c.MaxDelay, DefaultMaxDelay)
	def(&c.Timeout, DefaultShipTimeout)
	def(&c.MinRetryDelay, DefaultMinRetryDelay)
	def(&c.MaxRetryDelay, max(DefaultMaxRetryDelay, c.MinRetryDelay))
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	return c
}

// Validate checks the service configuration (nothing when url is empty but
// that no other key is set without it).
func (c ServiceConfig) Validate() error {
	const k = "decision_log.service."
	if c.URL == "" {
		if c.BearerTokenFile != "" || len(c.Headers) > 0 || c.CAFile != "" {
			return errors.New(k + "url: needed by the other decision_log.service keys")
		}
		return nil
	}
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, fmt.Errorf(k+"url: %q is not an http(s) URL without query", c.URL))
	}
	if c.Resource != "" && !strings.HasPrefix(c.Resource, "/") {
		errs = append(errs, fmt.Errorf(k+"resource: %q does not start with /", c.Resource))
	}
	for name, v := range map[string]int{"batch_bytes": c.BatchBytes, "buffer_bytes": c.BufferBytes, "buffer_events": c.BufferEvents} {
		if v < 0 {
			errs = append(errs, fmt.Errorf(k+"%s: negative", name))
		}
	}
	for name, v := range map[string]time.Duration{"max_delay": c.MaxDelay, "timeout": c.Timeout, "min_retry_delay": c.MinRetryDelay,
		"max_retry_delay": c.MaxRetryDelay, "shutdown_timeout": c.ShutdownTimeout} {
		if v < 0 {
			errs = append(errs, fmt.Errorf(k+"%s: negative", name))
		}
	}
	d := c.withDefaults()
	if c.BatchBytes > 0 && c.BatchBytes < minBatchBytes {
		errs = append(errs, fmt.Errorf(k+"batch_bytes: %d is under %d", c.BatchBytes, minBatchBytes))
	}
	if d.BufferBytes < d.BatchBytes {
		errs = append(errs, fmt.Errorf(k+"buffer_bytes: %d is under batch_bytes (%d)", d.BufferBytes, d.BatchBytes))
	}
	if d.MinRetryDelay > d.MaxRetryDelay {
		errs = append(errs, fmt.Errorf(k+"min_retry_delay: %v is over max_retry_delay (%v)", d.MinRetryDelay, d.MaxRetryDelay))
	}
	for name, v := range c.Headers {
		if !validHeaderName(name) || strings.ContainsAny(v, "\r\n\x00") {
			errs = append(errs, fmt.Errorf(k+"headers: %q is not a valid header", name))
		}
		if c.BearerTokenFile != "" && strings.EqualFold(name, "Authorization") {
			errs = append(errs, errors.New(k+"headers: Authorization with bearer_token_file"))
		}
	}
	return errors.Join(errs...)
}

// validHeaderName: an HTTP token that is not one shipping sets itself.
func validHeaderName(name string) bool {
	switch strings.ToLower(name) {
	case "", "content-type", "content-encoding", "content-length", "host", "transfer-encoding", "connection":
		return false
	}
	for _, r := range name {
		if r >= 0x7f || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// pending is one encoded record and when it was queued.
type pending struct {
	rec []byte
	at  time.Time
}

// Shipper sends encoded records to the service in batches. Add never
// blocks: it queues, and drops the oldest records when the buffer is full.
// Run sends the batches; Close sends what is left, within
// shutdown_timeout. It starts no goroutine of its own.
type Shipper struct {
	cfg    ServiceConfig // defaults applied
	url    string
	shown  string // url without a password, for logs and warden check
	client *http.Client
	obs    ShipObserver
	log    *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	queue  []pending // oldest first
	qbytes int
	ready  chan struct{} // a batch's worth is waiting (capacity 1)
}

// NewShipper builds a shipper for cfg, reading ca_file and checking that
// bearer_token_file is readable; obs and log may be nil.
func NewShipper(cfg ServiceConfig, obs ShipObserver, log *slog.Logger) (*Shipper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("decision_log.service.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("decision_log.service.ca_file: %s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	if cfg.BearerTokenFile != "" {
		if _, err := readToken(cfg.BearerTokenFile); err != nil {
			return nil, err
		}
	}
	if obs == nil {
		obs = noShipObserver{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	target := strings.TrimSuffix(cfg.URL, "/") + cfg.Resource
	shown := target
	if u, err := url.Parse(target); err == nil {
		shown = u.Redacted()
	}
	return &Shipper{
		cfg: cfg, url: target, shown: shown, obs: obs, log: log, now: time.Now,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		ready:  make(chan struct{}, 1),
	}, nil
}

// String names where the records go, for warden check.
func (s *Shipper) String() string {
	return fmt.Sprintf("%s (batches up to %d bytes or %v; buffer %d bytes / %d records, oldest dropped beyond)",
		s.shown, s.cfg.BatchBytes, s.cfg.MaxDelay, s.cfg.BufferBytes, s.cfg.BufferEvents)
}

type noShipObserver struct{}

func (noShipObserver) Dropped(string, int)  {}
func (noShipObserver) Uploaded(string, int) {}

// readToken reads the bearer token file.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("decision_log.service.bearer_token_file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, "\r\n\x00") {
		return "", fmt.Errorf("decision_log.service.bearer_token_file: %s holds no single-line token", path)
	}
	return tok, nil
}

// Add queues one encoded record (a JSON object); it never blocks on the
// service.
func (s *Shipper) Add(rec []byte) {
	if len(rec)+2 > s.cfg.BatchBytes { // the array's brackets
		s.obs.Dropped(DropTooLarge, 1)
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, pending{rec: rec, at: s.now()})
	s.qbytes += len(rec)
	n := 0
	for s.qbytes > s.cfg.BufferBytes || len(s.queue) > s.cfg.BufferEvents {
		s.qbytes -= len(s.queue[0].rec)
		s.queue[0] = pending{}
		s.queue = s.queue[1:]
		n++
	}
	// Run learns of the first waiting record (to time max_delay) and of a
	// full batch.
	wake := len(s.queue) == 1 || s.qbytes+len(s.queue)+1 >= s.cfg.BatchBytes
	s.mu.Unlock()
	if n > 0 {
		s.obs.Dropped(DropBufferFull, n)
	}
	if wake {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

// cut takes the next batch off the queue: the oldest records whose array
// fits batch_bytes. With due, only when a batch is full or its oldest
// record waited max_delay; otherwise it says how long until one is due
// (0: nothing waits).
func (s *Shipper) cut(due bool) ([][]byte, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, 0
	}
	if due {
		if waited := s.now().Sub(s.queue[0].at); waited < s.cfg.MaxDelay && s.qbytes+len(s.queue)+1 < s.cfg.BatchBytes {
			return nil, s.cfg.MaxDelay - waited
		}
	}
	size, i := 1, 0
	for ; i < len(s.queue) && size+len(s.queue[i].rec)+1 <= s.cfg.BatchBytes; i++ {
		size += len(s.queue[i].rec) + 1
	}
	batch := make([][]byte, i)
	for j := range i {
		batch[j] = s.queue[j].rec
		s.qbytes -= len(s.queue[j].rec)
		s.queue[j] = pending{}
	}
	s.queue = s.queue[i:]
	return batch, 0
}

// requeue puts a batch that could not be sent back at the front of the
// queue (shutdown came while it was retried), within the buffer's bounds.
func (s *Shipper) requeue(batch [][]byte) {
	s.mu.Lock()
	at := s.now()
	front := make([]pending, len(batch), len(batch)+len(s.queue))
	for i, r := range batch {
		front[i] = pending{rec: r, at: at}
		s.qbytes += len(r)
	}
	s.queue = append(front, s.queue...)
	n := 0
	for s.qbytes > s.cfg.BufferBytes || len(s.queue) > s.cfg.BufferEvents {
		s.qbytes -= len(s.queue[0].rec)
		s.queue = s.queue[1:]
		n++
	}
	s.mu.Unlock()
	if n > 0 {
		s.obs.Dropped(DropBufferFull, n)
	}
}

// Run sends batches until ctx ends: a batch goes when batch_bytes are
// waiting or its oldest record waited max_delay; a batch the service did not
// take is sent again after a backoff, while new records queue behind it.
// An upload under way when ctx ends is not cut short (it is bounded by
// timeout); a batch waiting for a retry goes back to the queue for Close.
func (s *Shipper) Run(ctx context.Context) error {
	for {
		batch, wait := s.cut(true)
		if batch == nil {
			var tick <-chan time.Time
			var t *time.Timer
			if wait > 0 {
				t = time.NewTimer(wait)
				tick = t.C
			}
			select {
			case <-ctx.Done():
			case <-s.ready:
			case <-tick:
			}
			if t != nil {
				t.Stop()
			}
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		if !s.send(ctx, context.WithoutCancel(ctx), batch) {
			s.requeue(batch)
			return nil
		}
	}
}

// Close sends what is waiting, ignoring max_delay, within shutdown_timeout
// (call it after Run returned); what is left is dropped and counted.
func (s *Shipper) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	for {
		batch, _ := s.cut(false)
		if batch == nil {
			return nil
		}
		if !s.send(ctx, ctx, batch) {
			s.requeue(batch)
			break
		}
	}
	s.mu.Lock()
	n := len(s.queue)
	s.queue, s.qbytes = nil, 0
	s.mu.Unlock()
	s.obs.Dropped(DropShutdown, n)
	return fmt.Errorf("decision log service: %d records not shipped within shutdown_timeout (%v)", n, s.cfg.ShutdownTimeout)
}

// send uploads one batch until the service takes it or refuses it for good
// (true), or ctx ends first (false: the batch is still to send); an upload
// under way ends with its timeout or postCtx.
func (s *Shipper) send(ctx, postCtx context.Context, batch [][]byte) bool {
	body, err := gzipArray(batch)
	if err != nil { // writing to memory does not fail
		s.obs.Dropped(DropRejected, len(batch))
		return true
	}
	backoff := s.cfg.MinRetryDelay
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return false
		}
		retryAfter, err := s.post(postCtx, body)
		var rejected *rejectedError
		switch {
		case err == nil:
			s.obs.Uploaded(UploadSuccess, len(batch))
			return true
		case errors.As(err, &rejected):
			s.obs.Uploaded(UploadRejected, len(batch))
			s.obs.Dropped(DropRejected, len(batch))
			s.log.Error("decision log service refused a batch; its records are dropped", "url", s.shown, "records", len(batch), "err", err)
			return true
		}
		s.obs.Uploaded(UploadFailure, len(batch))
		wait := jitter(backoff)
		if retryAfter > wait {
			wait = min(retryAfter, s.cfg.MaxRetryDelay)
		}
		backoff = min(2*backoff, s.cfg.MaxRetryDelay)
		level := slog.LevelDebug // the first failure of a batch is enough at warn
		if attempt == 1 {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "decision log service: upload failed, retrying", "url", s.shown, "records", len(batch), "attempt", attempt, "retry_in", wait.String(), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// jitter is d spread over [d/2, d) ("equal jitter"), so that replicas
// that failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// rejectedError is an answer not worth sending the batch again for.
type rejectedError struct{ status int }

func (e *rejectedError) Error() string { return "HTTP status " + strconv.Itoa(e.status) }

// post sends body once; an error is retried unless it is a rejectedError.
// A 429 or 503's Retry-After (seconds) comes back with the error.
func (s *Shipper) post(ctx context.Context, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, &rejectedError{} // Validate checked the URL
	}
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	if s.cfg.BearerTokenFile != "" {
		tok, err := readToken(s.cfg.BearerTokenFile)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return 0, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		var after time.Duration
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			after = time.Duration(secs) * time.Second
		}
		return after, fmt.Errorf("HTTP status %d", c)
	default:
		return 0, &rejectedError{c}
	}
}

// gzipArray compresses the JSON array of recs.
func gzipArray(recs [][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte{'['})
	for i, r := range recs {
		if i > 0 {
			_, _ = zw.Write([]byte{','})
		}
		_, _ = zw.Write(r)
	}
	_, _ = zw.Write([]byte{']'})
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
