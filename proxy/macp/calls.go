package macp

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// recvOne reads the one request message of a unary call; bodyTap bounds
// the wait for it.
func recvOne(ss grpc.ServerStream) (*frame, error) {
	f := &frame{}
	err := ss.RecvMsg(f)
	if !bodyArrived(ss.Context()) {
		return nil, errBodyLate
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// invoke forwards one unary request with the upstream context ctx and
// relays the upstream's headers.
func (s *Server) invoke(ctx context.Context, ss grpc.ServerStream, method string, req *frame) (*frame, error) {
	var header, trailer metadata.MD
	resp := &frame{}
	err := s.up.Invoke(ctx, method, req, resp, grpc.Header(&header), grpc.Trailer(&trailer))
	if relayable(header) {
		_ = ss.SetHeader(header)
	}
	ss.SetTrailer(trailer)
	if err != nil {
		return nil, s.upstreamError(err)
	}
	return resp, nil
}

// relayable reports whether the runtime's response headers hold anything
// to relay: grpc-go sends its own content-type and drops a relayed one.
func relayable(header metadata.MD) bool {
	for k := range header {
		if k != "content-type" {
			return true
		}
	}
	return false
}

// undecided maps "could not decide" onto the wire, once for every MACP call:
// refused, retryable, with a generic text for the client and the detail in
// the log.
func (s *Server) undecided(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	s.log.Warn("could not decide a MACP message; refusing it", "err", err)
	return refuse(ctx, admission.Undecided)
}

// upstreamError is what the client sees when the call to the runtime failed:
// the runtime's own status passes; a transport failure (runtime down,
// unreachable) is UNAVAILABLE without Warden's internal address or error
// text, which go to the log.
func (s *Server) upstreamError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		s.log.Warn("runtime call failed", "err", err)
		s.enf.UpstreamFailed("macp")
		return status.Error(codes.Unavailable, "the MACP runtime is unavailable; retry")
	}
	if st.Code() == codes.Unavailable || st.Code() == codes.Unknown && strings.Contains(st.Message(), "transport") {
		s.log.Warn("runtime unavailable", "err", err)
		s.enf.UpstreamFailed("macp")
		return status.Error(codes.Unavailable, "the MACP runtime is unavailable; retry")
	}
	return err
}

// settle ends a decision by the runtime's answer to the message: accepted
// commits the state. When the answer shows Warden's state no longer follows
// the runtime (it does not know the session, it applied a retransmission as
// new, or the answer was lost), the session is forgotten, still held, and
// rebuilt on its next message (proxy.Enforcer.SettleForget).
func (s *Server) settle(ctx context.Context, d proxy.Decision, a ack, err error) {
	switch {
	case errors.Is(err, errUpstreamFull): // it never reached the runtime
		d.Settle(false)
	case err != nil,
		a.ok && d.Duplicate && !a.duplicate,
		!a.ok && string(a.code) == string(rules.CodeSessionNotFound):
		s.enf.SettleForget(context.WithoutCancel(ctx), d)
	default:
		d.Settle(a.ok && !a.duplicate)
	}
}

