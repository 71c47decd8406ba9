package macp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/rules"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// recvOne reads the single request of a unary call.
func recvOne(ss grpc.ServerStream) (*frame, error) {
	f := &frame{}
	if err := ss.RecvMsg(f); err != nil {
		return nil, err
	}
	return f, nil
}

// invoke forwards one unary request and relays the upstream's headers.
func (s *Server) invoke(ss grpc.ServerStream, method string, req *frame) (*frame, error) {
	var header, trailer metadata.MD
	resp := &frame{}
	err := s.up.Invoke(outgoing(ss.Context()), method, req, resp, grpc.Header(&header), grpc.Trailer(&trailer))
	if len(header) > 0 {
		_ = ss.SetHeader(header)
	}
	ss.SetTrailer(trailer)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// refusal is the Ack the runtime itself sends for a refused message.
func refusal(d proxy.Decision, sessionID, messageID string) *macpv1.Ack {
	return &macpv1.Ack{
		Ok: false, MessageId: messageID, SessionId: sessionID,
		Error: &macpv1.MACPError{Code: string(d.Code), Message: d.Message + " (warden decision " + d.ID + ")", SessionId: sessionID, MessageId: messageID},
	}
}

// undecided maps "could not decide" onto the wire: refused, retryable.
func undecided(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, "warden could not decide this message; retry: "+err.Error())
}

// send decides one Send and forwards it when allowed. It is registered as
// a unary method (cheaper than the generic stream path every other call
// takes); the answer is either Warden's refusal or the runtime's bytes.
func (s *Server) send(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	req := &frame{}
	if err := dec(req); err != nil {
		return nil, err
	}
	var sr macpv1.SendRequest
	if err := proto.Unmarshal(req.b, &sr); err != nil || sr.GetEnvelope() == nil {
		return nil, status.Error(codes.InvalidArgument, "SendRequest does not decode or carries no envelope")
	}
	env := sr.GetEnvelope()
	d, err := s.enf.Enforce(ctx, proxy.Request{Credentials: credentialsOf(ctx), Envelope: env})
	if err != nil {
		return nil, undecided(err)
	}
	if !d.Allow {
		return &macpv1.SendResponse{Ack: refusal(d, env.GetSessionId(), env.GetMessageId())}, nil
	}
	var header, trailer metadata.MD
	resp := &frame{}
	err = s.up.Invoke(outgoing(ctx), methodSend, req, resp, grpc.Header(&header), grpc.Trailer(&trailer))
	if len(header) > 0 {
		_ = grpc.SetHeader(ctx, header)
	}
	_ = grpc.SetTrailer(ctx, trailer)
	if err != nil {
		d.Settle(false)
		return nil, err
	}
	var out macpv1.SendResponse
	accepted := proto.Unmarshal(resp.b, &out) == nil && out.GetAck().GetOk()
	d.Settle(accepted && !out.GetAck().GetDuplicate())
	return resp, nil
}

// control decides CancelSession, SuspendSession and ResumeSession.
func (s *Server) control(ss grpc.ServerStream, op string) error {
	req, err := recvOne(ss)
	if err != nil {
		return err
	}
	var cr macpv1.CancelSessionRequest // the three requests share {session_id, reason}
	if err := proto.Unmarshal(req.b, &cr); err != nil || cr.GetSessionId() == "" {
		return status.Error(codes.InvalidArgument, op+" request does not decode or names no session")
	}
	d, err := s.enf.Enforce(ss.Context(), proxy.Request{Credentials: credentialsOf(ss.Context()), Op: op, SessionID: cr.GetSessionId()})
	if err != nil {
		return undecided(err)
	}
	if !d.Allow {
		// The runtime refuses control RPCs with a gRPC status, not an Ack.
		return status.Error(codes.Code(d.Code.GRPCStatus()), string(d.Code)+": "+d.Message+" (warden decision "+d.ID+")")
	}
	resp, err := s.invoke(ss, service+op, req)
	if err != nil {
		d.Settle(false)
		return err
	}
	var out macpv1.CancelSessionResponse
	d.Settle(proto.Unmarshal(resp.b, &out) == nil && out.GetAck().GetOk())
	return ss.SendMsg(resp)
}

