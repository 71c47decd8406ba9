package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy/owners"
	"github.com/agentwarden/warden/rules"
	"google.golang.org/protobuf/proto"
)

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
	// AuthReason is why authentication failed (authn.Cause), for the
	// operator's logs, decision records and metrics; never sent to the
	// client. "" unless the refusal is an authentication failure.
	AuthReason string
	// IDReason is why an id the request named is not the caller's
	// (handle.Cause: foreign, raw_id, malformed, retired_key), for the
	// operator only: the client is told the id is unknown. "" otherwise.
	IDReason string
	// Source is whom the request came from and what it asked (client
	// address, request id, HTTP method, path), from the context the
	// decision was made on (WithSource).
	Source Source
	// Recorded is what the decision was made on, set only when
	// Options.RecordInputs asks for it (a decision log that records inputs,
	// for `warden what-if`); nil otherwise.
	Recorded *Recorded

	pending Pending
	// owners is the table an MCP or A2A decision's answer is learned into
	// (Learn), and canon reads the statuses the answer reports as the
	// decision's protocol spells them (Learning).
	owners *owners.Table
	canon  Canon
}

// Recorded is what a decision was made on: for MACP the message and the
// principal's scopes, enough to decide it again through the Enforcer; for
// MCP and A2A the policy input, enough to evaluate the policies again.
type Recorded struct {
	// Envelope is the MACP message (nil for a control operation, which
	// Type names).
	Envelope proto.Message
	// Claims are what of the principal's claims the policies read: a static
	// token's attributes, or {"macp_scopes": ...} of a JWT.
	Claims map[string]any
	Policy *policies.Input // MCP and A2A, when the policies were asked
}

// Pending is what a decision holds until the upstream answers (Hold):
// Settle runs once, with whether the upstream accepted the message. Each
// decider's kinds are small structs with methods rather than closures, so
// that a decision allocates one value (a MACP session locked until it
// commits, a record-only MACP message in flight, an MCP steer's queue
// place).
//
// Forget ends it with the upstream's answer unknown (lost, or showing that
// Warden's state no longer follows the upstream): nothing is committed and,
// when the session can be rebuilt, its state is marked stale before the
// session is given back, so that no message waiting for it is decided on the
// old state. Both are safe to call more than once; only the first counts.
type Pending interface {
	Settle(accepted bool)
	Forget()
}

// Hold makes d hold p until it settles (Settle, Unknown).
func (d *Decision) Hold(p Pending) { d.pending = p }

// Settle ends the decision: when accepted is true (the upstream acknowledged
// the message) the pending state is committed; otherwise nothing changes.
// It releases the session for the next message and is safe to call on a denial.
func (d Decision) Settle(accepted bool) {
	if d.pending != nil {
		d.pending.Settle(accepted)
	}
}

// Unknown ends decision d with the upstream's answer unknown (Pending's
// Forget) and reports whether d held anything to end.
func (d Decision) Unknown() bool {
	if d.pending == nil {
		return false
	}
	d.pending.Forget()
	return true
}

// Start starts a decision of protocol with a fresh id, on the request ctx
// carries the source of. A protocol's decider starts every decision here
// and fills it with Finish, so that the id, dry run and the refusal's log
// line are the core's; it runs the decision in Observed.
func (e *Enforcer) Start(ctx context.Context, protocol string) Decision {
	return Decision{ID: e.nextID(), Protocol: protocol, Source: SourceOf(ctx)}
}

// nextID is a fresh decision id, the only place one is minted: 128 random
// bits (26 base32 characters; see ids). Clients see it (refusals name it),
// so it must tell them nothing: no sequence to count other principals'
// requests by (a counter given even on 401s did), no replica or start time
// to tell processes apart.
func (e *Enforcer) nextID() string { return e.ids.mint() }

// RefuseAuth is Deny for a credential authn refused (err): the generic
// unauthenticated verdict, with the cause for the operator in AuthReason.
// In dry run the request is forwarded as the anonymous principal.
func (e *Enforcer) RefuseAuth(ctx context.Context, protocol, typ string, err error) Decision {
	d := e.refuse(ctx, protocol, "", typ, Unauthenticated(err), string(authn.CauseOf(err)), true)
	if d.DryRun {
		// forwarded: in dry run the connection is not closed for it either
		authn.Proven(ctx)
	}
	return d
}

// Deny records a refusal made at an adapter's front door, before there is
// a message to decide (Origin, a routing or content header, a method
// outside the allow-list), of a request Warden could forward whole: in dry
// run it is allowed (Allow and DryRun set), logged and counted as
// dry_run_deny, as finish does for a decided message.
func (e *Enforcer) Deny(ctx context.Context, protocol, principal, typ string, v rules.Verdict) Decision {
	return e.refuse(ctx, protocol, principal, typ, v, "", true)
}

