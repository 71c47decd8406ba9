package macp

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/proxy/macp/sessions"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// echoTimeout bounds how long an allowed StreamSession envelope holds its
// session waiting for the runtime to echo it; past it the decision is
// released and the session rebuilt from the runtime on its next message.
const echoTimeout = 10 * time.Second

// sessionStream is one StreamSession call. Its up half enforces every
// envelope the client sends; its down half relays what the runtime sends and
// commits an envelope's decision when the runtime echoes it back. A Progress,
// which the runtime relays to signal watchers instead of echoing, is settled
// when forwarded, so that it never holds its session. Settling never waits on
// the client: what goes to the client is queued (clientWriter), and a client
// that does not read has its stream ended.
type sessionStream struct {
	s      *Server
	p      authn.Principal
	ss     serverStream      // the client's
	cs     grpc.ClientStream // the runtime's
	ctx    context.Context
	cancel context.CancelCauseFunc
	out    *clientWriter

	mu        sync.Mutex // guards pending, echoes and echoTimer; never held across I/O
	pending   map[string]awaited
	echoes    echoQueue   // pending's ids in the order sent, until echoTimeout
	echoTimer *time.Timer // runs at echoes' oldest (expireEchoes); made once
}

// awaited is an allowed envelope waiting for the runtime's answer: its
// decision, its message id (its key in pending) and the envelope. Message
// ids are the client's and unique only within a session, and the runtime's
// answers on a stream come from the session it is bound to (a history
// replayed by a subscription, what other senders send to it), so an answer
// names the envelope it settles by both. An envelope the runtime publishes
// is the echo only when it is the envelope (its type and payload): the
// runtime writes entries of its own into the session under an id a client
// can send (the implicit HandoffAccept it synthesizes,
// implicit-accept:<handoff_id>), and publishes one while a client's
// envelope of that id waits for its refusal.
type awaited struct {
	d   proxy.Decision
	id  string // its key in pending
	env *macpv1.Envelope
}

// streamSession runs one StreamSession call: the up half in its own
// goroutine, the down half in the caller's; decisions still pending when the
// call ends are released as lost.
func (s *Server) streamSession(ss serverStream, p authn.Principal, c authn.Credentials, upctx context.Context) error {
	gctx, release, err := s.hold(upctx, p, c, false)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithCancelCause(gctx)
	defer cancel(nil)
	cs, err := s.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodStream)
	if err != nil {
		return s.upstreamError(err)
	}
	st := &sessionStream{
		s: s, p: p, ss: ss, cs: cs, ctx: ctx, cancel: cancel,
		out:     newClientWriter(ss, cancel, clientBounds, s.queued),
		pending: map[string]awaited{},
	}
	go st.out.Run(ctx)
	defer st.releaseAll()
	go st.up()
	return st.down()
}

// up reads the client's messages, decides each and forwards the admitted
// ones to the runtime, until either side ends.
func (st *sessionStream) up() {
	for {
		f := &frame{}
		if err := st.ss.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				_ = st.cs.CloseSend()
			} else {
				st.cancel(nil)
			}
			return
		}
		if st.ctx.Err() != nil {
			return
		}
		settleNow, ok := st.admit(f)
		if !ok {
			continue
		}
		err := st.cs.SendMsg(f)
		if settleNow != nil {
			settleNow.Settle(err == nil)
		}
		if err != nil {
			return
		}
	}
}

// admit decides one client message. ok is false when the client was
// answered with an error instead and the message is not forwarded;
// settleNow, if not nil, is settled once the message is forwarded.
func (st *sessionStream) admit(f *frame) (settleNow *proxy.Decision, ok bool) {
	env, sid, refusal := st.s.gate.StreamMessage(f.b) // in place as a Send's, else as the runtime reads it
	if refusal != "" {
		st.fail(rules.CodeInvalidEnvelope, refusal, "", "")
		return nil, false
	}
	if env != nil {
		return st.admitEnvelope(env)
	}
	if sid != "" {
		if err := st.s.checkMember(st.ctx, sid, st.p); err != nil {
			st.fail(rules.CodeForbidden, "only participants may subscribe to a session", sid, "")
			return nil, false
		}
	}
	return nil, true
}

// admitEnvelope decides one envelope: a refused one is answered on the
// stream, an allowed Progress is settled when forwarded and any other
// allowed envelope is held until the runtime echoes it (or echoTimeout).
func (st *sessionStream) admitEnvelope(env *macpv1.Envelope) (settleNow *proxy.Decision, ok bool) {
	d, err := st.s.sessions.Enforce(st.ctx, sessions.Request{Principal: &st.p, Envelope: env})
	if err != nil {
		st.s.log.Warn("could not decide a MACP stream message; refusing it", "err", err)
		st.fail(rules.CodeInternal, "warden could not decide this message; retry", env.GetSessionId(), env.GetMessageId())
		return nil, false
	}
	if !d.Allow {
		a := admission.Refused(d, sessions.Request{Envelope: env}).Ack(env)
		st.out.send(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: a.GetError()}})
		return nil, false
	}
	if env.GetMessageType() == macp.TypeProgress {
		return &d, true
	}
	id := env.GetMessageId()
	st.release(id, false, true)
	st.awaitEcho(awaited{d: d, id: id, env: env}, time.Now())
	return nil, true
}

