package proxy

import (
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
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Config is the Enforcer's part of the configuration.
type Config struct {
	// Sessions bounds the session table (entries); each costs a few hundred
	// bytes (see README).
	Sessions int `yaml:"sessions" json:"sessions"`
	// DryRun logs every refusal and allows the message anyway.
	DryRun bool `yaml:"dry_run" json:"dry_run"`
	// PipelineDepth bounds how many record-only messages (TaskUpdate,
	// Progress, HandoffContext) of one MACP session may await the upstream's
	// answer at once; 0 or 1 decides a session's messages strictly one at a
	// time across the round trip. warden's configuration defaults it to
	// DefaultPipelineDepth.
	PipelineDepth int `yaml:"pipeline_depth" json:"pipeline_depth"`
}

// DefaultSessions is the default session table bound.
const DefaultSessions = 100_000

// DefaultPipelineDepth is warden's default PipelineDepth.
const DefaultPipelineDepth = 16

// MaxPipelineDepth bounds PipelineDepth.
const MaxPipelineDepth = 1024

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Sessions < 0 {
		return fmt.Errorf("sessions: %d is negative", c.Sessions)
	}
	if c.PipelineDepth < 0 || c.PipelineDepth > MaxPipelineDepth {
		return fmt.Errorf("pipeline_depth: %d is outside 0..%d", c.PipelineDepth, MaxPipelineDepth)
	}
	return nil
}

// Rebuilder recovers the state of a session the table does not hold (evicted,
// or seen before a restart) from the upstream runtime.
type Rebuilder interface {
	// Rebuild binds the session to bound, the governance Warden recorded it
	// bound at SessionStart (nil when none is recorded): the runtime shows
	// which policy a session bound, never the definition, and the one
	// registered under its id now may differ. A session whose non-default
	// policy has no record binds macp.UnknownPolicy.
	Rebuild(ctx context.Context, sessionID string, bound *macp.Governance) (*macp.Session, error)
	// Exists reports whether the upstream holds the session, whether or not
	// the caller may see it.
	Exists(ctx context.Context, sessionID string) (bool, error)
}

// PolicySource fetches a governance policy Warden has not seen registered
// (registered before Warden started, or through another replica).
type PolicySource interface {
	Policy(ctx context.Context, id string) (macp.PolicyDescriptor, bool, error)
}

// TaskStore is the owner table Warden replicas share (proxy/state keeps it
// in Redis): MCP tasks, A2A tasks and contexts (owners.Key.Name). This
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

