package macp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
	handoffv1 "github.com/agentwarden/warden/wire/modes/handoff/v1"
	taskv1 "github.com/agentwarden/warden/wire/modes/task/v1"
)

// historyConn is a runtime that answers GetSession with meta and a
// StreamSession subscription with history.
type historyConn struct {
	meta    *macpv1.SessionMetadata
	history []*macpv1.Envelope
}

func (h *historyConn) Invoke(_ context.Context, _ string, _, reply any, _ ...grpc.CallOption) error {
	b, err := proto.Marshal(&macpv1.GetSessionResponse{Metadata: h.meta})
	reply.(*frame).b = b
	return err
}

func (h *historyConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return &replayStream{out: h.history}, nil
}

// replayStream sends its envelopes, then ends.
type replayStream struct {
	grpc.ClientStream
	out []*macpv1.Envelope
}

func (s *replayStream) SendMsg(any) error            { return nil }
func (s *replayStream) CloseSend() error             { return nil }
func (s *replayStream) Header() (metadata.MD, error) { return nil, nil }
func (s *replayStream) Trailer() metadata.MD         { return nil }
func (s *replayStream) Context() context.Context     { return context.Background() }
func (s *replayStream) RecvMsg(m any) error {
	if len(s.out) == 0 {
		return io.EOF
	}
	b, err := proto.Marshal(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Envelope{Envelope: s.out[0]}})
	s.out = s.out[1:]
	m.(*frame).b = b
	return err
}

