// Package proxy holds Warden's one decision point, the Enforcer, and the
// session table it owns. Transport adapters (proxy/macp, proxy/mcp,
// proxy/extauthz) decode the wire, call Enforce, forward or refuse, and settle
// the decision when the upstream answers.
package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Config is the Enforcer's part of the configuration.
type Config struct {
	// Sessions bounds the session table (entries); each costs a few hundred
	// bytes (see README).
	Sessions int `yaml:"sessions" json:"sessions"`
	// DryRun logs every refusal and allows the message anyway.
	DryRun bool `yaml:"dry_run" json:"dry_run"`
}

// DefaultSessions is the default session table bound.
const DefaultSessions = 100_000

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Sessions < 0 {
		return fmt.Errorf("sessions: %d is negative", c.Sessions)
	}
	return nil
}

// Rebuilder recovers the state of a session the table does not hold (evicted,
// or seen before a restart) from the upstream runtime.
type Rebuilder interface {
	Rebuild(ctx context.Context, sessionID string) (*rules.Session, error)
}

// PolicySource fetches a governance policy Warden has not seen registered
// (registered before Warden started, or through another replica).
type PolicySource interface {
	Policy(ctx context.Context, id string) (rules.PolicyDescriptor, bool, error)
}

// Observer is told of every decision and how long it took: the metrics hook.
type Observer interface {
	Decided(d Decision, took time.Duration)
}

// Options are the Enforcer's dependencies.
type Options struct {
	// Observer receives every decision; nil means none.
	Observer      Observer
	Authenticator *authn.Authenticator
	Policies      *policies.Engine
	// Rebuilder is nil when no upstream can be asked (offline replay); a
	// session the table does not hold is then unknown.
	Rebuilder Rebuilder
	// Policies fetches unknown policy_versions at SessionStart; nil means
	// only registered policies bind.
	PolicySource PolicySource
	Logger       *slog.Logger
	Now          func() time.Time
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
	Op        string // rules.OpCancel, OpSuspend, OpResume
	SessionID string // for Op
}

// Decision is the Enforcer's answer. A denial is a Decision, never an error.
// Every Decision must be settled, exactly once, with Settle.
type Decision struct {
	ID string
	// Protocol is "macp" or "mcp", the metric label.
	Protocol  string
	Allow     bool
	Duplicate bool
	// DryRun is set when the message was allowed only because of dry-run mode.
	DryRun    bool
	Code      rules.Code
	Reason    rules.Reason
	Message   string
	Principal string
	// Via is how the principal was authenticated (authn.Principal.Method).
	Via       string
	Type      string
	Mode      string
	SessionID string
	// Roles are the sender's roles, for logs and replay output.
	Roles []string

	pending *pending
}

// pending holds a session locked between the decision and the upstream's
// answer, and the state to commit if the upstream accepts the message.
type pending struct {
	// undo, for an MCP decision, gives back what the decision reserved when
	// the upstream refused the request; t is then nil.
	undo func()
	t    *table
	e    *entry
	next *rules.Session
	now  int64
	once sync.Once
}

// Settle ends the decision: when accepted is true (the upstream acknowledged
// the message) the pending state is committed; otherwise nothing changes.
// It releases the session for the next message and is safe to call on a denial.
func (d Decision) Settle(accepted bool) {
	p := d.pending
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.t == nil {
			if !accepted && p.undo != nil {
				p.undo()
			}
			return
		}
		if accepted && p.next != nil {
			p.t.settle(p.e, p.next, p.now)
		} else {
			p.t.drop(p.e)
		}
		p.e.release()
	})
}

// snapshot is what one decision reads: swapped whole on reload.
type snapshot struct {
	cfg    Config
	authn  *authn.Authenticator
	engine *policies.Engine
}

// Enforcer decides messages. It is safe for concurrent use; messages of one
// session are decided one at a time, different sessions never wait for each
// other.
type Enforcer struct {
	snap      atomic.Pointer[snapshot]
	table     *table
	tasks     *tasks
	registry  *PolicyRegistry
	rebuilder Rebuilder
	source    PolicySource
	observer  Observer
	log       *slog.Logger
	now       func() time.Time
	idPrefix  string
	seq       atomic.Uint64
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
	ts, err := newTasks(cfg.Sessions)
	if err != nil {
		return nil, fmt.Errorf("task table: %w", err)
	}
	e := &Enforcer{table: t, tasks: ts, registry: NewPolicyRegistry(), rebuilder: opts.Rebuilder, source: opts.PolicySource, observer: opts.Observer, log: opts.Logger, now: opts.Now}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	e.idPrefix = hex.EncodeToString(b[:]) + "-"
	e.snap.Store(&snapshot{cfg: cfg, authn: opts.Authenticator, engine: opts.Policies})
	if cfg.DryRun {
		e.log.Warn("dry-run mode: refusals are logged and the messages forwarded anyway")
	}
	return e, nil
}

