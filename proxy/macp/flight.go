package macp

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// failedCall reports whether a call's error is one of Warden's or the
// runtime's (the request metrics' outcome "error"), not a refusal: the
// runtime or the keys unavailable, an internal error, no room.
func failedCall(err error) bool { return failedCode(status.Code(err)) }

// failedCode is failedCall of a status code.
func failedCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.DataLoss, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	}
	return false
}
