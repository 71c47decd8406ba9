package macp

// The unary calls Warden decides or filters, written once for the two
// sidecar doors (the grpc-go server and the frame relay): a door reads the
// call's one request message, hands it to unary with a forward that sends
// it to the runtime, and maps the outcome onto its wire once (grpcForward,
// relayForward).

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/authn"
	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/admission"
	"github.com/agentwarden/warden/rules"
	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// forward sends a call's request message to the runtime and returns the
// runtime's response message. Its error is the runtime's own status, a
// notReached when the call never reached the runtime, or the status a
// client is told when the runtime's answer did not come (upstreamError).
type forward func() ([]byte, error)

// notReached is the error of a call that never reached the runtime, so
// Warden's state still follows the runtime's; wire is the client's answer.
type notReached struct{ wire error }

func (e notReached) Error() string              { return e.wire.Error() }
func (e notReached) GRPCStatus() *status.Status { return status.Convert(e.wire) }

// refusal is a refusal of Warden's as an error: each door maps it onto its
// wire with its MACP code (grpc-go: refuse; the relay: refusalAnswer).
type refusal struct{ admission.Refusal }

func (r refusal) Error() string              { return r.Text }
func (r refusal) GRPCStatus() *status.Status { return status.New(r.Status, r.Text) }

// decidedUnary reports whether the sidecar answers call itself with unary:
// one request message, one answer.
func decidedUnary(call admission.Call) bool {
	switch call {
	case admission.CallSend, admission.CallControl, admission.CallGetSession, admission.CallListSessions, admission.CallRegisterPolicy, admission.CallUnregisterPolicy:
		return true
	}
	return false
}

// unary answers one call decidedUnary takes (or, on the relay, another
// unary call forwarded after authentication), admitted as a, msg its
// request message and upctx the context of the calls made for it to the
// runtime: with the runtime's response message (resp), or an answer of
// Warden's own (a message, or an error: a refusal, or a status).
func (s *Server) unary(ctx, upctx context.Context, a *admission.Admission, msg []byte, fwd forward) (resp []byte, own proto.Message, err error) {
	switch a.Call {
	case admission.CallSend, admission.CallControl:
		return s.decide(ctx, upctx, a, msg, fwd)
	case admission.CallGetSession:
		resp, err := fwd()
		return resp, nil, visibleSession(a.Principal, msg, resp, err)
	case admission.CallListSessions:
		out, err := s.listOwn(upctx, a.Principal, msg)
		if err != nil {
			return nil, nil, err
		}
		return nil, out, nil
	case admission.CallRegisterPolicy, admission.CallUnregisterPolicy:
		resp, err := fwd()
		if err == nil {
			s.observePolicy(a.Call, msg, resp)
		}
		return resp, nil, err
	case admission.CallAuthenticated, admission.CallDiscovery: // forwarded as they are (on the relay; grpc-go relays them as streams)
		resp, err := fwd()
		return resp, nil, err
	}
	return nil, nil, status.Error(codes.Internal, a.Op+" is not a unary call Warden answers")
}

// decide decides a Send or control call and, allowed, forwards it and
// settles the decision on the runtime's Ack. A refused Send is answered
// with an Ack, as the runtime answers one; a refused control call with a
// gRPC status, as the runtime refuses those.
func (s *Server) decide(ctx, upctx context.Context, a *admission.Admission, msg []byte, fwd forward) ([]byte, proto.Message, error) {
	d, own, err := s.judge(ctx, upctx, a, msg)
	if own != nil || err != nil {
		return nil, own, err
	}
	resp, err := fwd()
	ak, err := s.ackOf(a, resp, err)
	s.settle(ctx, d, ak, err)
	return resp, nil, err
}

// judge is decide up to the forward: the decision, allowed, or Warden's
// own answer (own, or err: a refusal, a status).
func (s *Server) judge(ctx, upctx context.Context, a *admission.Admission, msg []byte) (proxy.Decision, proto.Message, error) {
	r, refused := s.gate.Request(a, msg)
	if refused != nil {
		return proxy.Decision{}, nil, refusal{*refused}
	}
	r.Acked = a.Call == admission.CallSend
	d, err := s.sessions.Enforce(upctx, r)
	if err != nil {
		return proxy.Decision{}, nil, s.undecided(ctx, err)
	}
	if !d.Allow {
		rf := admission.Refused(d, r)
		if a.Call == admission.CallSend {
			return proxy.Decision{}, &macpv1.SendResponse{Ack: rf.Ack(r.Envelope)}, nil
		}
		return proxy.Decision{}, nil, refusal{rf}
	}
	return d, nil, nil
}

