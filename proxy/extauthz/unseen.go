package extauthz

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/rules"
)

// Unseen says, for warden check, what becomes of the MACP calls ext_authz
// cannot decide (see unseen).
func (c Config) Unseen() string {
	stream, reads := "StreamSession refused", "session reads refused"
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
//   - GetSession, ListSessions, WatchSessions and WatchSignals leak: the
//     sidecar filters their answers to the caller's sessions, and answers
//     are never shown (extauthz.allow_unfiltered_reads).
//
// The refusal is a decision (logged, counted; in dry run forwarded) with
// PERMISSION_DENIED and a message naming the setting that lets it through.
func (s *Server) unseen(ctx context.Context, a admission.Admission) *admission.Refusal {
	var why string
	switch a.Call {
	case admission.CallStream:
		if s.cfg.AllowStreamSession {
			return nil
		}
		why = "StreamSession is refused under ext_authz: Envoy shows Warden only the opening of the stream, not the envelopes sent on it, so the rules on each message cannot be applied; use Send, or run the sidecar (extauthz.allow_stream_session / --extauthz-allow-stream-session lets streams through unchecked)"
	case admission.CallGetSession, admission.CallListSessions, admission.CallWatchSessions, admission.CallWatchSignals:
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
