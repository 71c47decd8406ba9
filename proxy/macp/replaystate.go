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
	seen       int           // mode messages replayed
	bank, last int64         // time banked by suspensions the history does not show; the last message's time
}

// run replays h until it is complete and returns the session bound to what
// only the metadata knows. participant_activity counts the mode messages
// each participant sent (not the SessionStart): the replay is complete when
// that many have come, else when the history ends or pauses.
func (rs *replayState) run(ctx context.Context, h *history, quiet time.Duration) (*macp.Session, error) {
	want := 0
	for _, a := range rs.meta.GetParticipantActivity() {
		want += int(a.GetMessageCount())
	}
	for want == 0 || rs.s == nil || rs.seen < want {
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

// result is the session replayed, with the metadata's state and deadline.
func (rs *replayState) result() *macp.Session {
	return finish(rs.s, rs.meta, rs.last, time.Now().UnixMilli())
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
	return macp.Step(rs.s, env, env.GetSender(), ts)
}
