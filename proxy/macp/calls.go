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
	"github.com/agentwarden/warden/proxy/macp/admission"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

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

// member reports whether id takes part in the session.
func member(m *macpv1.SessionMetadata, id string) bool {
	return admission.TakesPart(m.GetInitiator(), m.GetParticipants(), id)
}

// watchSessions relays only the lifecycle events of the caller's sessions.
func (s *Server) watchSessions(ss serverStream, p authn.Principal, c authn.Credentials, ctx context.Context) error {
	ctx, release, err := s.hold(ctx, p, c, true)
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
func (s *Server) relay(ss serverStream, method string, upctx context.Context, keep func(*frame) (bool, error)) error {
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
			tr := cs.Trailer()
			ss.SetTrailer(tr)
			if keep != nil && lagging(err, tr) {
				err = errWatchLagged
			}
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

// errWatchLagged ends a filtered watch the runtime ended as lagging
// (STREAM_LAGGED), with the runtime's code and a text of Warden's: the
// runtime's text counts the signals (or events) its reader missed, every
// session's, where the watcher sees only its own (security.md V3).
var errWatchLagged = status.Error(codes.ResourceExhausted, "the watch fell behind the runtime's events and was ended; watch again")

// lagging reports whether err, with the trailer tr, is the runtime ending
// a watch whose reader fell behind its bus.
func lagging(err error, tr metadata.MD) bool {
	return status.Code(err) == codes.ResourceExhausted && slices.Contains(tr.Get(macpErrorCode), "STREAM_LAGGED")
}

// watchSignals relays ambient signals to every authenticated caller and the
// signals of a session (Progress) only to its participants: the runtime
// sends every session's signals to every watcher.
func (s *Server) watchSignals(ss serverStream, p authn.Principal, c authn.Credentials, ctx context.Context) error {
	ctx, release, err := s.hold(ctx, p, c, true)
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

// errCredentialGone ends a long-lived call whose credential expired, was
// revoked or had its rights changed (a reload) while it was open.
var errCredentialGone = errors.New("the credential expired, was revoked or had its rights changed")

// hold admits a long-lived call of p, authenticated from c: a place among
// the runtime's streams (a watch's own share when watch), then the
// credential guard, which cancels the call's context once p's credential
// stops being valid: at its expiry, or when re-authenticating c every
// CredentialCheck interval fails (a token removed from the static file and
// reloaded, a key removed from the JWKS) or names someone else. release
// ends the guard and gives the place back.
func (s *Server) hold(ctx context.Context, p authn.Principal, c authn.Credentials, watch bool) (context.Context, func(), error) {
	take := s.streams.take
	if watch {
		take = s.streams.takeWatch
	}
	done, err := take(p.ID)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := s.enf.Guard(ctx, c, p, s.cfg.CredentialCheck, errCredentialGone)
	return ctx, func() { stop(); done() }, nil
}

// streamEnd is what the client sees when a relayed stream ends with err.
func (s *Server) streamEnd(ctx context.Context, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCredentialGone):
		return status.Error(codes.Unauthenticated, "authentication failed: the credential expired, was revoked or had its rights changed")
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
