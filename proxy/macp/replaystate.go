package macp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// replayState is a session rebuilt from its history so far: each accepted
// message replayed through the same rules as a live decision.
type replayState struct {
	id   string
	meta *macpv1.SessionMetadata
	gov  *macp.Governance // the governance the session binds
	log  *slog.Logger

	s          *macp.Session // nil until the SessionStart
	seen, want int           // mode messages replayed; how many the metadata counts (0: it cannot tell)
	bank, last int64         // time banked by suspensions the history does not show; the last message's time
	floor      int64         // the earliest the runtime can have accepted the last client message (earliest)
	offer      offerSeen     // the last HandoffOffer replayed, the one that can still be pending
}

// offerSeen is what the replay saw of a HandoffOffer: who sent it, the
// earliest the runtime can have accepted it, and who sent messages after it.
type offerSeen struct {
	sender string
	from   int64
	again  bool            // its sender sent a message after it
	after  map[string]bool // the senders of the messages after it
}

// run replays h until it is complete and returns the session bound to what
// only the metadata knows. participant_activity counts the mode messages
// each participant sent (not the SessionStart): the replay is complete when
// that many have come, else when the history ends or pauses.
func (rs *replayState) run(ctx context.Context, h *history, quiet time.Duration) (*macp.Session, error) {
	for _, a := range rs.meta.GetParticipantActivity() {
		rs.want += int(a.GetMessageCount())
	}
	for rs.want == 0 || rs.s == nil || rs.seen < rs.want {
		f, err := h.next(ctx, quiet)
		switch {
		case err == nil:
		case rs.s != nil && (errors.Is(err, io.EOF) || errors.Is(err, errQuiet)):
			return rs.result(), nil
		case errors.Is(err, errQuiet):
			return nil, errors.New("replay: the runtime sent no history")
		default:
			return nil, fmt.Errorf("replay: %w", err)
		}
		if err := rs.apply(f); err != nil {
			return nil, err
		}
	}
	if rs.s == nil {
		return nil, errors.New("replay: no SessionStart in the history")
	}
	return rs.result(), nil
}

// result is the session replayed, with the metadata's state and deadline
// and its pending offer dated (offerDates).
func (rs *replayState) result() *macp.Session {
	now := time.Now().UnixMilli()
	return finish(rs.s.DatePendingOffer(rs.offerDates(now)), rs.meta, rs.last, now)
}

// offerDates bound when the runtime accepted the last offer replayed, the
// time it runs the offer's implicit accept from, which the history does not
// show (macp.Session.DatePendingOffer): no earlier than the replay's floor
// for it (earliest), nor than the last message of a participant who sent
// nothing after it; no later than now, nor than the last message of its
// sender or of anyone who sent after it; exactly the last message of its
// sender when it sent nothing after it. The participants' last messages
// are the runtime's own stamps in the metadata (participant_activity),
// which count the messages replayed when the replay is complete; with
// fewer replayed, only the latest bounds hold. notDue is the latest of
// those stamps after the offer: the runtime accepted that message without
// finding the offer's implicit accept due.
func (rs *replayState) offerDates(now int64) (from, by, notDue int64) {
	o := rs.offer
	from, by = o.from, now
	complete := rs.want > 0 && rs.seen == rs.want
	for _, a := range rs.meta.GetParticipantActivity() {
		at, p := a.GetLastMessageAtUnixMs(), a.GetParticipantId()
		switch {
		case at <= 0 || o.sender == "":
		case p == o.sender && !o.again && complete:
			from, by = at, min(by, at) // the offer is its sender's last message
		case p == o.sender || o.after[p]:
			by = min(by, at)
			if o.after[p] {
				notDue = max(notDue, at)
			}
		case complete:
			from = max(from, at) // its last message came before the offer
		}
	}
	return from, by, notDue
}

