// Package decisionlog writes one structured record per decision, allowed and
// refused, in the shape of OPA's decision logs (decision_id, timestamp,
// labels, path, input, result, metrics), so that pipelines that already take
// OPA's logs take Warden's. Refusals are always written; allowed decisions
// at a configured sampling rate.
package decisionlog

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentwarden/warden/proxy"
)

// Config selects where decisions go.
type Config struct {
	// Path is "" (off), "-" (standard output) or a file, appended to.
	Path string `yaml:"path" json:"path"`
	// Service ships the same records to an HTTP endpoint as OPA's decision
	// log service API takes them (with path or without).
	Service ServiceConfig `yaml:"service" json:"service"`
	// SampleAllowed is the fraction of allowed decisions written, 0..1;
	// refusals are always written. Nil means 1 (every decision).
	SampleAllowed *float64 `yaml:"sample_allowed" json:"sample_allowed"`
	// FlushInterval bounds how long a record waits in the buffer; default 1s.
	FlushInterval time.Duration `yaml:"flush_interval" json:"flush_interval"`
	// IncludeInput records in each record what the decision was made on:
	// the MACP envelope (protojson) and the principal's scopes, or the MCP
	// or A2A policy input, so that `warden what-if` can decide it again.
	// Sensitive: it writes message content. Needs sample_allowed 1 (a MACP
	// session is rebuilt from every allowed message). Default false.
	IncludeInput bool `yaml:"include_input" json:"include_input"`
	// MaxInputBytes bounds the recorded input of one decision; a larger one
	// is left out and the record says so (input.input_omitted). 0 means
	// 65536 (64 KiB).
	MaxInputBytes int `yaml:"max_input_bytes" json:"max_input_bytes"`
}

// DefaultMaxInputBytes is the default bound of one decision's recorded input.
const DefaultMaxInputBytes = 64 << 10

// ErrNoInput is what a decision recorded without its input is, for a reader
// that needs it.
var ErrNoInput = errors.New("recorded without decision_log.include_input")

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.SampleAllowed != nil && (*c.SampleAllowed < 0 || *c.SampleAllowed > 1) {
		return fmt.Errorf("decision_log.sample_allowed: %v is outside 0..1", *c.SampleAllowed)
	}
	if c.FlushInterval < 0 {
		return errors.New("decision_log.flush_interval: negative")
	}
	if c.MaxInputBytes < 0 {
		return errors.New("decision_log.max_input_bytes: negative")
	}
	if c.IncludeInput && c.SampleAllowed != nil && *c.SampleAllowed < 1 {
		// A MACP session's state is rebuilt from every allowed message.
		return fmt.Errorf("decision_log.include_input needs every decision recorded, but sample_allowed is %v", *c.SampleAllowed)
	}
	return c.Service.Validate()
}

// Record is one decision as written: OPA's decision-log fields.
type Record struct {
	DecisionID string            `json:"decision_id"`
	Timestamp  time.Time         `json:"timestamp"`
	Labels     map[string]string `json:"labels"`
	Path       string            `json:"path"`
	Input      Input             `json:"input"`
	Result     Result            `json:"result"`
	Metrics    map[string]int64  `json:"metrics"`
}

