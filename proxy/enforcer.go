package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/owners"
)

// Config is the Enforcer's part of the configuration.
type Config struct {
	// Sessions bounds the session table (entries); each costs a few hundred
	// bytes (see README).
	Sessions int `yaml:"sessions" json:"sessions"`
	// SessionsPerPrincipal bounds the entries one principal holds in the
	// owner table of MCP and A2A task and context ids (of Sessions), and,
	// with a shared store (state.url), in Redis: its task and context
	// entries, and the MACP sessions it initiated. One over its share loses
	// its own least recently used entry, never another's. 0: an eighth of sessions (DefaultShareDivisor), at least
	// MinShare (so a small table is not cut into shares too small to hold a
	// task and its context).
	SessionsPerPrincipal int `yaml:"sessions_per_principal" json:"sessions_per_principal"`
	// DryRun logs every refusal and allows the message anyway.
	DryRun bool `yaml:"dry_run" json:"dry_run"`
	// PipelineDepth bounds how many record-only messages (TaskUpdate,
	// Progress, HandoffContext) of one MACP session may await the upstream's
	// answer at once; 0 or 1 decides a session's messages strictly one at a
	// time across the round trip. warden's configuration defaults it to
	// DefaultPipelineDepth.
	PipelineDepth int `yaml:"pipeline_depth" json:"pipeline_depth"`
	// MACPMaxPayloadBytes bounds a MACP envelope's payload, as the runtime's
	// MACP_MAX_PAYLOAD_BYTES bounds it (keep the two equal): a larger one is
	// refused PAYLOAD_TOO_LARGE, as the runtime refuses it. 0: no bound.
	// warden's configuration defaults it to DefaultMACPMaxPayloadBytes, the
	// runtime's default.
	MACPMaxPayloadBytes int `yaml:"macp_max_payload_bytes" json:"macp_max_payload_bytes"`
	// MACPMessageLimitPerMinute bounds, at ext_authz (which commits what it
	// allows, never seeing the runtime's answer), the MACP messages other
	// than SessionStarts one sender may have let through in a minute, as the
	// runtime's MACP_MESSAGE_LIMIT_PER_MINUTE bounds them (keep the two
	// equal): one more is refused RATE_LIMITED, as the runtime refuses it.
	// Counted per Warden process. The sidecar does not count: it answers the
	// runtime's own RATE_LIMITED and commits nothing refused. 0: no bound.
	// warden's configuration defaults it to DefaultMACPMessageLimitPerMinute,
	// the runtime's default.
	MACPMessageLimitPerMinute int `yaml:"macp_message_limit_per_minute" json:"macp_message_limit_per_minute"`
	// MACPSessionStartLimitPerMinute is MACPMessageLimitPerMinute for
	// SessionStarts, as the runtime's MACP_SESSION_START_LIMIT_PER_MINUTE.
	// warden's configuration defaults it to
	// DefaultMACPSessionStartLimitPerMinute, the runtime's default.
	MACPSessionStartLimitPerMinute int `yaml:"macp_session_start_limit_per_minute" json:"macp_session_start_limit_per_minute"`
}

// DefaultSessions is the default session table bound.
const DefaultSessions = 100_000

// DefaultShareDivisor makes the default SessionsPerPrincipal: an eighth of
// the table.
const DefaultShareDivisor = 8

// MinShare is the smallest default share: a table of at most MinShare
// entries has no share.
const MinShare = 64

// OwnerTable returns the owner table's size and each principal's share of
// it, defaults applied.
func (c Config) OwnerTable() (size, share int) {
	size = cmp.Or(c.Sessions, DefaultSessions)
	return size, cmp.Or(c.SessionsPerPrincipal, max(min(size, MinShare), size/DefaultShareDivisor))
}

// DefaultPipelineDepth is warden's default PipelineDepth.
const DefaultPipelineDepth = 16

// DefaultMACPMaxPayloadBytes is warden's default MACPMaxPayloadBytes:
// macp-runtime 0.13.0's default MACP_MAX_PAYLOAD_BYTES.
const DefaultMACPMaxPayloadBytes = 1 << 20

// DefaultMACPMessageLimitPerMinute and DefaultMACPSessionStartLimitPerMinute
// are macp-runtime 0.13.0's defaults of MACP_MESSAGE_LIMIT_PER_MINUTE and
// MACP_SESSION_START_LIMIT_PER_MINUTE.
const (
	DefaultMACPMessageLimitPerMinute      = 600
	DefaultMACPSessionStartLimitPerMinute = 60
)