func (e *Enforcer) rebuilt(ok bool) {
	if o, is := e.observer.(EventObserver); is {
		o.Rebuilt(ok)
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
	// Rebuilder is nil when no upstream can be asked (offline replay); a
	// session the table does not hold is then unknown.
	Rebuilder Rebuilder
	// Policies fetches unknown policy_versions at SessionStart; nil means
	// only registered policies bind.
	PolicySource PolicySource
	// Tasks is the MCP and A2A task table shared with other replicas; nil means
	// this replica's own table only.
	Tasks TaskStore
	// Sessions is the MACP session state shared with other ext_authz
	// replicas; nil means this replica's own table only.
	Sessions SessionStore
	Logger   *slog.Logger
	Now      func() time.Time
}

// Request is one message to decide: an envelope, or a control operation
// (Op set) on SessionID.
type Request struct {
	// Principal is set when the caller was authenticated already (a stream
	// authenticates once, when it opens); otherwise Credentials are checked.
	Principal   *authn.Principal
	Credentials authn.Credentials
	// AuthError is set when the adapter's front door could not read the
	// credentials (two of them, another scheme): the message is refused as
	// unauthenticated with its reason.
	AuthError error
	Envelope  *macpv1.Envelope
	Op        string // macp.OpCancel, OpSuspend, OpResume
	SessionID string // for Op
	// Source is whom the request came from (admission's); when unset, the
	// one the context carries.
	Source Source
	// Acked is set when the upstream's own answer decides the commit (the
	// sidecar's unary Send: an Ack ok and not a duplicate): a SessionStart
	// for a session the table does not hold then needs no look-up, as the
	// runtime refuses one it holds.
	Acked bool
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

// Enforcer decides messages. It is safe for concurrent use; messages of one
// session are decided one at a time, different sessions never wait for each
// other. A state-changing message holds its session until the upstream
// answers; up to Config.PipelineDepth record-only ones may be in flight.
type Enforcer struct {
	snap      atomic.Pointer[Snapshot]
	table     *table
	owners    *owners.Table
	sessions  SessionStore
	decoder   macp.Decoder // of shared sessions
	registry  *PolicyRegistry
	rebuilder Rebuilder
	source    PolicySource
	observer  Observer
	tracer    trace.Tracer // nil: requests are not traced
	log       *slog.Logger
	now       func() time.Time
	depth     int // Config.PipelineDepth; <= 1 is serial
	record    bool
}

// New builds an Enforcer. It starts no goroutines.
func New(cfg Config, opts Options) (*Enforcer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("enforcer config: %w", err)
	}
	if opts.Authenticator == nil || opts.Policies == nil {
		return nil, errors.New("enforcer: an authenticator and a policy engine are required")
	}
	if cfg.Sessions == 0 {
		cfg.Sessions = DefaultSessions
	}
	t, err := newTable(cfg.Sessions, opts.Rebuilder != nil)
	if err != nil {
		return nil, fmt.Errorf("session table: %w", err)
	}
	ts, err := owners.New(cfg.Sessions, opts.Tasks)
	if err != nil {
		return nil, fmt.Errorf("owner table: %w", err)
	}
	e := &Enforcer{table: t, owners: ts, sessions: opts.Sessions, registry: NewPolicyRegistry(), rebuilder: opts.Rebuilder, source: opts.PolicySource, observer: opts.Observer, log: opts.Logger, now: opts.Now, depth: cfg.PipelineDepth, record: opts.RecordInputs}
	if e.sessions != nil {
		// Shared sessions commit on allow, before the answer (ext_authz):
		// nothing is in flight, so nothing is pipelined.
		e.depth = 1
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
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

// DryRun reports whether refusals are only logged (dry-run mode): adapters
// then forward every message as the upstream would receive it without
// Warden.
func (e *Enforcer) DryRun() bool { return e.snap.Load().cfg.DryRun }

// Policies is the registry of governance policies sessions bind at start.
func (e *Enforcer) Policies() *PolicyRegistry { return e.registry }

// SharesSessions reports whether MACP session state lives in a store shared
// by replicas, the table being its cache.
func (e *Enforcer) SharesSessions() bool { return e.sessions != nil }

// Sessions returns the number of sessions the table holds.
func (e *Enforcer) Sessions() int { return e.table.len() }

// Session returns the committed state of a session, or nil. For replay and
// tests; the returned state must not be modified.
func (e *Enforcer) Session(ctx context.Context, id string) (*macp.Session, error) {
	en, err := e.table.acquire(ctx, id, e.now().UnixMilli(), false)
	if err != nil || en == nil {
		return nil, err
	}
	defer en.release()
	return en.state.Load(), nil
}

// Enforce decides one message, following DESIGN.md §4: snapshot,
// authentication and sender binding, session state, rules, policy. An error
// means Warden could not decide; the adapter must refuse the message.
func (e *Enforcer) Enforce(ctx context.Context, req Request) (Decision, error) {
	return Observed(e, ctx, e, req, (*Enforcer).enforce)
}

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

// recordedClaims is what of p's claims the policies read (scopes), in a
// shape scopes reads back.
func recordedClaims(p authn.Principal) map[string]any {
	s := Scopes(p)
	if s == nil || p.Method == "static" {
		return s
	}
	return map[string]any{"macp_scopes": s}
}

// Forget drops a session from the table, so that its next message rebuilds
// the state from the upstream: for when the upstream's answer shows that
// Warden's state no longer follows it (the upstream does not know the
// session, applied a retransmission as new, or its answer was lost). Without
// a rebuilder nothing is forgotten, as nothing could be rebuilt.
func (e *Enforcer) Forget(ctx context.Context, sessionID string) {
	if e.rebuilder == nil || sessionID == "" {
		return
	}
	e.table.forget(ctx, sessionID)
}

// lookup resolves a policy_version: registered, or fetched from the source
// (again once the copy fetched is fetchedFor old).
func (e *Enforcer) lookup(ctx context.Context) macp.PolicyLookup {
	return func(id string) (macp.PolicyDescriptor, bool) {
		if e.source == nil {
			return e.registry.Lookup(id)
		}
		now := e.now()
		if d, ok := e.registry.current(id, now); ok {
			return d, ok
		}
		d, ok, err := e.source.Policy(ctx, id)
		if err != nil {
			e.log.Warn("could not fetch a policy from the upstream", "policy_id", id, "err", err)
			return d, false
		}
		if ok {
			_ = e.registry.fetched(d, now) // a concurrent fetch may have recorded it
		} else {
			e.registry.Remove(id) // unregistered upstream
		}
		return d, ok
	}
}

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