// TestRebuildSuspensions: the runtime's SessionSuspend and SessionResume
// annotations in a session's history are replayed with their times, so that
// the time suspended is banked into the deadline as the live decisions did:
// a message accepted after the original deadline but before the banked one
// rebuilds, rather than reading as a divergence that refuses the session
// until it expires. A suspension the history does not date (the reference
// runtime never shows when one began) is taken as begun at the rebuild, not
// at the last message: the old dating refused Resumes the runtime accepted.
func TestRebuildSuspensions(t *testing.T) {
	t0 := time.Now().Add(-100 * time.Second).UnixMilli() // the TTL is 60 s
	const sid = "5b1a1a4e-0c7e-4c9e-9a57-3d0e7c1f6a10"
	start := &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: macp.TypeSessionStart, MessageId: "start", SessionId: sid, Sender: "agent://planner", TimestampUnixMs: t0,
		Payload: mustProto(t, &macpv1.SessionStartPayload{Participants: []string{"agent://planner", "agent://worker"}, ModeVersion: "1.0.0", ConfigurationVersion: "c", TtlMs: 60_000})}
	annotation := func(typ string, at int64) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: typ, MessageId: typ + "-1", SessionId: sid, Sender: "agent://planner", TimestampUnixMs: at}
	}
	request := func(at int64) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeTask, MessageType: "TaskRequest", MessageId: "req", SessionId: sid, Sender: "agent://planner", TimestampUnixMs: at,
			Payload: mustProto(t, &taskv1.TaskRequestPayload{TaskId: "t1", RequestedAssignee: "agent://worker"})}
	}
	const none = -1 // no start or expiry in the metadata
	for _, tc := range []struct {
		name             string
		state            macpv1.SessionState
		started, expires int64 // the metadata's, ms after t0
		history          []*macpv1.Envelope
		wantErr          error
		want             macp.State
		deadline         int64 // ms after t0
		suspendedFrom    int64 // ms after t0, the earliest a suspension not dated can have begun
	}{
		{"no suspension", macpv1.SessionState_SESSION_STATE_OPEN, 0, 60_000,
			[]*macpv1.Envelope{start, request(t0 + 30_000)}, nil, macp.StateOpen, 60_000, 0},
		{"a message past the deadline, no suspension", macpv1.SessionState_SESSION_STATE_OPEN, 0, 60_000,
			[]*macpv1.Envelope{start, request(t0 + 90_000)}, errDiverged, 0, 0, 0},
		// The reference runtime: the history does not show suspensions, the
		// metadata's deadline holds the time they banked.
		{"resumed, banked in the metadata only", macpv1.SessionState_SESSION_STATE_OPEN, 0, 120_000,
			[]*macpv1.Envelope{start, request(t0 + 90_000)}, nil, macp.StateOpen, 120_000, 0},
		{"suspended, the metadata only", macpv1.SessionState_SESSION_STATE_SUSPENDED, 0, 60_000,
			[]*macpv1.Envelope{start, request(t0 + 5_000)}, nil, macp.StateSuspended, 60_000, 5_000},
		{"banked beyond the time passed", macpv1.SessionState_SESSION_STATE_OPEN, 0, 900_000,
			[]*macpv1.Envelope{start, request(t0 + 90_000)}, nil, macp.StateOpen, 160_000, 0}, // the test's clock moved on a little: see slack
		// A runtime whose history shows them: replayed with their times.
		{"resumed, annotated and banked in the metadata", macpv1.SessionState_SESSION_STATE_OPEN, 0, 120_000,
			[]*macpv1.Envelope{start, annotation(macp.TypeSessionSuspend, t0+10_000), annotation(macp.TypeSessionResume, t0+70_000), request(t0 + 90_000)}, nil, macp.StateOpen, 120_000, 0},
		{"resumed, annotated only", macpv1.SessionState_SESSION_STATE_OPEN, none, 200_000,
			[]*macpv1.Envelope{start, annotation(macp.TypeSessionSuspend, t0+10_000), annotation(macp.TypeSessionResume, t0+70_000), request(t0 + 90_000)}, nil, macp.StateOpen, 120_000, 0},
		// The replay ends with the last counted message: an annotation after
		// it is not waited for.
		{"suspended, annotated after the last message", macpv1.SessionState_SESSION_STATE_SUSPENDED, 0, 60_000,
			[]*macpv1.Envelope{start, request(t0 + 5_000), annotation(macp.TypeSessionSuspend, t0+10_000)}, nil, macp.StateSuspended, 60_000, 5_000},
		{"resumed without a suspension", macpv1.SessionState_SESSION_STATE_OPEN, 0, 60_000,
			[]*macpv1.Envelope{start, annotation(macp.TypeSessionResume, t0+20_000)}, errDiverged, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := t0 + tc.started
			if tc.started == none {
				started = 0
			}
			conn := &historyConn{
				meta: &macpv1.SessionMetadata{SessionId: sid, Mode: macp.ModeTask, State: tc.state, Initiator: "agent://planner",
					Participants: []string{"agent://planner", "agent://worker"}, StartedAtUnixMs: started, ExpiresAtUnixMs: t0 + tc.expires,
					ParticipantActivity: []*macpv1.ParticipantActivity{{ParticipantId: "agent://planner", MessageCount: 1, LastMessageAtUnixMs: t0 + 5_000}}},
				history: tc.history,
			}
			rb := &Rebuilder{up: conn, log: slog.New(slog.DiscardHandler), Quiet: 300 * time.Millisecond}
			before := time.Now().UnixMilli()
			s, err := rb.Rebuild(context.Background(), sid, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("rebuild: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			const slack = 2_000 // the wall clock bounds what is banked; the test takes time
			if s.State != tc.want || s.DeadlineMs-t0 < tc.deadline || s.DeadlineMs-t0 > tc.deadline+slack {
				t.Errorf("rebuilt %s, deadline t0%+d ms; want %s, t0%+d ms", s.State, s.DeadlineMs-t0, tc.want, tc.deadline)
			}
			// Not dated by the history: suspended since at least its last
			// message and at most now, taken as now (the runtime accepts a
			// Resume until max_suspend_ms after the suspension began).
			if s.State == macp.StateSuspended && (s.Suspension().FromMs-t0 != tc.suspendedFrom || s.Suspension().AtMs < before) {
				t.Errorf("suspended between t0%+d ms and t0%+d ms, want from t0%+d ms, taken as since the rebuild (t0%+d ms)",
					s.Suspension().FromMs-t0, s.Suspension().AtMs-t0, tc.suspendedFrom, before-t0)
			}
		})
	}
}