// apply replays one message of the history; a message Warden's rules refuse
// is errDiverged.
func (rs *replayState) apply(f *frame) error {
	var resp macpv1.StreamSessionResponse
	if err := proto.Unmarshal(f.b, &resp); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	env := resp.GetEnvelope()
	if env == nil {
		if e := resp.GetError(); e != nil {
			return fmt.Errorf("replay: runtime error %s: %s", e.GetCode(), e.GetMessage())
		}
		return nil
	}
	if env.GetMessageType() == macp.TypeSessionCancel {
		return nil // a runtime annotation; the final state comes from the metadata
	}
	// A client timestamp is taken as the message's time, within the same
	// caps as a live decision: never ahead of Warden's clock.
	ts := env.GetTimestampUnixMs()
	if wall := time.Now().UnixMilli(); ts <= 0 || ts > wall {
		ts = wall
	}
	out := rs.step(env, ts)
	if out.Duplicate {
		return nil
	}
	if out.Next == nil {
		rs.log.Warn("rebuild: the runtime accepted a message Warden refuses", "session_id", rs.id,
			"message_type", env.GetMessageType(), "message_id", env.GetMessageId(), "code", string(out.Verdict.Code), "detail", out.Verdict.Detail)
		return fmt.Errorf("%w: %s %s (%s)", errDiverged, env.GetMessageType(), env.GetMessageId(), out.Verdict.Code)
	}
	rs.s, rs.last = out.Next, ts
	return nil
}

// earliest is the earliest the runtime can have accepted a client message
// stamped ts, which the history does not show: the runtime times what
// follows a message (an offer's implicit accept) from when it accepted it,
// on its own clock; the client's stamp may be up to macp.MaxClockSkewMs
// ahead of that (a live decision refuses more), or anywhere behind. So not
// before MaxClockSkewMs before its stamp, nor before the session started on
// the runtime's clock, nor before the message before it. The replay still
// decides each message at its stamp, as the live decision's time; this
// bounds only an offer's time (offerDates).
func (rs *replayState) earliest(ts int64) int64 {
	rs.floor = max(ts-macp.MaxClockSkewMs, rs.floor, rs.meta.GetStartedAtUnixMs())
	return rs.floor
}

// step decides env, stamped ts, against the session so far.
func (rs *replayState) step(env *macpv1.Envelope, ts int64) macp.Outcome {
	switch env.GetMessageType() {
	case macp.TypeSessionStart:
		out := macp.StartBound(rs.s, env, env.GetSender(), rs.gov, ts)
		if rs.s == nil && out.Next != nil {
			// The runtime's replay need not show suspensions (the
			// reference runtime's does not); its metadata shows the time
			// they banked, which messages of the history may have used.
			rs.bank = banked(out.Next, rs.meta, time.Now().UnixMilli())
			out.Next.DeadlineMs += rs.bank
			sp := out.Next.Suspension()
			sp.TotalMs += rs.bank
			out.Next.SetSuspension(sp)
		}
		return out
	case macp.TypeSessionSuspend, macp.TypeSessionResume:
		// The runtime's annotations of SuspendSession and ResumeSession,
		// where it sends them, stamped by it: replayed as the live
		// decisions were, they bank the time suspended into the
		// deadline, once (the metadata's share is taken back).
		op := macp.OpSuspend
		if env.GetMessageType() == macp.TypeSessionResume {
			op = macp.OpResume
		}
		out := macp.Control(rs.s, op, env.GetSender(), ts)
		if op == macp.OpResume && out.Next != nil {
			again := min(out.Next.DeadlineMs-rs.s.DeadlineMs, rs.bank)
			out.Next.DeadlineMs -= again
			sp := out.Next.Suspension()
			sp.TotalMs -= again
			out.Next.SetSuspension(sp)
			rs.bank -= again
		}
		return out
	}
	if macp.Synthesized(env) {
		// The runtime's own entry (an implicit HandoffAccept): applied as
		// its replay applies it, and not counted, as the runtime counts no
		// participant activity for it.
		return macp.Synthesize(rs.s, env)
	}
	rs.seen++
	from := rs.earliest(ts)
	out := macp.Replayed(rs.s, env, env.GetSender(), ts)
	if out.Next != nil && !out.Duplicate {
		rs.offer.saw(env, from)
	}
	return out
}

// saw notes env, accepted by the runtime no earlier than from.
func (o *offerSeen) saw(env *macpv1.Envelope, from int64) {
	if env.GetMessageType() == "HandoffOffer" {
		*o = offerSeen{sender: env.GetSender(), from: from}
		return
	}
	if o.sender == "" {
		return
	}
	o.again = o.again || env.GetSender() == o.sender
	if o.after == nil {
		o.after = map[string]bool{}
	}
	o.after[env.GetSender()] = true
}
