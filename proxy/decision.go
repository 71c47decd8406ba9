package proxy

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
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

	pending *pending
}

// pending is what a decision holds until the upstream answers, settled once
// with whether the upstream accepted the message: a held MACP decision
// commits the session's next state and releases its lock, a flying one lands
// (see Enforcer.fly), an MCP steer gives its queue place back when refused.
// It is one value rather than a closure so that a decision allocates it
// once.
type pending struct {
	once sync.Once
	kind pendingKind
	e    *Enforcer
	en   *entry
	next *rules.Session // held and flying: the state to commit
	now  int64
	// flying: the message, the state it was decided on and its roles.
	env    *macpv1.Envelope
	sender string
	base   *rules.Session
	roles  []string
	// steer: what gives the queue place back.
	undo func()
}

// pendingKind is what a pending decision holds.
type pendingKind uint8

const (
	pendingHeld   pendingKind = iota + 1 // a MACP session, locked
	pendingFlying                        // a record-only MACP message in flight
	pendingSteer                         // an MCP steer's queue place
)

// settle runs once per pending decision.
func (p *pending) settle(accepted bool) {
	switch p.kind {
	case pendingHeld:
		if accepted {
			p.e.table.settle(p.en, p.next, p.now)
		} else {
			p.e.table.drop(p.en)
		}
		p.en.release()
	case pendingFlying:
		p.e.land(p, accepted)
	case pendingSteer:
		if !accepted {
			p.undo() // the upstream refused the steer: its place is free again
		}
	}
}

// Settle ends the decision: when accepted is true (the upstream acknowledged
// the message) the pending state is committed; otherwise nothing changes.
// It releases the session for the next message and is safe to call on a denial.
func (d Decision) Settle(accepted bool) {
	if p := d.pending; p != nil {
		p.once.Do(func() { p.settle(accepted) })
	}
}

// newDecision starts a decision with a fresh id.
func (e *Enforcer) newDecision(protocol string) Decision {
	return Decision{ID: e.nextID(), Protocol: protocol}
}

// nextID is a fresh decision id: the Enforcer's random prefix and the next
// sequence number, built in one allocation.
func (e *Enforcer) nextID() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], e.idPrefix...), e.seq.Add(1), 36))
}

// Refuse records a refusal made at an adapter's front door, before there
// is a message to decide (authentication, Origin, malformed input, a method
// outside the allow-list): logged and observed like every decision (metrics,
// decision log), with an ID for the client. Dry run does not apply: there is
// nothing Warden could forward.
func (e *Enforcer) Refuse(protocol, principal, typ string, v rules.Verdict) Decision {
	began := time.Now()
	d := e.newDecision(protocol)
	d.Principal, d.Type = principal, typ
	d.Code, d.Reason, d.Message = v.Code, v.Reason, v.Detail
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "refused", slog.String("decision_id", d.ID), slog.String("protocol", protocol),
		slog.String("principal", principal), slog.String("message_type", typ), slog.String("code", string(d.Code)),
		slog.String("reason", string(d.Reason)), slog.String("detail", d.Message), slog.Bool("front_door", true))
	if e.observer != nil {
		e.observer.Decided(d, time.Since(began))
	}
	return d
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
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "refused",
		slog.String("decision_id", d.ID), slog.String("principal", d.Principal), slog.String("session_id", d.SessionID), slog.String("mode", d.Mode),
		slog.String("message_type", d.Type), slog.String("code", string(d.Code)), slog.String("reason", string(d.Reason)), slog.String("detail", d.Message),
		slog.Bool("dry_run", snap.cfg.DryRun))
	if snap.cfg.DryRun {
		d.Allow, d.DryRun = true, true
	}
	return d
}
