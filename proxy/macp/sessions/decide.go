package sessions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/policies"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// enforce decides one MACP message in DESIGN.md §4's steps: snapshot,
// authentication and sender binding, the session (locked, rebuilt when
// unknown), the rules, the policy, and the decision with what it holds until
// the upstream answers.
func (x *Decider) enforce(ctx context.Context, req Request) (proxy.Decision, error) {
	snap := x.e.Snapshot()
	now := x.e.Now().UnixMilli()
	d := x.e.Start(ctx, "macp")
	if req.Source != (proxy.Source{}) {
		d.Source = req.Source
	}
	d.Type, d.Mode, d.SessionID = req.describe()

	principal, v, err := x.authenticate(ctx, snap, req, &d)
	if err != nil {
		return proxy.Decision{}, err
	}
	d.Principal, d.Via = principal.ID, principal.Method
	if x.e.RecordsInputs() {
		d.Recorded = &proxy.Recorded{Claims: recordedClaims(principal)}
		if req.Envelope != nil { // a nil envelope is no message, not a typed nil
			d.Recorded.Envelope = req.Envelope
		}
	}
	window := x.window(req)
	if v.OK() {
		v = window.full(principal.ID, x.e.Now())
	}
	if !v.OK() {
		return x.e.Finish(snap, d, v), nil
	}
	var lost contention
	for {
		en, out, base, err := x.applyRules(ctx, req, d.ID, principal.ID, now)
		if err != nil {
			return proxy.Decision{}, err
		}
		d.Roles, d.Duplicate = out.Roles, out.Duplicate
		verdict, err := x.applyPolicy(ctx, snap, req, principal, en, out, now)
		if err != nil {
			x.release(en)
			return proxy.Decision{}, err
		}
		ok, err := x.share(ctx, d.ID, verdict.OK() && out.Next != nil, en, out, now, &lost)
		switch {
		case err != nil:
			x.release(en)
			return proxy.Decision{}, fmt.Errorf("share session %s: %w", d.SessionID, err)
		case !ok:
			x.release(en) // another replica changed the session: decide on its state
			if err := lost.lost(ctx, contentionBudget); err != nil {
				return proxy.Decision{}, fmt.Errorf("commit session %s: %w", d.SessionID, err)
			}
			continue
		}
		dec := x.hold(x.e.Finish(snap, d, verdict), en, req, principal.ID, out, base, now)
		if dec.Allow {
			window.add(principal.ID, x.e.Now())
		}
		return dec, nil
	}
}

// window is the runtime's rate window req counts in: the SessionStarts',
// every other message's; none for an operation that is no message, nor for
// a door that sees the runtime's answer (not Blind): there the runtime's
// own RATE_LIMITED is answered and nothing it refuses is committed, so a
// mirror would only add false denies where the runtime's limits are raised.
func (x *Decider) window(req Request) *rateWindow {
	switch {
	case !req.Blind || req.Op != "" || req.Envelope == nil:
		return nil
	case req.Envelope.GetMessageType() == "SessionStart":
		return x.starts
	}
	return x.messages
}

// describe returns the type, mode and session a request names.
func (r Request) describe() (typ, mode, session string) {
	if r.Op != "" {
		return r.Op, "", r.SessionID
	}
	return r.Envelope.GetMessageType(), r.Envelope.GetMode(), r.Envelope.GetSessionId()
}

// authenticate is step 2: the principal, and a refusal when the credential
// fails (its cause in d.AuthReason) or the envelope claims another sender. An error means the keys to
// decide with are unavailable.
func (x *Decider) authenticate(ctx context.Context, snap *proxy.Snapshot, req Request, d *proxy.Decision) (authn.Principal, rules.Verdict, error) {
	if req.AuthError != nil {
		d.AuthReason = string(authn.CauseOf(req.AuthError))
		return authn.Principal{}, proxy.Unauthenticated(req.AuthError), nil
	}
	principal := authn.Principal{}
	if req.Principal != nil {
		principal = *req.Principal
	} else {
		p, err := snap.Authenticator().Authenticate(ctx, req.Credentials)
		if errors.Is(err, authn.ErrKeysUnavailable) {
			return p, rules.Verdict{}, fmt.Errorf("authenticate: %w", err)
		}
		if err != nil {
			d.AuthReason = string(authn.CauseOf(err))
			return p, proxy.Unauthenticated(err), nil
		}
		principal = p
	}
	if req.Op != "" {
		return principal, rules.Verdict{}, nil
	}
	env := req.Envelope
	if env == nil {
		return principal, macp.CheckEnvelope(nil), nil
	}
	if s := env.GetSender(); s != "" && s != principal.ID {
		return principal, rules.Verdict{Code: rules.CodeUnauthenticated, Reason: rules.ReasonSenderMismatch,
			Detail: "envelope sender " + strconv.Quote(s) + " is not the authenticated identity " + strconv.Quote(principal.ID)}, nil
	}
	if v := macp.CheckEnvelope(env); !v.OK() {
		return principal, v, nil
	}
	return principal, x.payloadBound(env), nil
}