// Withheld records what an answer would not have handed to the caller in
// dry run (a message about another's task or id, an answer to no request
// of the caller's), which dry run passes: logged, counted and recorded with
// dry_run like every refusal dry run forwards (Deny), for MCP and A2A
// alike.
func (e *Enforcer) Withheld(ctx context.Context, protocol, principal, typ, detail string) Decision {
	return e.Deny(ctx, protocol, principal, typ, rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonNotOwner, Detail: detail})
}

// Refuse records a refusal made at an adapter's front door that dry run
// cannot turn into a forward: a path or HTTP method Warden does not serve,
// a body it could not read whole or over the bound, a message that does
// not parse (nothing Warden could forward as the client sent it and decide
// on). Logged and observed like every decision (metrics, decision log),
// with an ID for the client.
func (e *Enforcer) Refuse(ctx context.Context, protocol, principal, typ string, v rules.Verdict) Decision {
	return e.refuse(ctx, protocol, principal, typ, v, "", false)
}

func (e *Enforcer) refuse(ctx context.Context, protocol, principal, typ string, v rules.Verdict, authReason string, forwardable bool) Decision {
	began := time.Now()
	d := e.Start(ctx, protocol)
	d.Principal, d.Type, d.AuthReason = principal, typ, authReason
	d.Code, d.Reason, d.Message = v.Code, v.Reason, v.Detail
	dry := forwardable && e.snap.Load().cfg.DryRun
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "refused", slog.String("decision_id", d.ID), slog.String("protocol", protocol),
		slog.String("principal", principal), slog.String("message_type", typ), slog.String("code", string(d.Code)),
		slog.String("reason", string(d.Reason)), authReasonAttr(d.AuthReason), slog.String("detail", d.Message), d.Source.Attr(), slog.Bool("front_door", true),
		slog.Bool("dry_run", dry))
	d = dryRun(d, dry)
	e.decided(ctx, d, nil, time.Since(began))
	return d
}

// decided tells the observer of decision d, made on ctx in took, and the
// request's flight (Begin) that d was made on it; err is the error of a
// decision that could not be made (the flight fails, nothing is observed).
// The one place every decision is observed.
func (e *Enforcer) decided(ctx context.Context, d Decision, err error, took time.Duration) {
	f := FlightOf(ctx)
	if err != nil {
		f.Fail()
		return
	}
	if f != nil {
		f.decided(d)
	}
	if e.observer != nil {
		e.observer.Decided(d, took)
	}
}

// dryRun is a refused decision d as dry run leaves it: allowed, marked
// DryRun, when dry is set. The one place dry run turns a refusal into a
// forward, for decided messages (finish) and front doors (refuse) alike.
func dryRun(d Decision, dry bool) Decision {
	if dry && !d.Allow {
		d.Allow, d.DryRun = true, true
	}
	return d
}

// Admitted records a call admitted at an adapter's front door with nothing
// more to decide (a MACP discovery call): an allowed decision, observed
// (metrics; the decision log, sampled as every allowed one) and not logged.
func (e *Enforcer) Admitted(ctx context.Context, protocol, principal, typ string) Decision {
	began := time.Now()
	d := e.Start(ctx, protocol)
	d.Allow, d.Principal, d.Type, d.Reason = true, principal, typ, rules.ReasonAllowed
	e.decided(ctx, d, nil, time.Since(began))
	return d
}

// Finish fills the decision from a verdict, applies dry run as snap says
// (the snapshot the decision was made on) and logs a refusal.
func (e *Enforcer) Finish(snap *Snapshot, d Decision, v rules.Verdict) Decision {
	d.Allow = v.OK()
	d.Code, d.Reason, d.Message = v.Code, v.Reason, v.Detail
	if d.Allow {
		if d.Reason == "" {
			d.Reason = rules.ReasonAllowed
		}
		return d
	}
	if !e.log.Enabled(context.Background(), slog.LevelInfo) {
		// the fields are not built for a line nobody keeps
		return dryRun(d, snap.cfg.DryRun)
	}
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "refused",
		slog.String("decision_id", d.ID), slog.String("principal", d.Principal), slog.String("session_id", d.SessionID), slog.String("mode", d.Mode),
		slog.String("message_type", d.Type), slog.String("code", string(d.Code)), slog.String("reason", string(d.Reason)), authReasonAttr(d.AuthReason),
		optional("id_reason", d.IDReason), slog.String("detail", d.Message), d.Source.Attr(), slog.Bool("dry_run", snap.cfg.DryRun))
	return dryRun(d, snap.cfg.DryRun)
}

// authReasonAttr is the auth_reason log field; empty (and so dropped by
// slog) when the refusal is not an authentication failure.
func authReasonAttr(r string) slog.Attr { return optional("auth_reason", r) }

// Unauthenticated is the verdict of a credential authn refused (err): the
// generic unauthenticated refusal, its reason authn's.
func Unauthenticated(err error) rules.Verdict {
	return rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonUnauthenticated, Detail: "authentication failed: " + authn.Reason(err)}
}