// Swap installs a new authenticator and policy engine (a reload); decisions
// under way finish with the old ones.
func (e *Enforcer) Swap(a *authn.Authenticator, p *policies.Engine) {
	old := e.snap.Load()
	e.snap.Store(&snapshot{cfg: old.cfg, authn: a, engine: p})
}

// Authenticate checks credentials with the current authenticator, for calls
// that are not messages (stream opening, reads of session state).
func (e *Enforcer) Authenticate(ctx context.Context, c authn.Credentials) (authn.Principal, error) {
	return e.snap.Load().authn.Authenticate(ctx, c)
}

// DryRun reports whether refusals are only logged (dry-run mode): adapters
// then forward every message as the upstream would receive it without
// Warden.
func (e *Enforcer) DryRun() bool { return e.snap.Load().cfg.DryRun }

// Policies is the registry of governance policies sessions bind at start.
func (e *Enforcer) Policies() *PolicyRegistry { return e.registry }

// Sessions returns the number of sessions the table holds.
func (e *Enforcer) Sessions() int { return e.table.len() }

// Session returns the committed state of a session, or nil. For replay and
// tests; the returned state must not be modified.
func (e *Enforcer) Session(ctx context.Context, id string) (*rules.Session, error) {
	en, err := e.table.acquire(ctx, id, e.now().UnixMilli(), false)
	if err != nil || en == nil {
		return nil, err
	}
	defer en.release()
	return en.state, nil
}

// Enforce decides one message, following DESIGN.md §4: snapshot,
// authentication and sender binding, session state, rules, policy. An error
// means Warden could not decide; the adapter must refuse the message.
func (e *Enforcer) Enforce(ctx context.Context, req Request) (Decision, error) {
	return observed(e, ctx, req, e.enforce)
}

// observed runs one decision and tells the observer about it.
func observed[R any](e *Enforcer, ctx context.Context, req R, decide func(context.Context, R) (Decision, error)) (Decision, error) {
	if e.observer == nil {
		return decide(ctx, req)
	}
	began := time.Now()
	d, err := decide(ctx, req)
	if err == nil {
		e.observer.Decided(d, time.Since(began))
	}
	return d, err
}