// member reports whether id takes part in the session.
func member(m *macpv1.SessionMetadata, id string) bool {
	return m.GetInitiator() == id || slices.Contains(m.GetParticipants(), id)
}

// authedUnary authenticates a unary call, forwards it and decodes the
// response into out, so the caller can filter what the caller may see.
func (s *Server) authedUnary(ss grpc.ServerStream, method string, out proto.Message) (authn.Principal, *frame, error) {
	p, err := s.principal(ss.Context())
	if err != nil {
		return p, nil, err
	}
	req, err := recvOne(ss)
	if err != nil {
		return p, nil, err
	}
	resp, err := s.invoke(ss, method, req)
	if err != nil {
		return p, nil, err
	}
	if err := proto.Unmarshal(resp.b, out); err != nil {
		return p, nil, status.Error(codes.Internal, "the runtime's "+method+" response does not decode")
	}
	return p, resp, nil
}

// getSession shows a session only to its participants; to anyone else it
// looks like an unknown session.
func (s *Server) getSession(ss grpc.ServerStream) error {
	var out macpv1.GetSessionResponse
	p, resp, err := s.authedUnary(ss, methodGet, &out)
	if err != nil {
		return err
	}
	if !member(out.GetMetadata(), p.ID) {
		return status.Error(codes.NotFound, "session not found")
	}
	return ss.SendMsg(resp)
}

// listSessions lists only the caller's sessions.
func (s *Server) listSessions(ss grpc.ServerStream) error {
	var out macpv1.ListSessionsResponse
	p, resp, err := s.authedUnary(ss, methodList, &out)
	if err != nil {
		return err
	}
	kept := out.Sessions[:0]
	for _, m := range out.GetSessions() {
		if member(m, p.ID) {
			kept = append(kept, m)
		}
	}
	if len(kept) == len(out.GetSessions()) {
		return ss.SendMsg(resp) // untouched
	}
	out.Sessions = kept
	return ss.SendMsg(&out)
}

// watchSessions relays only the lifecycle events of the caller's sessions.
func (s *Server) watchSessions(ss grpc.ServerStream) error {
	p, err := s.principal(ss.Context())
	if err != nil {
		return err
	}
	return s.relay(ss, methodWatch, func(f *frame) (bool, error) {
		var ev macpv1.WatchSessionsResponse
		if err := proto.Unmarshal(f.b, &ev); err != nil {
			return false, status.Error(codes.Internal, "upstream WatchSessionsResponse does not decode")
		}
		return member(ev.GetEvent().GetSession(), p.ID), nil
	})
}

// registerPolicy forwards a registration and, when the runtime accepts it,
// records the descriptor so sessions can bind it.
func (s *Server) registerPolicy(ss grpc.ServerStream) error {
	if _, err := s.principal(ss.Context()); err != nil {
		return err
	}
	req, err := recvOne(ss)
	if err != nil {
		return err
	}
	resp, err := s.invoke(ss, methodRegisterPo, req)
	if err != nil {
		return err
	}
	var in macpv1.RegisterPolicyRequest
	var out macpv1.RegisterPolicyResponse
	if proto.Unmarshal(req.b, &in) == nil && proto.Unmarshal(resp.b, &out) == nil && out.GetOk() {
		pd := in.GetPolicyDescriptor()
		d := rules.PolicyDescriptor{PolicyID: pd.GetPolicyId(), Mode: pd.GetMode(), Description: pd.GetDescription(), SchemaVersion: pd.GetSchemaVersion()}
		if err := json.Unmarshal([]byte(pd.GetRules()), &d.Rules); err != nil {
			s.log.Warn("registered policy has rules that are not JSON; sessions binding it will be refused", "policy_id", d.PolicyID, "err", err)
		} else if err := s.enf.Policies().Register(d); err != nil {
			s.log.Warn("could not record a registered policy", "policy_id", d.PolicyID, "err", err)
		}
	}
	return ss.SendMsg(resp)
}

