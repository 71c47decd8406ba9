package admission

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Blind decides the MACP calls of a door that never sees the runtime's
// answer (Envoy's ext_authz: it sees one request at a time, and a stream's
// later messages not at all). A decision is committed when it allows; what
// that lets a client commit that the runtime may have refused is bounded
// here (the unconfirmed starts of a principal), and a call the door passes
// undecided that changes what Warden holds is noted (Passed).
type Blind struct {
	enf      *proxy.Enforcer
	sessions *sessions.Decider // the MACP decision, on enf
	log      *slog.Logger
	starts   *starts
}

// NewBlind returns the decisions of a blind door: maxStarts bounds the
// sessions one principal may have started through it that have not ended
// (0: DefaultMaxUnconfirmedStarts). It starts no goroutines.
func NewBlind(dec *sessions.Decider, maxStarts int, log *slog.Logger) *Blind {
	if maxStarts == 0 {
		maxStarts = DefaultMaxUnconfirmedStarts
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Blind{enf: dec.Enforcer(), sessions: dec, log: log, starts: newStarts(maxStarts)}
}

// Decide decides r, a Send or a control call the gate admitted (Request),
// and commits it on allow: it returns the decision's id, or the refusal.
func (b *Blind) Decide(ctx context.Context, call Call, r sessions.Request) (string, *Refusal) {
	if call == CallSend {
		return b.send(ctx, r)
	}
	id, refused := b.decide(ctx, r)
	if refused == nil && !b.sessions.SharesSessions() {
		b.starts.decided(r.SessionID, time.Now().UnixMilli(), b.sessions.Ended)
	}
	return id, refused
}

// Passed notes a call the door lets through undecided; body reads its one
// message, only for a call that needs it. A RegisterPolicy or
// UnregisterPolicy drops the copy of the policy held (whether the runtime
// accepts it is not seen), so that the next SessionStart binding the id
// reads the runtime's; one whose body cannot be read drops nothing.
func (b *Blind) Passed(call Call, body func() ([]byte, error)) {
	if call != CallRegisterPolicy && call != CallUnregisterPolicy {
		return
	}
	if msg, err := body(); err == nil {
		b.sessions.Policies().Remove(policyID(call, msg))
	}
}

// policyID is the policy a RegisterPolicy or UnregisterPolicy request names
// ("" when it does not decode).
func policyID(call Call, body []byte) string {
	if call == CallRegisterPolicy {
		var r macpv1.RegisterPolicyRequest
		_ = proto.Unmarshal(body, &r)
		return r.GetPolicyDescriptor().GetPolicyId()
	}
	var r macpv1.UnregisterPolicyRequest
	_ = proto.Unmarshal(body, &r)
	return r.GetPolicyId()
}

// decide runs the Enforcer and commits on allow: the runtime's reply is
// invisible here.
func (b *Blind) decide(ctx context.Context, r sessions.Request) (string, *Refusal) {
	r.Blind = true
	d, err := b.sessions.Enforce(ctx, r)
	if err != nil {
		// Could not decide: refuse, retryable; the detail goes to the log.
		b.log.Warn("could not decide a MACP request; refusing it", "err", err, r.Source.Attr())
		undecided := Undecided
		return "", &undecided
	}
	d.Settle(d.Allow)
	if !d.Allow {
		refused := Refused(d, r)
		return "", &refused
	}
	return d.ID, nil
}

// send decides a Send, within the principal's started sessions (see
// starts): a SessionStart allowed is counted until its session ends, seen
// when a later message allowed on it ends it, or when its principal, at its
// cap, has its sessions looked up. Replicas sharing the sessions in a store
// do not count: the table is only the store's cache, and a session's later
// messages go to other replicas.
func (b *Blind) send(ctx context.Context, r sessions.Request) (string, *Refusal) {
	if b.sessions.SharesSessions() {
		return b.decide(ctx, r)
	}
	env, p := r.Envelope, r.Principal
	now := time.Now().UnixMilli()
	start := env.GetMessageType() == macp.TypeSessionStart
	if start && !b.enf.DryRun() && b.starts.full(p.ID, now, b.sessions.Ended) {
		d := b.enf.Refuse(ctx, "macp", p.ID, macp.TypeSessionStart, rules.Verdict{Code: rules.CodeResourceExhausted, Reason: rules.ReasonTableFull,
			Detail: "too many sessions started that have not ended yet; end some first, or retry later"})
		refused := Refused(d, r)
		return "", &refused
	}
	id, refused := b.decide(ctx, r)
	if refused != nil {
		return "", refused
	}
	if start {
		var sp macpv1.SessionStartPayload
		_ = proto.Unmarshal(env.GetPayload(), &sp) // the rules decoded it already
		b.starts.started(p.ID, env.GetSessionId(), deadline(now, sp.GetTtlMs()))
	} else {
		b.starts.decided(env.GetSessionId(), now, b.sessions.Ended)
	}
	return id, nil
}
