// Package sessions is MACP's decision, shared by the MACP sidecar's doors
// (grpc-go and the frame relay, proxy/macp) and by ext_authz through MACP's
// admission (proxy/macp/admission): authentication and sender binding, the
// session (in the bounded session table, rebuilt from the runtime or loaded
// from the store replicas share when unknown), the rules, the policy, and
// what a decision holds until the upstream answers. It decides on the
// core's Enforcer (proxy), which mints the decision, applies dry run and
// observes it. The registry of governance policies sessions bind at start
// lives here too.
package sessions

import (
	"context"
	"fmt"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

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

// Options are the MACP decider's dependencies beyond the core Enforcer.
type Options struct {
	// Rebuilder is nil when no upstream can be asked (offline replay); a
	// session the table does not hold is then unknown.
	Rebuilder Rebuilder
	// PolicySource fetches unknown policy_versions at SessionStart; nil
	// means only registered policies bind.
	PolicySource PolicySource
	// Store is the MACP session state shared with other ext_authz
	// replicas; nil means this replica's own table only.
	Store Store
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
	Source proxy.Source
	// Acked is set when the upstream's own answer decides the commit (the
	// sidecar's unary Send: an Ack ok and not a duplicate): a SessionStart
	// for a session the table does not hold then needs no look-up, as the
	// runtime refuses one it holds.
	Acked bool
	// Blind is set by a door that commits what it allows, never seeing the
	// runtime's answer (ext_authz, admission.Blind): only there are the
	// runtime's per-sender rate limits mirrored (Config.MACPMessageLimitPerMinute),
	// as a message the runtime refuses for its rate would be committed.
	Blind bool
}

// Decider decides MACP messages on the core's Enforcer. It is safe for
// concurrent use; messages of one session are decided one at a time,
// different sessions never wait for each other. A state-changing message
// holds its session until the upstream answers; up to the Enforcer's
// Config.PipelineDepth record-only ones may be in flight.
type Decider struct {
	e            *proxy.Enforcer
	table        *table
	store        Store
	perInitiator int          // each initiator's share of the policy bindings and of the store's sessions
	decoder      macp.Decoder // of shared sessions
	registry     *PolicyRegistry
	rebuilder    Rebuilder
	source       PolicySource
	depth        int         // Config.PipelineDepth; <= 1 is serial
	maxPayload   int         // Config.MACPMaxPayloadBytes; 0: none
	messages     *rateWindow // Config.MACPMessageLimitPerMinute
	starts       *rateWindow // Config.MACPSessionStartLimitPerMinute
}

// New builds the MACP decider on e: a session table of e's Config.Sessions
// entries, each initiator holding at most its SessionsPerPrincipal of the
// policy bindings, and of the sessions in the shared store. It starts no
// goroutines.
func New(e *proxy.Enforcer, opts Options) (*Decider, error) {
	cfg := e.Config()
	sessions, share := cfg.OwnerTable() // each initiator's share of the policy bindings
	// A live session may leave the table when it can be had again: rebuilt
	// from the runtime, or loaded from the shared store (the table is then
	// its cache). Otherwise a full table refuses new sessions.
	t, err := newTable(sessions, share, opts.Rebuilder != nil || opts.Store != nil, e.ShareWatch())
	if err != nil {
		return nil, fmt.Errorf("session table: %w", err)
	}
	x := &Decider{e: e, table: t, store: opts.Store, perInitiator: share, registry: NewPolicyRegistry(), rebuilder: opts.Rebuilder, source: opts.PolicySource, depth: cfg.PipelineDepth, maxPayload: cfg.MACPMaxPayloadBytes,
		messages: newRateWindow(cfg.MACPMessageLimitPerMinute, "macp_message_limit_per_minute"), starts: newRateWindow(cfg.MACPSessionStartLimitPerMinute, "macp_session_start_limit_per_minute")}
	if x.store != nil {
		// Shared sessions commit on allow, before the answer (ext_authz):
		// nothing is in flight, so nothing is pipelined.
		x.depth = 1
	}
	return x, nil
}

// Enforcer is the core Enforcer the decider decides on.
func (x *Decider) Enforcer() *proxy.Enforcer { return x.e }

// Enforce decides one message, following DESIGN.md §4: snapshot,
// authentication and sender binding, session state, rules, policy. An error
// means Warden could not decide; the adapter must refuse the message.
func (x *Decider) Enforce(ctx context.Context, req Request) (proxy.Decision, error) {
	return proxy.Observed(x.e, ctx, x, req, (*Decider).enforce)
}

// Policies is the registry of governance policies sessions bind at start.
func (x *Decider) Policies() *PolicyRegistry { return x.registry }

// SharesSessions reports whether MACP session state lives in a store shared
// by replicas, the table being its cache.
func (x *Decider) SharesSessions() bool { return x.store != nil }

// Sessions returns the number of sessions the table holds.
func (x *Decider) Sessions() int { return x.table.len() }

// Session returns the committed state of a session, or nil. For replay and
// tests; the returned state must not be modified.
func (x *Decider) Session(ctx context.Context, id string) (*macp.Session, error) {
	en, err := x.table.acquire(ctx, id, x.e.Now().UnixMilli(), false)
	if err != nil || en == nil {
		return nil, err
	}
	defer en.release()
	return en.state.Load(), nil
}

// Forget drops a session from the table, so that its next message rebuilds
// the state from the upstream: for when the upstream's answer shows that
// Warden's state no longer follows it (the upstream does not know the
// session, applied a retransmission as new, or its answer was lost). Without
// a rebuilder nothing is forgotten, as nothing could be rebuilt.
func (x *Decider) Forget(ctx context.Context, sessionID string) {
	if x.rebuilder == nil || sessionID == "" {
		return
	}
	x.table.forget(ctx, sessionID)
}

// SettleForget ends decision d when the upstream's answer is unknown (it was
// lost: the call failed, the stream ended, the echo never came) or shows
// that Warden's state no longer follows the upstream (it does not know the
// session, it applied a retransmission as new): nothing is committed and the
// session is forgotten, so that its next message rebuilds it from the
// upstream. A session d holds is marked stale before it is given back: a
// message already waiting for it is decided on the upstream's state, never on
// the old one (Settle then Forget left a gap between the two). Without a
// rebuilder nothing is forgotten, as nothing could be rebuilt.
func (x *Decider) SettleForget(ctx context.Context, d proxy.Decision) {
	if d.Unknown() {
		return
	}
	x.Forget(ctx, d.SessionID)
}

// Ended reports whether the table holds session id (held) and, if so,
// whether the session has ended there (terminal, or expired at now, Unix
// ms). For the ext_authz adapter, which commits on allow and counts the
// sessions each principal started until they end.
func (x *Decider) Ended(id string, now int64) (ended, held bool) {
	return x.table.ended(id, now)
}

// rebuilt tells the observer of a session rebuild (proxy.EventObserver).
func (x *Decider) rebuilt(ok bool) {
	if o, is := x.e.Observer().(proxy.EventObserver); is {
		o.Rebuilt(ok)
	}
}

// lookup resolves a policy_version: registered, or fetched from the source
// (again once the copy fetched is fetchedFor old).
func (x *Decider) lookup(ctx context.Context) macp.PolicyLookup {
	return func(id string) (macp.PolicyDescriptor, bool) {
		if x.source == nil {
			return x.registry.Lookup(id)
		}
		now := x.e.Now()
		if d, ok := x.registry.current(id, now); ok {
			return d, ok
		}
		d, ok, err := x.source.Policy(ctx, id)
		if err != nil {
			x.e.Logger().Warn("could not fetch a policy from the upstream", "policy_id", id, "err", err)
			return d, false
		}
		if ok {
			_ = x.registry.fetched(d, now) // a concurrent fetch may have recorded it
		} else {
			x.registry.Remove(id) // unregistered upstream
		}
		return d, ok
	}
}

// recordedClaims is what of p's claims the policies read (scopes), in a
// shape scopes reads back.
func recordedClaims(p authn.Principal) map[string]any {
	s := proxy.Scopes(p)
	if s == nil || p.Method == "static" {
		return s
	}
	return map[string]any{"macp_scopes": s}
}
