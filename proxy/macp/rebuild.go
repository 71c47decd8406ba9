package macp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// Rebuilder recovers a session's state from the runtime (DESIGN.md §5): the
// metadata from GetSession, then the accepted history replayed by a
// StreamSession subscription through the same rules. It calls the runtime
// with the credentials of the request that needs the state.
type Rebuilder struct {
	up  grpc.ClientConnInterface
	log *slog.Logger
	// Quiet is how long the replay may pause before it is taken as complete
	// when the metadata's message counts cannot tell.
	Quiet time.Duration
}

// NewRebuilder returns a Rebuilder using up.
func NewRebuilder(up *Upstream, log *slog.Logger) *Rebuilder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rebuilder{up: up.conns, log: log, Quiet: 300 * time.Millisecond}
}

// errDiverged means the runtime accepted a message Warden's rules refuse.
var errDiverged = errors.New("the runtime's history holds a message Warden's rules refuse")

// Rebuild returns the session's state, or nil when the runtime does not know
// the session or does not show it to the caller. It calls the runtime with
// ctx's outgoing metadata: the adapter's credential for the caller. The
// session binds bound, the governance Warden recorded for it, or
// rules.UnknownPolicy: never the definition registered under its id now,
// which may have been withdrawn or replaced since the session started (the
// runtime keeps the one bound at SessionStart and shows only its id).
func (r *Rebuilder) Rebuild(ctx context.Context, sessionID string, bound *rules.Governance) (*rules.Session, error) {
	meta, err := sessionMetadata(ctx, r.up, sessionID)
	if c := status.Code(err); c == codes.NotFound || c == codes.PermissionDenied {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	want := 0
	for _, a := range meta.GetParticipantActivity() {
		want += int(a.GetMessageCount())
	}
	gov := boundPolicy(meta.GetPolicyVersion(), bound)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := r.up.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodStream)
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	sub, err := proto.Marshal(&macpv1.StreamSessionRequest{SubscribeSessionId: sessionID})
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(&frame{b: sub}); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	frames := make(chan *frame)
	errc := make(chan error, 1)
	go func() {
		for {
			f := &frame{}
			if err := cs.RecvMsg(f); err != nil {
				errc <- err
				return
			}
			select {
			case frames <- f:
			case <-sctx.Done():
				return
			}
		}
	}()

	// participant_activity counts the mode messages each participant sent
	// (not the SessionStart): the replay is complete when that many have come.
	var s *rules.Session
	seen := 0
	var bank, last int64 // time banked by suspensions the history does not show; the last message's time
	for want == 0 || s == nil || seen < want {
		var f *frame
		select {
		case f = <-frames:
		case err := <-errc:
			if errors.Is(err, io.EOF) && s != nil {
				return finish(s, meta, last, time.Now().UnixMilli()), nil
			}
			return nil, fmt.Errorf("replay: %w", err)
		case <-time.After(r.Quiet):
			if s != nil {
				return finish(s, meta, last, time.Now().UnixMilli()), nil
			}
			return nil, errors.New("replay: the runtime sent no history")
		case <-sctx.Done():
			return nil, fmt.Errorf("replay: %w", sctx.Err())
		}
		var resp macpv1.StreamSessionResponse
		if err := proto.Unmarshal(f.b, &resp); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		env := resp.GetEnvelope()
		if env == nil {
			if e := resp.GetError(); e != nil {
				return nil, fmt.Errorf("replay: runtime error %s: %s", e.GetCode(), e.GetMessage())
			}
			continue
		}
		if env.GetMessageType() == rules.TypeSessionCancel {
			continue // a runtime annotation; the final state comes from the metadata
		}
		// A client timestamp is taken as the message's time, within the same
		// caps as a live decision: never ahead of Warden's clock.
		ts := env.GetTimestampUnixMs()
		if wall := time.Now().UnixMilli(); ts <= 0 || ts > wall {
			ts = wall
		}
		var out rules.Outcome
		switch env.GetMessageType() {
		case rules.TypeSessionStart:
			out = rules.StartBound(s, env, env.GetSender(), gov, ts)
			if s == nil && out.Next != nil {
				// The runtime's replay need not show suspensions (the
				// reference runtime's does not); its metadata shows the time
				// they banked, which messages of the history may have used.
				bank = banked(out.Next, meta, time.Now().UnixMilli())
				out.Next.DeadlineMs += bank
				out.Next.SuspendedTotalMs += bank
			}
		case rules.TypeSessionSuspend, rules.TypeSessionResume:
			// The runtime's annotations of SuspendSession and ResumeSession,
			// where it sends them, stamped by it: replayed as the live
			// decisions were, they bank the time suspended into the
			// deadline, once (the metadata's share is taken back).
			op := rules.OpSuspend
			if env.GetMessageType() == rules.TypeSessionResume {
				op = rules.OpResume
			}
			out = rules.Control(s, op, env.GetSender(), ts)
			if op == rules.OpResume && out.Next != nil {
				again := min(out.Next.DeadlineMs-s.DeadlineMs, bank)
				out.Next.DeadlineMs -= again
				out.Next.SuspendedTotalMs -= again
				bank -= again
			}
		default:
			out = rules.Step(s, env, env.GetSender(), ts)
			seen++
		}
		if out.Duplicate {
			continue
		}
		if out.Next == nil {
			r.log.Warn("rebuild: the runtime accepted a message Warden refuses", "session_id", sessionID,
				"message_type", env.GetMessageType(), "message_id", env.GetMessageId(), "code", string(out.Verdict.Code), "detail", out.Verdict.Detail)
			return nil, fmt.Errorf("%w: %s %s (%s)", errDiverged, env.GetMessageType(), env.GetMessageId(), out.Verdict.Code)
		}
		s, last = out.Next, ts
	}
	if s == nil {
		return nil, errors.New("replay: no SessionStart in the history")
	}
	return finish(s, meta, last, time.Now().UnixMilli()), nil
}