func (e *Enforcer) enforce(ctx context.Context, req Request) (Decision, error) {
	snap := e.snap.Load()
	now := e.now().UnixMilli()
	d := Decision{ID: e.idPrefix + strconv.FormatUint(e.seq.Add(1), 36), Protocol: "macp"}
	env := req.Envelope
	if req.Op != "" {
		d.Type, d.SessionID = req.Op, req.SessionID
	} else if env != nil {
		d.Type, d.Mode, d.SessionID = env.GetMessageType(), env.GetMode(), env.GetSessionId()
	}

	// Authenticate and bind the sender.
	var principal authn.Principal
	if req.AuthError != nil {
		return e.finish(snap, d, rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, Detail: "authentication failed: " + authn.Reason(req.AuthError)}), nil
	}
	if req.Principal != nil {
		principal = *req.Principal
	} else {
		p, err := snap.authn.Authenticate(ctx, req.Credentials)
		if errors.Is(err, authn.ErrKeysUnavailable) {
			return Decision{}, fmt.Errorf("authenticate: %w", err)
		}
		if err != nil {
			return e.finish(snap, d, rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, Detail: "authentication failed: " + authn.Reason(err)}), nil
		}
		principal = p
	}
	d.Principal, d.Via = principal.ID, principal.Method
	if req.Op == "" {
		if env == nil {
			return e.finish(snap, d, rules.CheckEnvelope(nil)), nil
		}
		if s := env.GetSender(); s != "" && s != principal.ID {
			return e.finish(snap, d, rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonSenderMismatch,
				Detail: "envelope sender " + strconv.Quote(s) + " is not the authenticated identity " + strconv.Quote(principal.ID)}), nil
		}
		if v := rules.CheckEnvelope(env); !v.OK() {
			return e.finish(snap, d, v), nil
		}
	}

	// Load the session, locked for this decision.
	var out rules.Outcome
	var en *entry
	if req.Op == "" && rules.Ambient(env) {
		out = rules.Step(nil, env, principal.ID, now)
	} else {
		// Only a SessionStart, or a message the upstream can rebuild the
		// state for, takes a slot in the table.
		create := e.rebuilder != nil || req.Op == "" && env.GetMessageType() == rules.TypeSessionStart
		var err error
		en, err = e.table.acquire(ctx, d.SessionID, now, create)
		if errors.Is(err, errTableFull) {
			return e.finish(snap, d, rules.Verdict{Code: rules.CodeResourceExhausted, Reason: rules.ReasonTableFull, Detail: "too many live sessions; retry later"}), nil
		}
		if err != nil {
			return Decision{}, fmt.Errorf("lock session %s: %w", d.SessionID, err)
		}
		if en != nil && en.state == nil && e.rebuilder != nil && (req.Op != "" || env.GetMessageType() != rules.TypeSessionStart) {
			s, err := e.rebuilder.Rebuild(ctx, d.SessionID)
			if err != nil {
				e.table.drop(en)
				en.release()
				return Decision{}, fmt.Errorf("rebuild session %s: %w", d.SessionID, err)
			}
			en.state = s
		}
		var state *rules.Session
		if en != nil {
			state = en.state
		}
		if state != nil {
			if x := state.Expire(now); x != state {
				e.table.settle(en, x, now) // time alone expired it
				state = x
			}
		}
		switch {
		case req.Op != "":
			out = rules.Control(state, req.Op, principal.ID, now)
		case env.GetMessageType() == rules.TypeSessionStart:
			out = rules.Start(state, env, principal.ID, e.lookup(ctx), now)
		default:
			out = rules.Step(state, env, principal.ID, now)
		}
	}
	d.Roles = out.Roles

	// Policy, unless the rules refused before any authority check or the
	// message is a retransmission of one already accepted from this sender
	// (answered by the upstream as a duplicate, as the runtime does before
	// any authorization).
	verdict := out.Verdict
	if !out.Duplicate && (verdict.OK() || verdict.Rank > rules.RankPre) {
		in := policies.Input{
			Protocol:  "macp",
			Principal: policies.Principal{ID: principal.ID, Method: principal.Method, Scopes: scopes(principal)},
			Message:   policies.Message{Type: d.Type, Sender: principal.ID, SessionID: d.SessionID},
			Roles:     out.Roles,
			Facts:     out.Facts,
			Verdict:   verdict,
		}
		if env != nil {
			in.Message.Mode, in.Message.ID = env.GetMode(), env.GetMessageId()
		}
		if en != nil && en.state != nil {
			in.Session = policies.Session{State: en.state.State.String(), Policy: en.state.Policy.ID}
			in.Message.Mode = en.state.Mode
		} else if out.Next != nil {
			in.Session = policies.Session{State: out.Next.State.String(), Policy: out.Next.Policy.ID}
		}
		if out.Facts != nil && out.Next != nil {
			in.Governance = out.Next.Policy
		}
		denials, err := snap.engine.Evaluate(ctx, &in)
		if err != nil {
			if en != nil {
				e.table.drop(en)
				en.release()
			}
			return Decision{}, err
		}
		// The lowest rank wins; at equal rank the rules' verdict comes first.
		if len(denials) > 0 && (verdict.OK() || denials[0].Rank < verdict.Rank) {
			verdict = rules.Verdict{Code: denials[0].Code, Reason: denials[0].Reason, Detail: denials[0].Message, Rank: denials[0].Rank}
		}
	}

	d.Duplicate = out.Duplicate
	d = e.finish(snap, d, verdict)
	if en == nil {
		return d, nil
	}
	if d.Allow && !d.DryRun && out.Next != nil {
		d.pending = &pending{t: e.table, e: en, next: out.Next, now: now}
		return d, nil
	}
	// Nothing to commit: free the session now.
	e.table.drop(en)
	en.release()
	return d, nil
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

// lookup resolves a policy_version: registered, or fetched from the source.
func (e *Enforcer) lookup(ctx context.Context) rules.PolicyLookup {
	return func(id string) (rules.PolicyDescriptor, bool) {
		if d, ok := e.registry.Lookup(id); ok || e.source == nil {
			return d, ok
		}
		d, ok, err := e.source.Policy(ctx, id)
		if err != nil {
			e.log.Warn("could not fetch a policy from the upstream", "policy_id", id, "err", err)
			return d, false
		}
		if ok {
			_ = e.registry.Register(d) // a concurrent fetch may have registered it
		}
		return d, ok
	}
}

// finish fills the decision from a verdict, applies dry-run and logs a refusal.
func (e *Enforcer) finish(snap *snapshot, d Decision, v rules.Verdict) Decision {
	d.Allow = v.OK()
	d.Code, d.Reason, d.Message = v.Code, v.Reason, v.Detail
	if d.Allow {
		if d.Reason == "" {
			d.Reason = rules.ReasonAllowed
		}
		return d
	}
	e.log.Info("refused",
		"decision_id", d.ID, "principal", d.Principal, "session_id", d.SessionID, "mode", d.Mode,
		"message_type", d.Type, "code", string(d.Code), "reason", string(d.Reason), "detail", d.Message, "dry_run", snap.cfg.DryRun)
	if snap.cfg.DryRun {
		d.Allow, d.DryRun = true, true
	}
	return d
}

// scopes returns the credential's MACP scopes: a JWT's macp_scopes claim, or
// a static token's attributes.
func scopes(p authn.Principal) map[string]any {
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
