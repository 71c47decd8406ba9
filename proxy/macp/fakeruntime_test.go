package macp

import (
	"context"
	"encoding/base64"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// fakeRuntime is a MACP runtime that accepts everything it is sent, as much
// of one as the transcripts need: Send acks every envelope (a duplicate when
// the same sender sent the message_id before, SESSION_NOT_FOUND for a session
// it never saw started), the control RPCs ack every session it knows, and
// GetSession answers from the SessionStarts it accepted. It keeps what it
// received, so a test can tell what the sidecar forwarded.
type fakeRuntime struct {
	macpv1.UnimplementedMACPRuntimeServiceServer

	mu       sync.Mutex
	sessions map[string]*fakeSession
	received []string // message ids and control RPCs, in arrival order
}

type fakeSession struct {
	meta *macpv1.SessionMetadata
	seen map[[2]string]bool // {sender, message_id}
}

// startFakeRuntime serves a fakeRuntime on a loopback port until the test
// ends and returns it with its address.
func startFakeRuntime(t testing.TB) (*fakeRuntime, string) {
	t.Helper()
	return startFakeRuntimeWith(t, func(f *fakeRuntime) macpv1.MACPRuntimeServiceServer { return f })
}

// startFakeRuntimeWith serves the runtime wrap makes of a fakeRuntime.
func startFakeRuntimeWith(t testing.TB, wrap func(*fakeRuntime) macpv1.MACPRuntimeServiceServer, also ...func(*grpc.Server)) (*fakeRuntime, string) {
	t.Helper()
	return startFakeRuntimeOpts(t, wrap, nil, also...)
}

// startFakeRuntimeOpts is startFakeRuntimeWith with the runtime's server
// options.
func startFakeRuntimeOpts(t testing.TB, wrap func(*fakeRuntime) macpv1.MACPRuntimeServiceServer, opts []grpc.ServerOption, also ...func(*grpc.Server)) (*fakeRuntime, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRuntime{sessions: map[string]*fakeSession{}}
	srv := grpc.NewServer(opts...)
	macpv1.RegisterMACPRuntimeServiceServer(srv, wrap(f))
	for _, register := range also {
		register(srv)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, lis.Addr().String()
}

// forwarded returns how many calls reached the runtime.
func (f *fakeRuntime) forwarded() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.received)
}

func (f *fakeRuntime) Send(_ context.Context, req *macpv1.SendRequest) (*macpv1.SendResponse, error) {
	env := req.GetEnvelope()
	if env == nil {
		return nil, status.Error(codes.InvalidArgument, "no envelope")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received = append(f.received, env.GetMessageId())
	ack := &macpv1.Ack{Ok: true, MessageId: env.GetMessageId(), SessionId: env.GetSessionId(), SessionState: macpv1.SessionState_SESSION_STATE_OPEN}
	s := f.sessions[env.GetSessionId()]
	if s == nil && env.GetMessageType() == macp.TypeSessionStart {
		var p macpv1.SessionStartPayload
		_ = proto.Unmarshal(env.GetPayload(), &p)
		s = &fakeSession{seen: map[[2]string]bool{}, meta: &macpv1.SessionMetadata{
			SessionId: env.GetSessionId(), Mode: env.GetMode(), State: macpv1.SessionState_SESSION_STATE_OPEN,
			Initiator: env.GetSender(), Participants: p.GetParticipants(), ModeVersion: p.GetModeVersion(),
			ConfigurationVersion: p.GetConfigurationVersion(), PolicyVersion: p.GetPolicyVersion(),
		}}
		f.sessions[env.GetSessionId()] = s
	}
	if s == nil {
		ack.Ok, ack.SessionState = false, macpv1.SessionState_SESSION_STATE_UNSPECIFIED
		ack.Error = &macpv1.MACPError{Code: string(rules.CodeSessionNotFound), Message: "session not found", SessionId: env.GetSessionId(), MessageId: env.GetMessageId()}
		return &macpv1.SendResponse{Ack: ack}, nil
	}
	key := [2]string{env.GetSender(), env.GetMessageId()}
	ack.Duplicate = s.seen[key]
	s.seen[key] = true
	return &macpv1.SendResponse{Ack: ack}, nil
}

// control acks a control RPC on a session the runtime knows.
func (f *fakeRuntime) control(op, sessionID string) (*macpv1.Ack, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received = append(f.received, op)
	if f.sessions[sessionID] == nil {
		return nil, status.Error(codes.NotFound, "SESSION_NOT_FOUND: session not found")
	}
	return &macpv1.Ack{Ok: true, SessionId: sessionID}, nil
}

func (f *fakeRuntime) CancelSession(_ context.Context, req *macpv1.CancelSessionRequest) (*macpv1.CancelSessionResponse, error) {
	ack, err := f.control("CancelSession", req.GetSessionId())
	return &macpv1.CancelSessionResponse{Ack: ack}, err
}

func (f *fakeRuntime) SuspendSession(_ context.Context, req *macpv1.SuspendSessionRequest) (*macpv1.SuspendSessionResponse, error) {
	ack, err := f.control("SuspendSession", req.GetSessionId())
	return &macpv1.SuspendSessionResponse{Ack: ack}, err
}

func (f *fakeRuntime) ResumeSession(_ context.Context, req *macpv1.ResumeSessionRequest) (*macpv1.ResumeSessionResponse, error) {
	ack, err := f.control("ResumeSession", req.GetSessionId())
	return &macpv1.ResumeSessionResponse{Ack: ack}, err
}

// GetSession answers a session it does not hold as the runtime does.
func (f *fakeRuntime) GetSession(ctx context.Context, req *macpv1.GetSessionRequest) (*macpv1.GetSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[req.GetSessionId()]
	if s == nil {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("macp-error-code", string(rules.CodeSessionNotFound)))
		return nil, status.Errorf(codes.NotFound, "Session '%s' not found", req.GetSessionId())
	}
	return &macpv1.GetSessionResponse{Metadata: proto.Clone(s.meta).(*macpv1.SessionMetadata)}, nil
}

// ListSessions pages over every session as the reference runtime does: in
// ascending id order, page_size 0 meaning 100 and capped at 1000, with
// next_page_token the base64url of "v1:" and the page's last id.
func (f *fakeRuntime) ListSessions(_ context.Context, req *macpv1.ListSessionsRequest) (*macpv1.ListSessionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, status.Error(codes.InvalidArgument, "INVALID_ARGUMENT: page_size must not be negative")
	case size == 0:
		size = 100
	}
	size = min(size, 1000)
	after := ""
	if tok := req.GetPageToken(); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		id, ok := strings.CutPrefix(string(raw), "v1:")
		if err != nil || !ok {
			return nil, status.Error(codes.InvalidArgument, "INVALID_ARGUMENT: page_token is not a valid continuation token")
		}
		after = id
	}
	ids := slices.Sorted(maps.Keys(f.sessions))
	ids = slices.DeleteFunc(ids, func(id string) bool { return id <= after })
	out := &macpv1.ListSessionsResponse{}
	for _, id := range ids[:min(size, len(ids))] {
		out.Sessions = append(out.Sessions, proto.Clone(f.sessions[id].meta).(*macpv1.SessionMetadata))
	}
	if len(ids) > size {
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte("v1:" + ids[size-1]))
	}
	return out, nil
}