// Exists reports whether the runtime holds the session, asking it with ctx's
// outgoing metadata: a session the caller may not see exists all the same.
func (r *Rebuilder) Exists(ctx context.Context, sessionID string) (bool, error) {
	_, err := sessionMetadata(ctx, r.up, sessionID)
	switch status.Code(err) {
	case codes.OK, codes.PermissionDenied:
		return true, nil
	case codes.NotFound:
		return false, nil
	}
	return false, fmt.Errorf("get session: %w", err)
}

// finish applies what only the metadata knows: the lifecycle state set by
// control RPCs and the deadline on the runtime's clock. The runtime's
// deadline is taken when it is earlier than the one the replay computed
// (suspensions banked), never a later one, so a deadline the runtime
// stretched from a client's timestamp is not adopted.
//
// A session suspended where the history does not show when (the runtime's
// replay does not deliver its SessionSuspend entries, nor does any RPC show
// when a suspension began) is dated with what is known: not before the
// session's start and its last accepted message (the runtime's own stamps
// in the metadata; last, the replay's, without them), not after now. It is
// taken as suspended since now, so that the time left under max_suspend_ms
// is never less than the runtime's (a Resume it accepts is not refused), and
// a Resume banks into the deadline the longest it can have lasted.
func finish(s *rules.Session, meta *macpv1.SessionMetadata, last, now int64) *rules.Session {
	st := rules.State(meta.GetState())
	if st == rules.StateSuspended && s.State != rules.StateSuspended {
		from := meta.GetStartedAtUnixMs()
		for _, a := range meta.GetParticipantActivity() {
			from = max(from, a.GetLastMessageAtUnixMs())
		}
		if from <= 0 {
			from = last
		}
		s.SuspendedFromMs, s.SuspendedAtMs = from, max(now, from)
	}
	if st != rules.StateUnspecified {
		s.State = st
	}
	if d := meta.GetExpiresAtUnixMs(); d > 0 {
		s.DeadlineMs = min(d, s.DeadlineMs)
	}
	return s
}

// banked is the time the runtime's metadata shows banked into the deadline of
// s, just started, by suspensions: its deadline past its start and TTL,
// within the time that has passed since the start (wall) and the session's
// cap on suspensions.
func banked(s *rules.Session, meta *macpv1.SessionMetadata, wall int64) int64 {
	started, expires := meta.GetStartedAtUnixMs(), meta.GetExpiresAtUnixMs()
	if started <= 0 || expires <= 0 {
		return 0
	}
	b := min(expires-started-(s.DeadlineMs-s.StartedAtMs), wall-started)
	if s.MaxSuspendMs > 0 {
		b = min(b, s.MaxSuspendMs)
	}
	return max(b, 0)
}

// sessionMetadata asks the runtime for a session's metadata.
func sessionMetadata(ctx context.Context, up grpc.ClientConnInterface, sessionID string) (*macpv1.SessionMetadata, error) {
	req, err := proto.Marshal(&macpv1.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		return nil, err
	}
	resp := &frame{}
	if err := up.Invoke(ctx, methodGet, &frame{b: req}, resp); err != nil {
		return nil, err
	}
	var out macpv1.GetSessionResponse
	if err := proto.Unmarshal(resp.b, &out); err != nil {
		return nil, err
	}
	return out.GetMetadata(), nil
}

// Policy fetches a registered policy from the runtime (proxy.PolicySource).
func (r *Rebuilder) Policy(ctx context.Context, id string) (rules.PolicyDescriptor, bool, error) {
	req, err := proto.Marshal(&macpv1.GetPolicyRequest{PolicyId: id})
	if err != nil {
		return rules.PolicyDescriptor{}, false, err
	}
	resp := &frame{}
	err = r.up.Invoke(ctx, service+"GetPolicy", &frame{b: req}, resp)
	if status.Code(err) == codes.NotFound {
		return rules.PolicyDescriptor{}, false, nil
	}
	if err != nil {
		return rules.PolicyDescriptor{}, false, fmt.Errorf("get policy %s: %w", id, err)
	}
	var out macpv1.GetPolicyResponse
	if err := proto.Unmarshal(resp.b, &out); err != nil {
		return rules.PolicyDescriptor{}, false, err
	}
	pd := out.GetPolicyDescriptor()
	if pd.GetPolicyId() != id {
		return rules.PolicyDescriptor{}, false, nil
	}
	d, err := rules.DescriptorOf(pd)
	if err != nil {
		return rules.PolicyDescriptor{}, false, err
	}
	return d, true, nil
}

// boundPolicy is the governance a rebuilt session binds: policy.default
// (nil), the one Warden recorded it bound (bound, when it names the
// session's policy_version), else one Warden cannot know.
func boundPolicy(id string, bound *rules.Governance) *rules.Governance {
	switch {
	case id == "" || id == rules.DefaultPolicyID:
		return nil
	case bound != nil && bound.ID == id:
		return bound
	}
	return rules.UnknownPolicy(id)
}
