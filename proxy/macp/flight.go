package macp

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentwarden/warden/proxy"
	"github.com/agentwarden/warden/proxy/macp/admission"
)

// flightStream is a call's stream with its flight's context
// (proxy.Enforcer.Begin), which every decision made on the call reads.
type flightStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s flightStream) Context() context.Context { return s.ctx }

// inFlight is the grpc-go sidecar's stream interceptor: every call but
// Send (a registered unary method: send begins its own) is one flight,
// whose server span is otelgrpc's.
func (s *Server) inFlight(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, f := s.enf.Begin(ss.Context(), admission.Requests(), proxy.DoorSidecar, nil)
	err := h(srv, flightStream{ServerStream: ss, ctx: ctx})
	f.End(failedCall(err))
	return err
}

// failedCall reports whether a call's error is one of Warden's or the
// runtime's (the request metrics' outcome "error"), not a refusal: the
// runtime or the keys unavailable, an internal error, no room.
func failedCall(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.DataLoss, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}