// Input is what was decided.
type Input struct {
	Protocol  string   `json:"protocol"`
	Principal string   `json:"principal"`
	Via       string   `json:"via,omitempty"`
	SessionID string   `json:"session_id,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Type      string   `json:"type"`
	Roles     []string `json:"roles,omitempty"`
	// ClientAddr, RequestID, HTTPMethod and RequestPath are whom the
	// request came from and what it asked (proxy.Source).
	ClientAddr  string `json:"client_addr,omitempty"`
	RequestID   string `json:"request_id,omitempty"`
	HTTPMethod  string `json:"http_method,omitempty"`
	RequestPath string `json:"request_path,omitempty"`
	// With include_input: Recorded is set on every decision made on a
	// message (not on refusals at the front door, before there is one),
	// with the MACP envelope (protojson; none for a control operation), the
	// principal's scopes, and the MCP or A2A policy input (none when the
	// protocol checks refused before the policies were asked); Omitted says
	// why they are missing when the decision had an input over
	// max_input_bytes.
	Recorded bool            `json:"input_recorded,omitempty"`
	Envelope json.RawMessage `json:"envelope,omitempty"`
	Claims   map[string]any  `json:"claims,omitempty"`
	Policy   json.RawMessage `json:"policy,omitempty"`
	Omitted  string          `json:"input_omitted,omitempty"`
}

// Result is the decision.
type Result struct {
	Allow     bool   `json:"allow"`
	Duplicate bool   `json:"duplicate,omitempty"`
	DryRun    bool   `json:"dry_run,omitempty"`
	Code      string `json:"code,omitempty"`
	Reason    string `json:"reason"`
	// AuthReason is why authentication failed (authn.Cause), when it did.
	AuthReason string `json:"auth_reason,omitempty"`
	// IDReason is why an id the request named is not the caller's
	// (handle.Cause), when one is not.
	IDReason string `json:"id_reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Logger writes decision records; it is a proxy.Observer. Records are
// buffered and flushed by Run every flush interval and by Close; the
// shipper's batches are sent by Run and, at the end, by Close.
type Logger struct {
	mu     sync.Mutex
	w      *bufio.Writer // nil when only shipped
	ship   *Shipper      // nil when not shipped
	path   string        // the file, "" for standard output
	file   *os.File      // the open file, nil for standard output
	sample float64
	labels map[string]string
	every  time.Duration
	input  int // max recorded input bytes; 0: inputs are not recorded
	now    func() time.Time
}

// WithClock makes l stamp records with now's time (the Enforcer's clock,
// when it is not the wall clock: an offline replay); it returns l.
func (l *Logger) WithClock(now func() time.Time) *Logger {
	l.now = now
	return l
}

// New opens the log cfg names (nil Logger when it is off). labels go into
// every record (for example the Warden version and instance). It starts no
// goroutines; Run flushes and ships. Shipping is counted through WithShipping.
func New(cfg Config, stdout io.Writer, labels map[string]string) (*Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Path == "" && cfg.Service.URL == "" {
		return nil, nil
	}
	var ship *Shipper
	if cfg.Service.URL != "" {
		var err error
		if ship, err = NewShipper(cfg.Service, nil, nil); err != nil {
			return nil, err
		}
	}
	var w io.Writer
	var file *os.File
	switch cfg.Path {
	case "":
	case "-":
		w = stdout
	default:
		f, err := openLog(cfg.Path)
		if err != nil {
			return nil, err
		}
		w, file = f, f
	}
	l := &Logger{ship: ship, file: file, sample: 1, labels: labels, every: cfg.FlushInterval}
	if w != nil {
		l.w = bufio.NewWriterSize(w, 64<<10)
	}
	if file != nil {
		l.path = cfg.Path
	}
	if cfg.SampleAllowed != nil {
		l.sample = *cfg.SampleAllowed
	}
	if l.every == 0 {
		l.every = time.Second
	}
	l.now = time.Now
	if cfg.IncludeInput {
		l.input = cmp.Or(cfg.MaxInputBytes, DefaultMaxInputBytes)
	}
	return l, nil
}

// WithShipping counts shipping through obs and logs its failures to log
// (call it before Run); it returns l.
func (l *Logger) WithShipping(obs ShipObserver, log *slog.Logger) *Logger {
	if l.ship != nil {
		if obs != nil {
			l.ship.obs = obs
		}
		if log != nil {
			l.ship.log = log
		}
	}
	return l
}

// Shipper is where records are shipped, nil when they are not.
func (l *Logger) Shipper() *Shipper { return l.ship }

// Decided writes d's record (proxy.Observer).
func (l *Logger) Decided(d proxy.Decision, took time.Duration) {
	if d.Allow && !d.DryRun && l.sample < 1 && rand.Float64() >= l.sample {
		return
	}
	path := "warden/" + d.Protocol
	r := Record{
		DecisionID: d.ID, Timestamp: l.now().UTC(), Labels: l.labels, Path: path,
		Input: Input{Protocol: d.Protocol, Principal: d.Principal, Via: d.Via, SessionID: d.SessionID, Mode: d.Mode, Type: d.Type, Roles: d.Roles,
			ClientAddr: d.Source.Client, RequestID: d.Source.RequestID, HTTPMethod: d.Source.Method, RequestPath: d.Source.Path},
		Result: Result{Allow: d.Allow, Duplicate: d.Duplicate, DryRun: d.DryRun, Code: string(d.Code), Reason: string(d.Reason),
			AuthReason: d.AuthReason, IDReason: d.IDReason, Message: d.Message},
		Metrics: map[string]int64{"timer_warden_decision_ns": took.Nanoseconds()},
	}
	if l.input > 0 && d.Recorded != nil {
		recordInput(&r.Input, d.Recorded, l.input)
	}
	b, err := json.Marshal(&r)
	if err != nil { // the record is strings, numbers and JSON already checked
		return
	}
	if l.ship != nil {
		l.ship.Add(b)
	}
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(b) // a write error surfaces on the next flush
	_ = l.w.WriteByte('\n')
}

// recordInput puts rec into in, unless it is over max bytes.
func recordInput(in *Input, rec *proxy.Recorded, max int) {
	in.Recorded = true
	var err error
	if rec.Envelope != nil {
		if in.Envelope, err = protojson.Marshal(rec.Envelope); err != nil {
			in.Envelope, in.Omitted = nil, "envelope: "+err.Error()
			return
		}
	}
	if rec.Policy != nil {
		if in.Policy, err = json.Marshal(rec.Policy); err != nil {
			in.Policy, in.Omitted = nil, "policy input: "+err.Error()
			return
		}
	}
	in.Claims = rec.Claims
	if n := len(in.Envelope) + len(in.Policy); n > max {
		in.Envelope, in.Policy, in.Claims = nil, nil, nil
		in.Omitted = fmt.Sprintf("input of %d bytes is over decision_log.max_input_bytes (%d)", n, max)
	}
}

// Run flushes the buffer every flush interval, and ships, until ctx ends.
// Close writes and ships what decisions made after that (while listeners
// drain) left.
func (l *Logger) Run(ctx context.Context) error {
	switch {
	case l.ship == nil:
		return l.flushEvery(ctx)
	case l.w == nil:
		return l.ship.Run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	shipped := make(chan error, 1)
	go func() { shipped <- l.ship.Run(ctx) }()
	err := l.flushEvery(ctx) // ends with ctx, or on a write error
	cancel()
	return errors.Join(err, <-shipped)
}

// flushEvery flushes the buffer every flush interval until ctx ends.
func (l *Logger) flushEvery(ctx context.Context) error {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := l.flush(); err != nil {
				return fmt.Errorf("decision log: %w", err)
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// openLog opens the decision log file for appending, creating it.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("decision_log.path: %w", err)
	}
	return f, nil
}

// Reopen opens the log file again by its path (SIGHUP, after logrotate
// moved it): what is buffered goes to the file open until now, every later
// record to the new one, so none is lost or written twice. When the path
// cannot be opened, records keep going to the current file and the error is
// returned. Standard output is not reopened.
func (l *Logger) Reopen() error {
	if l.path == "" {
		return nil
	}
	f, err := openLog(l.path)
	if err != nil {
		return fmt.Errorf("decision log reopen: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	err = l.w.Flush()
	old := l.file
	l.file = f
	l.w.Reset(f)
	if err := errors.Join(err, old.Close()); err != nil {
		return fmt.Errorf("decision log reopen: %w", err)
	}
	return nil
}

// Close flushes the buffer, closes the file and ships what is left within
// the service's shutdown_timeout (after Run returned).
func (l *Logger) Close() error {
	err := l.flush()
	if l.ship != nil {
		err = errors.Join(err, l.ship.Close())
	}
	l.mu.Lock()
	if l.file != nil {
		err = errors.Join(err, l.file.Close())
	}
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	return nil
}

func (l *Logger) flush() error {
	if l.w == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}