// MaxPipelineDepth bounds PipelineDepth.
const MaxPipelineDepth = 1024

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Sessions < 0 {
		return fmt.Errorf("sessions: %d is negative", c.Sessions)
	}
	if c.SessionsPerPrincipal < 0 {
		return fmt.Errorf("sessions_per_principal: %d is negative", c.SessionsPerPrincipal)
	}
	if c.PipelineDepth < 0 || c.PipelineDepth > MaxPipelineDepth {
		return fmt.Errorf("pipeline_depth: %d is outside 0..%d", c.PipelineDepth, MaxPipelineDepth)
	}
	if c.MACPMaxPayloadBytes < 0 {
		return fmt.Errorf("macp_max_payload_bytes: %d is negative", c.MACPMaxPayloadBytes)
	}
	if c.MACPMessageLimitPerMinute < 0 || c.MACPSessionStartLimitPerMinute < 0 {
		return fmt.Errorf("macp_message_limit_per_minute, macp_session_start_limit_per_minute: negative")
	}
	return nil
}

// TaskStore is the owner table Warden replicas share (proxy/state keeps it
// in Redis): MCP tasks, A2A tasks and contexts, and the MCP sessions
// ext_authz binds (owners.Key.Name). This
// replica's table (owners.Table) stays in front of it as a cache of owners,
// which never change; status and steer counts are read from the store at
// each decision. An error means the store could not be reached: the
// decision fails closed.
type TaskStore = owners.Store

// Observer is told of every decision and how long it took: the metrics hook.
type Observer interface {
	Decided(d Decision, took time.Duration)
}

// EventObserver is what an Observer may also implement to count what is not
// a decision: calls to an upstream that failed (runtime or server down,
// transport errors) and session rebuilds, by outcome.
type EventObserver interface {
	UpstreamFailed(protocol string)
	Rebuilt(ok bool)
}

// UpstreamFailed tells the observer that a call to protocol's upstream
// failed; adapters call it where they answer "unavailable".
func (e *Enforcer) UpstreamFailed(protocol string) {
	if o, ok := e.observer.(EventObserver); ok {
		o.UpstreamFailed(protocol)
	}
}

// Options are the Enforcer's dependencies.
type Options struct {
	// Observer receives every decision; nil means none.
	Observer Observer
	// Tracer, when not nil, gives every request a door begins (Begin) a
	// server span.
	Tracer trace.TracerProvider
	// RecordInputs puts on every decision what it was made on
	// (Decision.Recorded), for a decision log that records inputs.
	RecordInputs  bool
	Authenticator *authn.Authenticator
	Policies      *policies.Engine
	// Tasks is the MCP and A2A task table shared with other replicas; nil means
	// this replica's own table only.
	Tasks  TaskStore
	Logger *slog.Logger
	Now    func() time.Time
}

// Snapshot is what one decision reads: the configuration, the
// authenticator and the policy engine, swapped whole on reload (Swap). A
// decision loads it once (Enforcer.Snapshot) and reads that one throughout.
type Snapshot struct {
	cfg    Config
	authn  *authn.Authenticator
	engine *policies.Engine
}

// DryRun reports whether refusals are only logged (dry-run mode).
func (s *Snapshot) DryRun() bool { return s.cfg.DryRun }

// Authenticator is the authenticator of the snapshot.
func (s *Snapshot) Authenticator() *authn.Authenticator { return s.authn }

// Engine is the policy engine of the snapshot.
func (s *Snapshot) Engine() *policies.Engine { return s.engine }

// Enforcer is the protocol-free core every protocol's decider decides on
// (proxy/macp/sessions, proxy/mcp/tasks, proxy/a2a/tenancy): what one
// decision reads (Snapshot, swapped whole on reload), decisions started
// with an id minted in one place (Start), finished with dry run applied in
// one place (Finish) and observed in one place (Observed, decided), the
// owner table of MCP and A2A ids, the flights of requests (Begin) and the
// refusals a door makes before there is a message to decide. It is safe
// for concurrent use.
type Enforcer struct {
	snap     atomic.Pointer[Snapshot]
	owners   *owners.Table
	shares   *owners.Watch // told of the entries a principal's share drops
	observer Observer
	tracer   trace.Tracer // nil: requests are not traced
	log      *slog.Logger
	now      func() time.Time
	record   bool
	ids      ids // mints decision and request ids
}

// New builds an Enforcer. It starts no goroutines.
func New(cfg Config, opts Options) (*Enforcer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("enforcer config: %w", err)
	}
	if opts.Authenticator == nil || opts.Policies == nil {
		return nil, errors.New("enforcer: an authenticator and a policy engine are required")
	}
	e := &Enforcer{observer: opts.Observer, log: opts.Logger, now: opts.Now, record: opts.RecordInputs}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	counter, _ := opts.Observer.(owners.ShareObserver)
	e.shares = owners.NewWatch(counter, e.log, opts.Now)
	size, share := cfg.OwnerTable()
	ts, err := owners.New(size, share, opts.Tasks, e.shares)
	if err != nil {
		return nil, fmt.Errorf("owner table: %w", err)
	}
	e.owners = ts
	if opts.Tracer != nil {
		e.tracer = opts.Tracer.Tracer("github.com/agentwarden/warden/proxy")
	}
	if e.now == nil {
		e.now = time.Now
	}
	e.snap.Store(&Snapshot{cfg: cfg, authn: opts.Authenticator, engine: opts.Policies})
	if cfg.DryRun {
		e.log.Warn("dry-run mode: refusals are logged and the messages forwarded anyway")
	}
	return e, nil
}

