package macp

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/agentwarden/warden/rules/macp"
	macpv1 "github.com/agentwarden/warden/wire/macp/v1"
)

// policyCall forwards a unary policy call admitted with the upstream
// context ctx; the caller reads the request and response it returns.
func (s *Server) policyCall(ss grpc.ServerStream, ctx context.Context, method string) (req, resp *frame, err error) {
	if req, err = recvOne(ss); err != nil {
		return nil, nil, err
	}
	resp, err = s.invoke(ctx, ss, method, req)
	return req, resp, err
}

// registerPolicy forwards a registration and, when the runtime accepts it,
// records the descriptor so sessions can bind it, over any copy held (the
// runtime accepts an id it holds no policy under).
func (s *Server) registerPolicy(ss grpc.ServerStream, ctx context.Context) error {
	req, resp, err := s.policyCall(ss, ctx, methodRegisterPo)
	if err != nil {
		return err
	}
	var in macpv1.RegisterPolicyRequest
	var out macpv1.RegisterPolicyResponse
	if proto.Unmarshal(req.b, &in) == nil && proto.Unmarshal(resp.b, &out) == nil && out.GetOk() {
		d, err := macp.DescriptorOf(in.GetPolicyDescriptor())
		if err != nil {
			s.enf.Policies().Remove(d.PolicyID)
			s.log.Warn("registered policy has rules that are not a JSON object; sessions binding it will be refused", "policy_id", d.PolicyID, "err", err)
		} else if err := s.enf.Policies().Replace(d); err != nil {
			s.enf.Policies().Remove(d.PolicyID)
			s.log.Warn("could not record a registered policy", "policy_id", d.PolicyID, "err", err)
		}
	}
	return ss.SendMsg(resp)
}

// unregisterPolicy forwards an unregistration and, when the runtime accepts
// it, forgets the policy, so that new sessions cannot bind it.
func (s *Server) unregisterPolicy(ss grpc.ServerStream, ctx context.Context) error {
	req, resp, err := s.policyCall(ss, ctx, service+"UnregisterPolicy")
	if err != nil {
		return err
	}
	var in macpv1.UnregisterPolicyRequest
	var out macpv1.UnregisterPolicyResponse
	if proto.Unmarshal(req.b, &in) == nil && proto.Unmarshal(resp.b, &out) == nil && out.GetOk() {
		s.enf.Policies().Remove(in.GetPolicyId())
	}
	return ss.SendMsg(resp)
}