// payloadBound refuses an envelope whose payload is over the runtime's bound
// (Config.MACPMaxPayloadBytes), as the runtime refuses it, last of the
// envelope's shape checks: the runtime never takes it, so allowed it would
// be committed where state is committed on allow (ext_authz).
func (x *Decider) payloadBound(env *macpv1.Envelope) rules.Verdict {
	if n := len(env.GetPayload()); x.maxPayload > 0 && n > x.maxPayload {
		return rules.Verdict{Code: rules.CodePayloadTooLarge, Reason: rules.ReasonPayloadTooLarge, Rank: rules.RankPre,
			Detail: fmt.Sprintf("payload of %d bytes exceeds the runtime's limit of %d (macp_max_payload_bytes)", n, x.maxPayload)}
	}
	return rules.Verdict{}
}

// applyRules is steps 3 and 4: the session's entry, locked (nil for an
// ambient message or an unknown session that takes no slot), rebuilt from
// the upstream or the shared store when the table does not hold it, the
// rules' outcome, and the committed state it was decided on.
func (x *Decider) applyRules(ctx context.Context, req Request, decision, sender string, now int64) (*entry, macp.Outcome, *macp.Session, error) {
	env := req.Envelope
	if req.Op == "" && macp.Ambient(env) {
		return nil, macp.Step(nil, env, sender, now), nil, nil
	}
	_, _, sessionID := req.describe()
	start := req.Op == "" && env.GetMessageType() == macp.TypeSessionStart
	// Only a SessionStart, or a message the upstream or the shared store
	// can give the state for, takes a slot in the table.
	en, err := x.table.acquire(ctx, sessionID, now, x.rebuilder != nil || x.store != nil || start)
	if errors.Is(err, errTableFull) {
		return nil, macp.Outcome{Verdict: rules.Verdict{Code: rules.CodeResourceExhausted, Reason: rules.ReasonTableFull, Detail: "too many live sessions; retry later"}}, nil, nil
	}
	if err != nil {
		return nil, macp.Outcome{}, nil, fmt.Errorf("lock session %s: %w", sessionID, err)
	}
	if err := x.load(ctx, en, decision, now); err != nil {
		x.release(en)
		return nil, macp.Outcome{}, nil, fmt.Errorf("shared state of session %s: %w", sessionID, err)
	}
	for {
		out, used, err := x.decideOn(ctx, req, en, sender, start, now)
		if err != nil {
			x.release(en)
			return nil, macp.Outcome{}, nil, err
		}
		// A state-changing message is decided on the state every flight of
		// its session has landed on, and commits over that very state: the
		// lock held, no new flight starts.
		if en == nil || x.depth <= 1 || out.Next == nil || out.RecordOnly || en.idle() && en.state.Load() == used {
			return en, out, used, nil
		}
		if err := en.wait(ctx, "", 1); err != nil {
			x.release(en)
			return nil, macp.Outcome{}, nil, fmt.Errorf("wait for session %s: %w", sessionID, err)
		}
	}
}

// decideOn applies the rules to the session's committed state, locked in en
// (nil for no entry), rebuilding it from the upstream first when the table
// does not know it, and returns the state it decided on. When pipelining, it
// first waits until the message's id is not in flight and the session has
// room for one more flight.
func (x *Decider) decideOn(ctx context.Context, req Request, en *entry, sender string, start bool, now int64) (macp.Outcome, *macp.Session, error) {
	env := req.Envelope
	_, _, sessionID := req.describe()
	if en != nil && x.depth > 1 {
		if err := en.wait(ctx, env.GetMessageId(), x.depth); err != nil {
			return macp.Outcome{}, nil, fmt.Errorf("wait for session %s: %w", sessionID, err)
		}
	}
	if en != nil && en.state.Load() == nil && x.rebuilder != nil && !start {
		if err := en.wait(ctx, "", 1); err != nil { // a stale entry: its flights land first
			return macp.Outcome{}, nil, fmt.Errorf("wait for session %s: %w", sessionID, err)
		}
		s, err := x.rebuilder.Rebuild(ctx, sessionID, x.table.binding(sessionID, sender))
		x.rebuilt(err == nil)
		if err != nil {
			return macp.Outcome{}, nil, fmt.Errorf("rebuild session %s: %w", sessionID, err)
		}
		en.update(func(*macp.Session) *macp.Session { return s })
	}
	var state *macp.Session
	if en != nil {
		state = en.state.Load()
	}
	if state != nil && state.Expired(now) && !state.State.Terminal() {
		state = x.table.expire(en, now) // time alone expired it
	}
	seen := state // what an outsider is decided on: no session at all
	if state != nil && !start && !state.Member(sender) {
		seen = nil
	}
	switch {
	case req.Op != "":
		return macp.Control(seen, req.Op, sender, now), state, nil
	case start:
		out := macp.Start(state, env, sender, x.lookup(ctx), now)
		if state == nil && out.Next != nil { // a new session, seen by nobody yet
			out.Next.Participants = x.table.names.share(out.Next.Participants)
		}
		if state == nil && out.Next != nil && en != nil && x.rebuilder != nil && !req.Acked {
			return x.startUnknown(ctx, en, env, sender, now, out)
		}
		return out, state, nil
	}
	return macp.Step(seen, env, sender, now), state, nil
}