// Swap installs a new authenticator and policy engine (a reload); decisions
// under way finish with the old ones.
func (e *Enforcer) Swap(a *authn.Authenticator, p *policies.Engine) {
	old := e.snap.Load()
	e.snap.Store(&Snapshot{cfg: old.cfg, authn: a, engine: p})
}

// Authenticate checks credentials with the current authenticator, for calls
// that are not messages (stream opening, reads of session state). Every
// door's front gate authenticates here: credentials it accepts prove the
// client connection the request came on (authn.Proven), which is then
// neither closed for want of a credential nor for a newcomer.
func (e *Enforcer) Authenticate(ctx context.Context, c authn.Credentials) (authn.Principal, error) {
	p, err := e.snap.Load().authn.Authenticate(ctx, c)
	if err == nil {
		authn.Proven(ctx)
	}
	return p, err
}

// Holds reports whether a credential's grant (authn.GrantOf) still holds
// under the authenticator loaded now, and the client CAs of the door it was
// made at (nil: not known to Warden).
func (e *Enforcer) Holds(ctx context.Context, g authn.Grant, now time.Time, cas authn.ClientCAs) error {
	return e.snap.Load().authn.Holds(ctx, g, now, cas)
}

// DryRun reports whether refusals are only logged (dry-run mode): adapters
// then forward every message as the upstream would receive it without
// Warden.
func (e *Enforcer) DryRun() bool { return e.snap.Load().cfg.DryRun }

// Observed runs one decision of a protocol's decider (by, deciding req with
// decide) and tells the observer and the request's flight about it: the one
// place a decided message is observed. decide is a method expression, so
// that no closure is allocated per decision.
func Observed[T, R any](e *Enforcer, ctx context.Context, by T, req R, decide func(T, context.Context, R) (Decision, error)) (Decision, error) {
	if e.observer == nil {
		d, err := decide(by, ctx, req)
		e.decided(ctx, d, err, 0)
		return d, err
	}
	began := time.Now()
	d, err := decide(by, ctx, req)
	e.decided(ctx, d, err, time.Since(began))
	return d, err
}

// Snapshot is the configuration, authenticator and policy engine a
// decision made now reads (swapped whole on reload).
func (e *Enforcer) Snapshot() *Snapshot { return e.snap.Load() }

// Config is the Enforcer's configuration.
func (e *Enforcer) Config() Config { return e.snap.Load().cfg }

// Now is the Enforcer's clock (Options.Now).
func (e *Enforcer) Now() time.Time { return e.now() }

// Logger is the Enforcer's logger (Options.Logger; never nil).
func (e *Enforcer) Logger() *slog.Logger { return e.log }

// Observer is the Enforcer's observer (Options.Observer; nil for none), for
// a decider's own events (EventObserver and what it defines).
func (e *Enforcer) Observer() Observer { return e.observer }

// RecordsInputs reports whether decisions record what they were made on
// (Options.RecordInputs, Decision.Recorded).
func (e *Enforcer) RecordsInputs() bool { return e.record }

// OwnerTable is the owner table of MCP and A2A tasks and contexts, in
// front of the shared store (Options.Tasks).
func (e *Enforcer) OwnerTable() *owners.Table { return e.owners }

// ShareWatch is told of the entries every table of what principals hold
// drops for a principal's share: it counts them (an Observer that is an
// owners.ShareObserver) and warns on the Enforcer's logger, at most once a
// minute per principal and table.
func (e *Enforcer) ShareWatch() *owners.Watch { return e.shares }

// Scopes returns what the policies read as the credential's scopes: a JWT's
// macp_scopes claim, or a static token's attributes.
func Scopes(p authn.Principal) map[string]any {
	if p.Claims == nil {
		return nil
	}
	if s, ok := p.Claims["macp_scopes"].(map[string]any); ok {
		return s
	}
	if p.Method == "static" {
		return p.Claims
	}
	return nil
}

// Claims returns what an MCP or A2A policy sees of the credential: a JWT's claims
// or a static token's attributes.
func Claims(p authn.Principal) map[string]any {
	if s := Scopes(p); s != nil {
		return s
	}
	return p.Claims
}