// awaitEcho holds a until the runtime answers its envelope, or until
// echoTimeout after now, when it is released as lost: the stream's one
// timer runs at the oldest envelope's end.
func (st *sessionStream) awaitEcho(a awaited, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pending[a.id] = a
	if !st.echoes.push(a.id, now.Add(echoTimeout)) {
		return // the timer runs at an older one's end already
	}
	if st.echoTimer == nil {
		st.echoTimer = time.AfterFunc(echoTimeout, st.expireEchoes)
	} else {
		st.echoTimer.Reset(echoTimeout)
	}
}

// expireEchoes releases, as lost, the decisions of the envelopes past
// echoTimeout (the stream's timer), and sets the timer to the next end.
func (st *sessionStream) expireEchoes() {
	st.mu.Lock()
	now := time.Now()
	ids := st.echoes.expire(now, nil)
	st.echoes.trim(st.waiting) // the ones behind them echoed meanwhile
	if due, ok := st.echoes.next(); ok {
		st.echoTimer.Reset(due.Sub(now))
	}
	st.mu.Unlock()
	for _, id := range ids {
		st.release(id, false, true)
	}
}

// fail answers the client with a MACP error on the stream.
func (st *sessionStream) fail(code rules.Code, msg, sid, mid string) {
	st.out.send(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: &macpv1.MACPError{Code: string(code), Message: msg, SessionId: sid, MessageId: mid}}})
}

// down relays the runtime's messages to the client, settling the decisions
// they answer, until the runtime ends the stream or the client falls behind.
func (st *sessionStream) down() error {
	if h, err := st.cs.Header(); err == nil && len(h) > 0 {
		st.out.send(header{h})
	}
	for {
		f := &frame{}
		err := st.cs.RecvMsg(f)
		if err != nil {
			st.ss.SetTrailer(st.cs.Trailer())
			if errors.Is(err, io.EOF) {
				return st.out.flush()
			}
			return st.s.streamEnd(st.ctx, err)
		}
		st.settleEcho(f)
		if !st.out.send(f) {
			return st.s.streamEnd(st.ctx, context.Cause(st.ctx))
		}
	}
}

// settleEcho settles the decision a runtime message answers: an echoed
// envelope of the same session and message id, type and payload was
// accepted (echoes), an error naming the session and id refused it. An
// envelope of another session with that id is not its echo, nor one of
// that session and id the runtime wrote itself (its implicit accept, which
// it publishes before refusing a client's envelope under that id) (the runtime refuses an envelope for a second session and ends the
// stream, which releases it as lost); an error naming no session (the
// stream not yet bound) may answer another envelope the client sent with
// that id, so the decision is released as lost: the session is rebuilt.
func (st *sessionStream) settleEcho(f *frame) {
	e, ok := readEcho(f.b)
	if !ok {
		return
	}
	st.mu.Lock()
	a, ok := st.pending[string(e.id)] // the id as it was kept, without making a string of e.id
	st.mu.Unlock()
	switch {
	case !ok: // nothing pending: nothing to settle
	case e.accepted: // the runtime accepted and echoed it
		st.end(a.id, func(a awaited) bool { return e.echoes(a.env) }, true, false)
	case len(e.session) == 0:
		st.release(a.id, false, true)
	default:
		st.end(a.id, func(a awaited) bool { return a.env.GetSessionId() == string(e.session) }, false, string(e.code) == string(rules.CodeSessionNotFound))
	}
}

// release ends the pending decision of message id, whatever its session, if
// there still is one.
func (st *sessionStream) release(id string, accepted bool, forget bool) {
	st.end(id, func(awaited) bool { return true }, accepted, forget)
}

// end ends the pending decision of message id if there is one and it is
// the one meant.
func (st *sessionStream) end(id string, meant func(awaited) bool, accepted bool, forget bool) {
	st.mu.Lock()
	a, ok := st.pending[id]
	if ok = ok && meant(a); ok {
		delete(st.pending, id)
		st.echoes.trim(st.waiting)
	}
	st.mu.Unlock()
	if !ok {
		return
	}
	if forget {
		st.s.sessions.SettleForget(context.WithoutCancel(st.ctx), a.d)
	} else {
		a.d.Settle(accepted)
	}
}

// waiting reports whether message id still awaits its answer; st.mu is
// held.
func (st *sessionStream) waiting(id string) bool {
	_, ok := st.pending[id]
	return ok
}

// releaseAll releases every decision still pending: the answer is lost with
// the stream.
func (st *sessionStream) releaseAll() {
	st.mu.Lock()
	if st.echoTimer != nil {
		st.echoTimer.Stop()
	}
	ids := make([]string, 0, len(st.pending))
	for id := range st.pending {
		ids = append(ids, id)
	}
	st.mu.Unlock()
	for _, id := range ids {
		st.release(id, false, true)
	}
}