// send decides one Send and forwards it when allowed. It is registered as
// a unary method (cheaper than the generic stream path every other call
// takes); the answer is either Warden's refusal or the runtime's bytes. The
// caller is admitted before its message is read.
func (s *Server) send(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (_ any, err error) {
	ctx, f := s.enf.Begin(ctx, "macp", proxy.DoorSidecar, nil)
	defer func() { f.End(failedCall(err)) }()
	a, md := s.admit(ctx, methodSend)
	if a.Refusal != nil {
		bodyArrived(ctx)
		return nil, refuse(ctx, *a.Refusal)
	}
	req := &frame{}
	err = dec(req)
	if !bodyArrived(ctx) {
		return nil, errBodyLate
	}
	if err != nil {
		return nil, err
	}
	r, refused := s.gate.Request(a, req.b)
	if refused != nil {
		return nil, refuse(ctx, *refused)
	}
	r.Acked = true
	upctx := s.upstreamContext(ctx, md, a.Principal, a.Credentials)
	d, err := s.enf.Enforce(upctx, r)
	if err != nil {
		return nil, s.undecided(ctx, err)
	}
	if !d.Allow {
		return &macpv1.SendResponse{Ack: admission.Refused(d, r).Ack(r.Envelope)}, nil
	}
	var header, trailer metadata.MD
	resp := &frame{}
	err = s.up.Invoke(upctx, methodSend, req, resp, grpc.Header(&header), grpc.Trailer(&trailer))
	if relayable(header) {
		_ = grpc.SetHeader(ctx, header)
	}
	_ = grpc.SetTrailer(ctx, trailer)
	var ak ack
	if err == nil {
		if ak, err = readAck(resp.b); err != nil {
			err = errors.New("the runtime's SendResponse does not decode")
		}
	}
	s.settle(ctx, d, ak, err)
	if err != nil {
		return nil, s.upstreamError(err)
	}
	return resp, nil
}

// control decides CancelSession, SuspendSession and ResumeSession, admitted
// as a (authenticated before its request is read: a client that cannot
// authenticate holds no stream waiting for a body).
func (s *Server) control(ss grpc.ServerStream, a admission.Admission, upctx context.Context) error {
	req, err := recvOne(ss)
	if err != nil {
		return err
	}
	r, refused := s.gate.Request(a, req.b)
	if refused != nil {
		return refuse(ss.Context(), *refused)
	}
	d, err := s.enf.Enforce(upctx, r)
	if err != nil {
		return s.undecided(ss.Context(), err)
	}
	if !d.Allow {
		// The runtime refuses control RPCs with a gRPC status, not an Ack.
		return refuse(ss.Context(), admission.Refused(d, r))
	}
	resp, err := s.invoke(upctx, ss, a.Method, req)
	var ak ack // the three responses share {ack}
	if err == nil {
		if ak, err = readAck(resp.b); err != nil {
			err = errors.New("the runtime's control response does not decode")
		}
	}
	s.settle(ss.Context(), d, ak, err)
	if err != nil {
		return err
	}
	return ss.SendMsg(resp)
}

// member reports whether id takes part in the session.
func member(m *macpv1.SessionMetadata, id string) bool {
	return m.GetInitiator() == id || slices.Contains(m.GetParticipants(), id)
}

// authedUnary forwards a unary call admitted with the upstream context ctx
// and decodes the response into out, so the caller can filter what the
// caller may see.
func (s *Server) authedUnary(ss grpc.ServerStream, ctx context.Context, method string, out proto.Message) (*frame, error) {
	req, err := recvOne(ss)
	if err != nil {
		return nil, err
	}
	resp, err := s.invoke(ctx, ss, method, req)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(resp.b, out); err != nil {
		return nil, status.Error(codes.Internal, "the runtime's "+method+" response does not decode")
	}
	return resp, nil
}

// errNoSession is the one answer for a session the caller may not see,
// whether it exists or not, so that session ids cannot be probed.
var errNoSession = status.Error(codes.NotFound, "session not found")

// getSession shows a session only to its participants; to anyone else it
// looks exactly like an unknown session (the runtime's PermissionDenied for
// an existing session included).
func (s *Server) getSession(ss grpc.ServerStream, p authn.Principal, ctx context.Context) error {
	var out macpv1.GetSessionResponse
	resp, err := s.authedUnary(ss, ctx, methodGet, &out)
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound, codes.PermissionDenied:
		return errNoSession
	default:
		return err
	}
	if !member(out.GetMetadata(), p.ID) {
		return errNoSession
	}
	return ss.SendMsg(resp)
}

// watchSessions relays only the lifecycle events of the caller's sessions.
func (s *Server) watchSessions(ss grpc.ServerStream, p authn.Principal, ctx context.Context) error {
	ctx, release, err := s.hold(ctx, p, true)
	if err != nil {
		return err
	}
	defer release()
	ctx, touch, stopIdle := s.streams.idle(ctx)
	defer stopIdle()
	return s.relay(ss, service+"WatchSessions", ctx, func(f *frame) (bool, error) {
		var ev macpv1.WatchSessionsResponse
		if err := proto.Unmarshal(f.b, &ev); err != nil {
			return false, status.Error(codes.Internal, "upstream WatchSessionsResponse does not decode")
		}
		ok := member(ev.GetEvent().GetSession(), p.ID)
		if ok {
			touch()
		}
		return ok, nil
	})
}

