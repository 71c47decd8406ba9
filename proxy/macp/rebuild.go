package macp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
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
// macp.UnknownPolicy: never the definition registered under its id now,
// which may have been withdrawn or replaced since the session started (the
// runtime keeps the one bound at SessionStart and shows only its id).
func (r *Rebuilder) Rebuild(ctx context.Context, sessionID string, bound *macp.Governance) (*macp.Session, error) {
	meta, err := sessionMetadata(ctx, r.up, sessionID)
	if c := status.Code(err); c == codes.NotFound || c == codes.PermissionDenied {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := r.history(sctx, sessionID)
	if err != nil {
		return nil, err
	}
	rs := &replayState{id: sessionID, meta: meta, gov: boundPolicy(meta.GetPolicyVersion(), bound), log: r.log}
	return rs.run(sctx, h, r.Quiet)
}

// history is a session's accepted history as the runtime replays it on a
// StreamSession subscription.
type history struct {
	frames chan *frame
	errc   chan error // the error that ended the stream, io.EOF included
}

// errQuiet means the history paused for longer than the Rebuilder's Quiet.
var errQuiet = errors.New("the runtime paused its replay")

// history subscribes to the session on a StreamSession and returns its
// history, read by a goroutine that ends with the stream or ctx.
func (r *Rebuilder) history(ctx context.Context, sessionID string) (*history, error) {
	cs, err := r.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodStream)
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
	h := &history{frames: make(chan *frame), errc: make(chan error, 1)}
	go h.read(ctx, cs)
	return h, nil
}

// read hands the stream's messages to next until the stream or ctx ends.
func (h *history) read(ctx context.Context, cs grpc.ClientStream) {
	for {
		f := &frame{}
		if err := cs.RecvMsg(f); err != nil {
			h.errc <- err
			return
		}
		select {
		case h.frames <- f:
		case <-ctx.Done():
			return
		}
	}
}

// next waits for the history's next message: the error is the stream's
// (io.EOF at its end), errQuiet after a pause of quiet, or ctx's.
func (h *history) next(ctx context.Context, quiet time.Duration) (*frame, error) {
	select {
	case f := <-h.frames:
		return f, nil
	case err := <-h.errc:
		return nil, err
	case <-time.After(quiet):
		return nil, errQuiet
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
func finish(s *macp.Session, meta *macpv1.SessionMetadata, last, now int64) *macp.Session {
	st := macp.State(meta.GetState())
	if st == macp.StateSuspended && s.State != macp.StateSuspended {
		from := meta.GetStartedAtUnixMs()
		for _, a := range meta.GetParticipantActivity() {
			from = max(from, a.GetLastMessageAtUnixMs())
		}
		if from <= 0 {
			from = last
		}
		sp := s.Suspension()
		sp.FromMs, sp.AtMs = from, max(now, from)
		s.SetSuspension(sp)
	}
	if st != macp.StateUnspecified {
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
func banked(s *macp.Session, meta *macpv1.SessionMetadata, wall int64) int64 {
	started, expires := meta.GetStartedAtUnixMs(), meta.GetExpiresAtUnixMs()
	if started <= 0 || expires <= 0 {
		return 0
	}
	b := min(expires-started-(s.DeadlineMs-s.StartedAtMs), wall-started)
	if c := s.Suspension().MaxMs; c > 0 {
		b = min(b, c)
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

// Policy fetches a registered policy from the runtime (sessions.PolicySource).
func (r *Rebuilder) Policy(ctx context.Context, id string) (macp.PolicyDescriptor, bool, error) {
	req, err := proto.Marshal(&macpv1.GetPolicyRequest{PolicyId: id})
	if err != nil {
		return macp.PolicyDescriptor{}, false, err
	}
	resp := &frame{}
	err = r.up.Invoke(ctx, service+"GetPolicy", &frame{b: req}, resp)
	if status.Code(err) == codes.NotFound {
		return macp.PolicyDescriptor{}, false, nil
	}
	if err != nil {
		return macp.PolicyDescriptor{}, false, fmt.Errorf("get policy %s: %w", id, err)
	}
	var out macpv1.GetPolicyResponse
	if err := proto.Unmarshal(resp.b, &out); err != nil {
		return macp.PolicyDescriptor{}, false, err
	}
	pd := out.GetPolicyDescriptor()
	if pd.GetPolicyId() != id {
		return macp.PolicyDescriptor{}, false, nil
	}
	d, err := macp.DescriptorOf(pd)
	if err != nil {
		return macp.PolicyDescriptor{}, false, err
	}
	return d, true, nil
}

// boundPolicy is the governance a rebuilt session binds: policy.default
// (nil), the one Warden recorded it bound (bound, when it names the
// session's policy_version), else one Warden cannot know.
func boundPolicy(id string, bound *macp.Governance) *macp.Governance {
	switch {
	case id == "" || id == macp.DefaultPolicyID:
		return nil
	case bound != nil && bound.ID == id:
		return bound
	}
	return macp.UnknownPolicy(id)
}