// ackOf reads the runtime's Ack in its answer to a decided call (resp, err
// as forward returned them): an answer that does not decode is the
// runtime's failure.
func (s *Server) ackOf(a *admission.Admission, resp []byte, err error) (ack, error) {
	var ak ack // SendResponse and the control responses share {ack}
	if err == nil {
		if ak, err = readAck(resp); err != nil {
			err = s.upstreamError(errors.New("the runtime's " + a.Op + " response does not decode"))
		}
	}
	return ak, err
}

// undecided maps "could not decide" onto the wire, once for every MACP call:
// refused, retryable, with a generic text for the client and the detail in
// the log.
func (s *Server) undecided(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	s.log.Warn("could not decide a MACP message; refusing it", "err", err)
	return refusal{admission.Undecided}
}

// settle ends a decision by the runtime's answer to the message: accepted
// commits the state. When the answer shows Warden's state no longer follows
// the runtime (it does not know the session, it applied a retransmission as
// new, or the answer was lost), the session is forgotten, still held, and
// rebuilt on its next message (sessions.Decider.SettleForget). A call that
// never reached the runtime leaves the state as it was.
func (s *Server) settle(ctx context.Context, d proxy.Decision, a ack, err error) {
	if forgets(d, a, err) {
		s.sessions.SettleForget(context.WithoutCancel(ctx), d)
		return
	}
	d.Settle(err == nil && a.ok && !a.duplicate)
}

// forgets reports whether settle forgets the decision's session: the
// answer was lost after the call reached the runtime, or shows Warden's
// state no longer follows it. Forgetting may wait for the session (another
// message may hold it until its own answer comes); settling otherwise never
// waits.
func forgets(d proxy.Decision, a ack, err error) bool {
	if err != nil {
		return !errors.Is(err, errUpstreamFull) && !errors.As(err, new(notReached))
	}
	return a.ok && d.Duplicate && !a.duplicate || !a.ok && string(a.code) == string(rules.CodeSessionNotFound)
}

// visibleSession is the answer to a GetSession made as p (msg its request
// message), given the runtime's answer (resp, err): the runtime's when p
// takes part in the session; else the runtime's own answer for a session
// that does not exist (admission.NoSession), word for word, so that session
// ids cannot be probed: whether the session does not exist, p does not take
// part in it, or the runtime refused p (PermissionDenied, FORBIDDEN, for an
// existing session).
func visibleSession(p authn.Principal, msg, resp []byte, err error) error {
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound, codes.PermissionDenied:
		return noSession(msg)
	default:
		return err
	}
	var out macpv1.GetSessionResponse
	if err := proto.Unmarshal(resp, &out); err != nil {
		return status.Error(codes.Internal, "the runtime's GetSession response does not decode")
	}
	if !member(out.GetMetadata(), p.ID) {
		return noSession(msg)
	}
	return nil
}

// noSession is the runtime's answer for no such session to a GetSession
// (msg its request message, which the runtime read).
func noSession(msg []byte) error {
	var in macpv1.GetSessionRequest
	if proto.Unmarshal(msg, &in) != nil {
		return status.Error(codes.InvalidArgument, "INVALID_ARGUMENT: the GetSessionRequest does not decode")
	}
	return refusal{admission.NoSession(in.GetSessionId())}
}

// observePolicy follows the runtime's policy registry from a registration
// or unregistration it accepted (req and resp the call's messages). A
// registered descriptor is recorded so sessions can bind it, over any copy
// held (the runtime accepts an id it holds no policy under); an
// unregistered policy is forgotten, so new sessions cannot bind it.
func (s *Server) observePolicy(call admission.Call, req, resp []byte) {
	if call == admission.CallUnregisterPolicy {
		var in macpv1.UnregisterPolicyRequest
		var out macpv1.UnregisterPolicyResponse
		if proto.Unmarshal(req, &in) == nil && proto.Unmarshal(resp, &out) == nil && out.GetOk() {
			s.sessions.Policies().Remove(in.GetPolicyId())
		}
		return
	}
	var in macpv1.RegisterPolicyRequest
	var out macpv1.RegisterPolicyResponse
	if proto.Unmarshal(req, &in) != nil || proto.Unmarshal(resp, &out) != nil || !out.GetOk() {
		return
	}
	d, err := macp.DescriptorOf(in.GetPolicyDescriptor())
	if err != nil {
		s.sessions.Policies().Remove(d.PolicyID)
		s.log.Warn("registered policy has rules that are not a JSON object; sessions binding it will be refused", "policy_id", d.PolicyID, "err", err)
	} else if err := s.sessions.Policies().Replace(d); err != nil {
		s.sessions.Policies().Remove(d.PolicyID)
		s.log.Warn("could not record a registered policy", "policy_id", d.PolicyID, "err", err)
	}
}