// pipe forwards a call of any shape untouched.
func (s *Server) pipe(ss grpc.ServerStream, method string) error {
	return s.relay(ss, method, nil)
}

// relay runs a call of any shape against the upstream: client frames go up
// as they come, upstream frames come down through keep (nil keeps all).
func (s *Server) relay(ss grpc.ServerStream, method string, keep func(*frame) (bool, error)) error {
	ctx, cancel := context.WithCancel(outgoing(ss.Context()))
	defer cancel()
	cs, err := s.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
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
		_ = ss.SendHeader(h)
	}
	for {
		f := &frame{}
		err := cs.RecvMsg(f)
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			return err
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
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// streamSession enforces every envelope a client sends on a StreamSession and
// commits the state when the runtime echoes the envelope back.
func (s *Server) streamSession(ss grpc.ServerStream) error {
	p, err := s.principal(ss.Context())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(outgoing(ss.Context()))
	defer cancel()
	cs, err := s.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, methodStream)
	if err != nil {
		return err
	}
	var (
		mu      sync.Mutex // serializes writes to the client and guards pending
		pending = map[string]proxy.Decision{}
	)
	settleAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for id, d := range pending {
			d.Settle(false)
			delete(pending, id)
		}
	}
	defer settleAll()
	toClient := func(m any) error {
		mu.Lock()
		defer mu.Unlock()
		return ss.SendMsg(m)
	}

	go func() {
		for {
			f := &frame{}
			if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					_ = cs.CloseSend()
				} else {
					cancel()
				}
				return
			}
			var req macpv1.StreamSessionRequest
			if err := proto.Unmarshal(f.b, &req); err != nil {
				_ = toClient(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: &macpv1.MACPError{Code: string(rules.CodeInvalidEnvelope), Message: "StreamSessionRequest does not decode"}}})
				continue
			}
			if env := req.GetEnvelope(); env != nil {
				d, err := s.enf.Enforce(ctx, proxy.Request{Principal: &p, Envelope: env})
				if err != nil {
					_ = toClient(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: &macpv1.MACPError{Code: string(rules.CodeInternal), Message: "warden could not decide this message; retry", SessionId: env.GetSessionId(), MessageId: env.GetMessageId()}}})
					continue
				}
				if !d.Allow {
					a := refusal(d, env.GetSessionId(), env.GetMessageId())
					_ = toClient(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: a.GetError()}})
					continue
				}
				mu.Lock()
				if old, ok := pending[env.GetMessageId()]; ok {
					old.Settle(false)
				}
				pending[env.GetMessageId()] = d
				mu.Unlock()
			} else if sid := req.GetSubscribeSessionId(); sid != "" {
				if err := s.checkMember(ctx, sid, p); err != nil {
					_ = toClient(&macpv1.StreamSessionResponse{Response: &macpv1.StreamSessionResponse_Error{Error: &macpv1.MACPError{Code: string(rules.CodeForbidden), Message: "only participants may subscribe to a session", SessionId: sid}}})
					continue
				}
			}
			if err := cs.SendMsg(f); err != nil {
				return
			}
		}
	}()

	if h, err := cs.Header(); err == nil && len(h) > 0 {
		_ = ss.SendHeader(h)
	}
	for {
		f := &frame{}
		err := cs.RecvMsg(f)
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		var resp macpv1.StreamSessionResponse
		if proto.Unmarshal(f.b, &resp) == nil {
			mu.Lock()
			if env := resp.GetEnvelope(); env != nil {
				if d, ok := pending[env.GetMessageId()]; ok {
					d.Settle(true) // the runtime accepted and echoed it
					delete(pending, env.GetMessageId())
				}
			} else if e := resp.GetError(); e != nil {
				if d, ok := pending[e.GetMessageId()]; ok {
					d.Settle(false)
					delete(pending, e.GetMessageId())
				}
			}
			mu.Unlock()
		}
		if err := toClient(f); err != nil {
			return err
		}
	}
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
