package extauthz

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Unseen says, for warden check, what becomes of the MACP calls ext_authz
// cannot decide (see unseen).
func (c Config) Unseen() string {
	stream, reads := "StreamSession refused", "GetSession decided on the sessions ext_authz keeps, ListSessions and the watches refused"
	if c.AllowStreamSession {
		stream = "StreamSession allowed unchecked (extauthz.allow_stream_session: no rule holds on its envelopes)"
	}
	if c.AllowUnfilteredReads {
		reads = "session reads allowed unfiltered (extauthz.allow_unfiltered_reads: any caller sees every session)"
	}
	return stream + ", " + reads
}

// unseen is the one place ext_authz answers a MACP call whose rule it
// cannot apply, because what the rule decides on never reaches Check: nil
// when the call is not one, or the operator opted in to it. Two kinds:
//
//   - StreamSession bypasses authority: its envelopes are never shown, so
//     each rule on Send could be walked around by sending the same envelope
//     on a stream (extauthz.allow_stream_session).
//   - ListSessions, WatchSessions and WatchSignals leak: the sidecar
//     filters their answers to the caller's sessions, and answers are never
//     shown (extauthz.allow_unfiltered_reads). GetSession names its one
//     session: it is decided on the session state ext_authz keeps
//     (getSession).
//
// The refusal is a decision (logged, counted; in dry run forwarded) with
// PERMISSION_DENIED and a message naming the setting that lets it through.
func (s *Server) unseen(ctx context.Context, a admission.Admission, msg func() ([]byte, error)) *admission.Refusal {
	var why string
	switch a.Call {
	case admission.CallStream:
		if s.cfg.AllowStreamSession {
			return nil
		}
		why = "StreamSession is refused under ext_authz: Envoy shows Warden only the opening of the stream, not the envelopes sent on it, so the rules on each message cannot be applied; use Send, or run the sidecar (extauthz.allow_stream_session / --extauthz-allow-stream-session lets streams through unchecked)"
	case admission.CallGetSession:
		if s.cfg.AllowUnfilteredReads {
			return nil
		}
		return s.getSession(ctx, a, msg)
	case admission.CallListSessions, admission.CallWatchSessions, admission.CallWatchSignals:
		if s.cfg.AllowUnfilteredReads {
			return nil
		}
		why = a.Op + " is refused under ext_authz: Envoy never shows Warden the answer, so it cannot be limited to the caller's sessions; run the sidecar (extauthz.allow_unfiltered_reads / --extauthz-allow-unfiltered-reads lets it through unfiltered)"
	default:
		return nil
	}
	d := s.enf.Deny(ctx, "macp", a.Principal.ID, a.Op, rules.Verdict{Code: rules.CodeForbidden, Reason: rules.ReasonNotSeenAtDoor, Detail: why})
	if d.Allow { // dry run: forwarded, the would-be refusal recorded
		return nil
	}
	return &admission.Refusal{Status: codes.Code(d.Code.GRPCStatus()), Code: d.Code, Text: string(d.Code) + ": " + why + " (warden decision " + d.ID + ")", DecisionID: d.ID}
}

// getSession decides a GetSession on the session state ext_authz keeps, as
// the sidecar filters the runtime's answer: allowed when the caller
// initiated or takes part in the session (admission.TakesPart, the
// sidecar's check); else the runtime's answer for a session that does not
// exist, word for word, whether the session is unknown here or another's,
// so session ids cannot be probed. A session ext_authz never saw (started
// past it, or before a restart without a shared store) is not found.
func (s *Server) getSession(ctx context.Context, a admission.Admission, msg func() ([]byte, error)) *admission.Refusal {
	body, err := msg()
	if err != nil {
		// a framing error, as grpc-go answers one: INTERNAL, no MACP code
		return &admission.Refusal{Status: codes.Internal, Text: err.Error()}
	}
	var in macpv1.GetSessionRequest
	if proto.Unmarshal(body, &in) != nil {
		return &admission.Refusal{Status: codes.InvalidArgument, Text: "INVALID_ARGUMENT: the GetSessionRequest does not decode"}
	}
	st, err := s.sessions.Session(ctx, in.GetSessionId())
	if err != nil {
		s.log.Warn("extauthz: GetSession: the session state could not be read", "session", in.GetSessionId(), "err", err)
		r := admission.Undecided
		return &r
	}
	if st != nil && admission.TakesPart(st.Initiator, st.Participants, a.Principal.ID) {
		return nil
	}
	r := admission.NoSession(in.GetSessionId())
	return &r
}