// startUnknown decides a SessionStart the rules allow on a session the table
// holds no state for (out) when the upstream can be asked: the session may
// exist there all the same (Warden restarted without shared state, the entry
// was evicted or lost from the store, the session was opened past Warden), and
// a start committed on allow (ext_authz), or on an echo of its id
// (StreamSession), would install the sender as its initiator. A
// session the upstream knows is rebuilt when the caller may see it, so a
// retransmitted start is answered as one, and otherwise refused as existing,
// as the runtime answers.
func (x *Decider) startUnknown(ctx context.Context, en *entry, env *macpv1.Envelope, sender string, now int64, out macp.Outcome) (macp.Outcome, *macp.Session, error) {
	sessionID := env.GetSessionId()
	exists, err := x.rebuilder.Exists(ctx, sessionID)
	if err != nil {
		return macp.Outcome{}, nil, fmt.Errorf("look up session %s: %w", sessionID, err)
	}
	if !exists {
		return out, nil, nil
	}
	if err := en.wait(ctx, "", 1); err != nil { // a stale entry: its flights land first
		return macp.Outcome{}, nil, fmt.Errorf("wait for session %s: %w", sessionID, err)
	}
	s, err := x.rebuilder.Rebuild(ctx, sessionID, x.table.binding(sessionID, sender))
	x.rebuilt(err == nil && s != nil)
	if err != nil || s == nil {
		return macp.Outcome{Verdict: rules.Verdict{Code: rules.CodeSessionAlreadyExists, Reason: rules.ReasonSessionExists, Rank: rules.RankPre,
			Detail: "session " + sessionID + " already exists"}}, nil, nil
	}
	en.update(func(*macp.Session) *macp.Session { return s })
	return macp.Start(s, env, sender, x.lookup(ctx), now), s, nil
}

// applyPolicy is step 5: the policy on {principal, message, session, roles,
// facts, the rules' verdict, the payload as the rules read it, the decision
// time}, unless the rules refused before any authority
// check. A retransmission of a message already accepted from this sender
// (answered by the upstream as a duplicate) meets the policy too: the
// default one does not ask it for the roles it had, the credential's scopes
// and the operator's rules decide it as any message. The lowest rank wins;
// at equal rank the rules' verdict comes first.
func (x *Decider) applyPolicy(ctx context.Context, snap *proxy.Snapshot, req Request, principal authn.Principal, en *entry, out macp.Outcome, now int64) (rules.Verdict, error) {
	verdict := out.Verdict
	if !verdict.OK() && verdict.Rank <= rules.RankPre {
		return verdict, nil
	}
	typ, mode, sessionID := req.describe()
	in := policies.Input{
		Protocol:  "macp",
		Principal: policies.Principal{ID: principal.ID, Method: principal.Method, Scopes: proxy.Scopes(principal)},
		Message:   policies.Message{Type: typ, Mode: mode, Sender: principal.ID, ID: req.Envelope.GetMessageId(), SessionID: sessionID},
		Roles:     out.Roles,
		Facts:     out.Facts,
		Verdict:   verdict,
		Now:       time.UnixMilli(now),
	}
	if env := req.Envelope; env != nil && req.Op == "" {
		in.MACP = policies.MACP{Present: true, Payload: out.Payload, Size: len(env.GetPayload()), TimestampUnixMs: env.GetTimestampUnixMs()}
	}
	if s := stateOf(en); s != nil {
		in.Session = policies.Session{State: s.State.String(), Policy: s.Policy.ID}
		in.Message.Mode = s.Mode
	} else if out.Next != nil {
		in.Session = policies.Session{State: out.Next.State.String(), Policy: out.Next.Policy.ID}
	}
	if out.Facts != nil && out.Next != nil {
		in.Governance = out.Next.Policy
	}
	denials, err := snap.Engine().Evaluate(ctx, &in)
	if err != nil {
		return verdict, err
	}
	if len(denials) > 0 && (verdict.OK() || denials[0].Rank < verdict.Rank) {
		verdict = denials[0]
	}
	return verdict, nil
}