// relay runs a call of any shape against the upstream with the upstream
// context upctx: client frames go up as they come, upstream frames come down
// through keep (nil keeps all).
func (s *Server) relay(ss grpc.ServerStream, method string, upctx context.Context, keep func(*frame) (bool, error)) error {
	ctx, cancel := context.WithCancelCause(upctx)
	defer cancel(nil)
	cs, err := s.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return s.upstreamError(err)
	}
	// The client is written through a bounded queue: one that does not read
	// has its call ended instead of holding the runtime's stream.
	out := newClientWriter(ss, cancel, clientBounds, s.queued)
	go out.Run(ctx)
	upErr := make(chan error, 1)
	go func() {
		for {
			f := &frame{}
			if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					upErr <- cs.CloseSend()
				} else {
					upErr <- err
				}
				return
			}
			if err := cs.SendMsg(f); err != nil {
				upErr <- nil // the upstream's status arrives on RecvMsg
				return
			}
		}
	}()
	if h, err := cs.Header(); err == nil && len(h) > 0 {
		out.send(header{h})
	}
	for {
		f := &frame{}
		err := cs.RecvMsg(f)
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return out.flush()
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			return s.streamEnd(ctx, err)
		}
		if keep != nil {
			ok, err := keep(f)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		if !out.send(f) {
			return s.streamEnd(ctx, context.Cause(ctx))
		}
	}
}

// watchSignals relays ambient signals to every authenticated caller and the
// signals of a session (Progress) only to its participants: the runtime
// sends every session's signals to every watcher.
func (s *Server) watchSignals(ss grpc.ServerStream, p authn.Principal, ctx context.Context) error {
	ctx, release, err := s.hold(ctx, p, true)
	if err != nil {
		return err
	}
	defer release()
	ctx, touch, stopIdle := s.streams.idle(ctx)
	defer stopIdle()
	const maxKnown = 4096
	known := map[string]bool{} // session -> the caller takes part; only this goroutine uses it
	return s.relay(ss, service+"WatchSignals", ctx, func(f *frame) (bool, error) {
		var ev macpv1.WatchSignalsResponse
		if err := proto.Unmarshal(f.b, &ev); err != nil {
			return false, status.Error(codes.Internal, "the runtime's WatchSignalsResponse does not decode")
		}
		sid := ev.GetEnvelope().GetSessionId()
		if sid == "" {
			touch()
			return true, nil
		}
		ok, seen := known[sid]
		if !seen {
			if len(known) >= maxKnown {
				clear(known)
			}
			ok = s.checkMember(ctx, sid, p) == nil
			known[sid] = ok
		}
		if ok {
			touch()
		}
		return ok, nil
	})
}

// errCredentialGone ends a long-lived call whose credential expired or was
// revoked while it was open.
var errCredentialGone = errors.New("the credential expired or was revoked")

// guard returns ctx cancelled once p's credential stops being valid: at its
// expiry, or when re-authenticating the call's credentials every
// CredentialCheck interval fails (a token removed from the static file and
// reloaded, a key removed from the JWKS) or names someone else. stop ends
// the watch.
func (s *Server) guard(ctx context.Context, p authn.Principal) (context.Context, func()) {
	h, _ := headersOf(ctx, "")
	c, _ := authn.FromHeaders(h.Get, h.Chain)
	return s.enf.Guard(ctx, c, p, s.cfg.CredentialCheck, errCredentialGone)
}

// hold admits a long-lived call of p: a place among the runtime's streams
// (a watch's own share when watch), then the credential guard; release
// ends the guard and gives the place back.
func (s *Server) hold(ctx context.Context, p authn.Principal, watch bool) (context.Context, func(), error) {
	take := s.streams.take
	if watch {
		take = s.streams.takeWatch
	}
	done, err := take(p.ID)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := s.guard(ctx, p)
	return ctx, func() { stop(); done() }, nil
}

// streamEnd is what the client sees when a relayed stream ends with err.
func (s *Server) streamEnd(ctx context.Context, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCredentialGone):
		return status.Error(codes.Unauthenticated, "authentication failed: the credential expired or was revoked")
	case errors.Is(cause, errClientBehind):
		return status.Error(codes.ResourceExhausted, cause.Error())
	case errors.Is(cause, errClientStuck):
		return status.Error(codes.DeadlineExceeded, cause.Error())
	case errors.Is(cause, errWatchIdle):
		return status.Error(codes.Unavailable, cause.Error())
	}
	return s.upstreamError(err)
}

// checkMember asks the runtime, with the caller's own credentials, whether
// the caller takes part in the session.
func (s *Server) checkMember(ctx context.Context, sessionID string, p authn.Principal) error {
	m, err := sessionMetadata(ctx, s.up, sessionID)
	if err != nil {
		return err
	}
	if !member(m, p.ID) {
		return errors.New("not a participant")
	}
	return nil
}