func mustProto(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRebuildImplicitAccept: the implicit HandoffAccept the runtime
// synthesizes into a session's history (its own entry, counted in no
// participant's activity) is replayed as the runtime replays it, not refused
// as a client's forged implicit accept: before, the rebuild diverged on it
// and the session was refused until it expired. An entry the runtime would
// not have synthesized still diverges.
func TestRebuildImplicitAccept(t *testing.T) {
	const sid = "6c2b2b5f-1d8f-4dae-8b68-4e1f8d207b21"
	const owner, target = "agent://owner", "agent://target"
	t0 := time.Now().Add(-10 * time.Second).UnixMilli()
	gov, err := macp.Bind(macp.PolicyDescriptor{PolicyID: "policy.implicit", Mode: macp.ModeHandoff, SchemaVersion: 2,
		Rules: map[string]any{"acceptance": map[string]any{"implicit_accept_timeout_ms": float64(1000)}, "commitment": map[string]any{"authority": "initiator_only"}}})
	if err != nil {
		t.Fatal(err)
	}
	env := func(sender, typ, id string, at int64, p proto.Message) *macpv1.Envelope {
		return &macpv1.Envelope{MacpVersion: "1.0", Mode: macp.ModeHandoff, MessageType: typ, MessageId: id, SessionId: sid, Sender: sender, TimestampUnixMs: at, Payload: mustProto(t, p)}
	}
	start := env(owner, macp.TypeSessionStart, "start", t0, &macpv1.SessionStartPayload{Participants: []string{owner, target},
		ModeVersion: "1.0.0", ConfigurationVersion: "c", PolicyVersion: "policy.implicit", TtlMs: 60_000})
	offer := env(owner, "HandoffOffer", "offer", t0+100, &handoffv1.HandoffOfferPayload{HandoffId: "h1", TargetParticipant: target, Scope: "s"})
	implicit := func(sender, id, by string, mark bool) *macpv1.Envelope {
		return env(sender, "HandoffAccept", id, t0+1100, &handoffv1.HandoffAcceptPayload{HandoffId: "h1", AcceptedBy: by, Reason: "implicit accept (timeout)", Implicit: mark})
	}
	synthetic := implicit(target, "implicit-accept:h1", target, true)
	handoffContext := env(owner, "HandoffContext", "ctx", t0+2000, &handoffv1.HandoffContextPayload{HandoffId: "h1", ContentType: "text/plain"})
	decline := env(target, "HandoffDecline", "decline", t0+3000, &handoffv1.HandoffDeclinePayload{HandoffId: "h1", DeclinedBy: target})
	for _, tc := range []struct {
		name    string
		history []*macpv1.Envelope
		wantErr error
	}{
		{"synthesized, then a message", []*macpv1.Envelope{start, offer, synthetic, handoffContext}, nil},
		// a client's explicit accept under the reserved id: revision 1 or
		// less let one through (counted as the target's)
		{"a client's accept, not marked implicit", []*macpv1.Envelope{start, offer, implicit(target, "implicit-accept:h1", target, false), handoffContext}, nil},
		{"another id", []*macpv1.Envelope{start, offer, implicit(target, "implicit-accept:h2", target, true), handoffContext}, errDiverged},
		{"sent as the owner", []*macpv1.Envelope{start, offer, implicit(owner, "implicit-accept:h1", target, true), handoffContext}, errDiverged},
		{"naming another", []*macpv1.Envelope{start, offer, implicit(target, "implicit-accept:h1", owner, true), handoffContext}, errDiverged},
		{"after a decline", []*macpv1.Envelope{start, offer, decline, synthetic}, errDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &historyConn{
				meta: &macpv1.SessionMetadata{SessionId: sid, Mode: macp.ModeHandoff, State: macpv1.SessionState_SESSION_STATE_OPEN, Initiator: owner,
					Participants: []string{owner, target}, StartedAtUnixMs: t0, ExpiresAtUnixMs: t0 + 60_000, PolicyVersion: "policy.implicit",
					// the runtime counts the clients' messages only
					ParticipantActivity: []*macpv1.ParticipantActivity{{ParticipantId: owner, MessageCount: 2, LastMessageAtUnixMs: t0 + 2000}}},
				history: tc.history,
			}
			if tc.history[2] == decline || !macp.Synthesized(tc.history[2]) {
				conn.meta.ParticipantActivity = append(conn.meta.ParticipantActivity, &macpv1.ParticipantActivity{ParticipantId: target, MessageCount: 1})
			}
			rb := &Rebuilder{up: conn, log: slog.New(slog.DiscardHandler), Quiet: 300 * time.Millisecond}
			s, err := rb.Rebuild(context.Background(), sid, gov)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("rebuild: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			now := time.Now().UnixMilli()
			if out := macp.Step(s, decline, target, now); out.Verdict.OK() {
				t.Errorf("a HandoffDecline after the implicit accept was allowed on the rebuilt session; the runtime refuses it")
			}
			if out := macp.Step(s, handoffContext, owner, now); !out.Duplicate {
				t.Errorf("the HandoffContext after the implicit accept was not replayed (its resend reads as new: %s)", out.Verdict.Reason)
			}
		})
	}
}