// stateOf returns en's committed state, nil for no entry.
func stateOf(en *entry) *macp.Session {
	if en == nil {
		return nil
	}
	return en.state.Load()
}

// hold is step 6: an allowed message with a next state keeps its session
// locked until the upstream answers (Settle), unless it is record-only and
// pipelining is on: it then flies and frees the session now, like anything
// else.
func (x *Decider) hold(d proxy.Decision, en *entry, req Request, sender string, out macp.Outcome, base *macp.Session, now int64) proxy.Decision {
	if en == nil {
		return d
	}
	if d.Allow && !d.DryRun && out.Next != nil && out.RecordOnly && x.depth > 1 {
		return x.fly(d, en, req.Envelope, sender, out, base)
	}
	if d.Allow && !d.DryRun && out.Next != nil {
		d.Hold(&held{t: x.table, en: en, next: out.Next, now: now})
		return d
	}
	x.release(en)
	return d
}

// release frees a session entry that holds nothing to commit.
func (x *Decider) release(en *entry) {
	if en != nil {
		x.table.drop(en)
		en.release()
	}
}

// fly forwards a record-only message without holding its session. When the
// upstream accepts it, its next state is committed if no other flight landed
// since the decision (the committed state is still base); otherwise its id is
// recorded on the state committed by then (macp.Session.Record), which only
// other flights can have moved: a state-changing message waits for every
// flight to land. A state that moved otherwise means Warden no longer
// follows the runtime (it accepted what the committed state may refuse): the
// entry is marked stale and rebuilt from the upstream on its next message.
func (x *Decider) fly(d proxy.Decision, en *entry, env *macpv1.Envelope, sender string, out macp.Outcome, base *macp.Session) proxy.Decision {
	en.fly(env.GetMessageId())
	en.release()
	d.Hold(&flying{x: x, en: en, next: out.Next, env: env, sender: sender, base: base})
	return d
}

// flying is a record-only message in flight (see fly): the message, the
// state it was decided on and its next state.
type flying struct {
	done   atomic.Bool
	x      *Decider
	en     *entry
	env    *macpv1.Envelope
	sender string
	base   *macp.Session
	next   *macp.Session
}

// settle lands the flight.
func (f *flying) Settle(accepted bool) {
	if !f.done.CompareAndSwap(false, true) {
		return
	}
	id := f.env.GetMessageId()
	if !accepted {
		f.en.land(id, nil)
		return
	}
	f.en.land(id, func(cur *macp.Session) *macp.Session {
		if cur == f.base {
			return f.next
		}
		if next, ok := cur.Record(f.base, f.env, f.sender); ok {
			return next
		}
		switch {
		case cur == nil:
			return nil // forgotten meanwhile: already stale
		case cur.State == macp.StateExpired:
			return cur // Warden's clock expired it meanwhile: it accepts nothing more
		}
		f.x.e.Logger().Warn("a pipelined message landed on a session that changed since it was decided; the session will be rebuilt",
			"session_id", f.en.id, "message_id", id)
		return nil
	})
}

// forget lands the flight with its answer unknown: the session is marked
// stale (rebuilt on its next message, once every flight landed) when it can
// be rebuilt.
func (f *flying) Forget() {
	if !f.done.CompareAndSwap(false, true) {
		return
	}
	if f.x.rebuilder == nil {
		f.en.land(f.env.GetMessageId(), nil)
		return
	}
	f.en.land(f.env.GetMessageId(), func(*macp.Session) *macp.Session { return nil })
}

// held is a MACP decision holding its session's lock: accepted commits next.
type held struct {
	done atomic.Bool
	t    *table
	en   *entry
	next *macp.Session
	now  int64
}

func (h *held) Settle(accepted bool) {
	if !h.done.CompareAndSwap(false, true) {
		return
	}
	if accepted {
		h.t.settle(h.en, h.next, h.now)
	} else {
		// A shared session's version may already name the refused next
		// state (committed on allow): read it again before trusting it.
		if sh := h.en.stored(); sh != nil {
			sh.version = ""
		}
		h.t.drop(h.en)
	}
	h.en.release()
}

func (h *held) Forget() {
	if !h.t.evictLive { // nothing could rebuild it: keep what is committed
		h.Settle(false)
		return
	}
	if !h.done.CompareAndSwap(false, true) {
		return
	}
	h.en.update(func(*macp.Session) *macp.Session { return nil })
	if sh := h.en.stored(); sh != nil {
		sh.version = ""
	}
	h.t.drop(h.en) // idle: out of the table; with flights: stale
	h.en.release()
}
