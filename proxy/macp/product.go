//go:build !wardenoracle

package macp

import (
	"context"
	"net"
)

// grpcDoorBuilt reports whether this binary holds the grpc-go front door
// (oracle.go): not the product's, whose only MACP front door is the relay.
const grpcDoorBuilt = false

// serveGRPC is never reached in the product: Validate refuses
// TransportGRPC, and New validates.
func (s *Server) serveGRPC(_ context.Context, lis net.Listener) error {
	lis.Close()
	return errGRPCDoorRetired
}
